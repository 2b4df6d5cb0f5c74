"""The pause (docs/simulator.md, "The clock"): simulated time does not run on while a
client that polls has not looked at what the harness made visible to it.

A receiver process (node 1) waits in ``pn_recv_wait``; the test stops it (SIGSTOP), as a
loaded machine would by leaving it without a CPU, and sends it a packet from node 0. The
clock must stand within the grace of the packet's arrival for as long as the receiver is
stopped (below the wall-clock cap), and go on once it runs again. A receiver that stops
polling (it sleeps) holds the clock up for one cap at most."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from paranic.sim import run as simrun

from simtest import sim_socket

GRACE = 8
CAP_MS = 1500

RECEIVER = r"""
import sys, time
from paranic import lib
h = lib.Hal.open(node=1, nodes=2)
print(h.ctx_id, flush=True)
for i in range(2):
    hdr, data = h.recv(timeout_ns=120_000_000_000)
    print("got", data.decode(), flush=True)
    if i == 0:
        time.sleep(6)       # stops polling: the second packet finds it asleep
h.close()
"""


def _wait(cond, timeout: float, what: str):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def env(userlib_build, monkeypatch):
    for k in list(os.environ):
        if k.startswith("PARANIC_"):
            monkeypatch.delenv(k)
    return monkeypatch


def test_pause_waits_for_a_stopped_client(sim_binary, env):
    from paranic import lib

    with simrun.start("ring:4", socket=sim_socket("pause"),
                      extra_args=["--pause-grace", str(GRACE), "--pause-cap-ms", str(CAP_MS)]) as sim:
        for k, v in sim.env({}).items():
            env.setenv(k, v)
        child = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True,
                                 env=dict(os.environ))
        a = lib.Hal.open(node=0, nodes=2)
        done = threading.Event()

        def poll_a():   # node 0 keeps polling: the clock waits only for the receiver
            while not done.is_set():
                a.recv(timeout_ns=20_000_000)

        t = threading.Thread(target=poll_a, daemon=True)
        try:
            ctx = int(child.stdout.readline())
            t.start()
            time.sleep(0.3)                      # the receiver is in its wait loop
            before = sim.trace(1, ctx)["rx_valids"]
            c0 = sim.counters()
            os.kill(child.pid, signal.SIGSTOP)
            a.send_pio(1, ctx, 1, b"first!!!")
            _wait(lambda: sim.trace(1, ctx)["rx_valids"] > before, 30, "the packet at node 1")
            arrived = sim.trace(1, ctx)["rx_valid_cycle"]
            time.sleep(0.6)                      # stopped: the clock stands
            stood = sim.cycle()
            assert arrived <= stood <= arrived + GRACE + 1, (arrived, stood)
            c1 = sim.counters()
            assert c1["pauses"] > c0["pauses"] and c1["pause_caps"] == c0["pause_caps"], (c0, c1)
            os.kill(child.pid, signal.SIGCONT)
            assert child.stdout.readline().strip() == "got first!!!"
            _wait(lambda: sim.cycle() > stood + 1000, 30, "the clock to go on")

            # The receiver sleeps (it does not poll): whatever becomes visible to it now
            # (its status block, the second packet) holds the clock up for one cap, once.
            t0 = time.time()
            time.sleep(0.2)
            before = sim.trace(1, ctx)["rx_valids"]
            a.send_pio(1, ctx, 1, b"second!!")
            _wait(lambda: sim.trace(1, ctx)["rx_valids"] > before, 30, "the second packet")
            arrived = sim.trace(1, ctx)["rx_valid_cycle"]
            _wait(lambda: sim.cycle() > arrived + GRACE + 200, 30, "the clock to go on")
            waited = time.time() - t0
            assert sim.counters()["pause_caps"] == c1["pause_caps"] + 1
            assert waited < CAP_MS / 1000 + 4, waited
            assert child.stdout.readline().strip() == "got second!!"
            assert child.wait(timeout=60) == 0
        finally:
            done.set()
            if child.poll() is None:
                os.kill(child.pid, signal.SIGCONT)
                child.kill()
            t.join(timeout=5) if t.is_alive() else None
            a.close()
