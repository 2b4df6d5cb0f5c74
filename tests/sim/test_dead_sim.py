"""A simulator that dies under its clients (docs/reliability.md, bounded waits): six clients attached to a
ring:4 simulator, the simulator killed with SIGKILL, then every kind of waiting call
(pn_tx_wait after a DMA send, pn_barrier, pn_send_pio until the window is needed again,
pn_recv_wait, rawdata's receive) and pn_status return -EIO instead of waiting for ever
or reading all-ones registers as a status. docs/reliability.md, "Dead parts".
"""

from __future__ import annotations

import errno
import subprocess
import sys
import time

import pytest

from simtest import clean_env, sim_socket
from paranic.sim import run as simrun

#: What each client does once the simulator is gone: (node, operation).
CLIENTS = [(0, "tx_wait"), (1, "barrier"), (2, "send_pio"), (3, "status"), (0, "recv"), (1, "rawdata")]

CLIENT = r"""
import sys, time
from paranic import lib
from paranic.clib import PnError

node, op = int(sys.argv[1]), sys.argv[2]
if op == "rawdata":
    obj = lib.RawData.open(backend="sim", node=node)
    h = obj.hal
else:
    h = obj = lib.Hal.open(backend="sim", node=node)
h.send_pio(node, h.ctx_id, 1, b"x")   # the NIC works: one packet to ourselves
h.tx_wait()
print("ready", flush=True)
sys.stdin.readline()   # the test killed the simulator
t0 = time.monotonic()
try:
    if op == "tx_wait":
        h.send_dma((node + 1) % 4, 0, 7, b"y" * 4096)   # pn_send_dma, then pn_tx_wait
    elif op == "barrier":
        h.barrier()
    elif op == "send_pio":
        for i in range(100000):
            h.send_pio((node + 1) % 4, 0, i, b"z" * 64)
    elif op == "status":
        st = h.status()
        print(f"status returned {st}", flush=True)
    elif op == "recv":
        while True:
            if h.recv(timeout_ns=None) is None:
                break
    elif op == "rawdata":
        obj.recv(timeout_ns=None)
    print(f"no error after {time.monotonic() - t0:.3f} s", flush=True)
except PnError as e:
    print(f"error {e.errno} after {time.monotonic() - t0:.3f} s", flush=True)
"""


def test_dead_simulator_every_wait_returns_eio(sim_binary, userlib_build):
    sim = simrun.start("ring:4", socket=sim_socket("dead-sim"))
    env = sim.env(clean_env())
    procs = []
    try:
        for node, op in CLIENTS:
            procs.append(subprocess.Popen([sys.executable, "-c", CLIENT, str(node), op], env=env, text=True,
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        for p, (node, op) in zip(procs, CLIENTS):
            line = p.stdout.readline()
            assert line.strip() == "ready", f"{op} on node {node}: {line}{p.stdout.read() if p.poll() else ''}"
        sim.proc.kill()   # SIGKILL: no goodbye to anyone
        sim.proc.wait()
        t0 = time.monotonic()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        results = {}
        for p, (node, op) in zip(procs, CLIENTS):
            try:
                out, _ = p.communicate(timeout=max(1.0, 30 - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
                pytest.fail(f"{op} on node {node} still waits 30 s after the simulator died:\n{out}")
            results[op] = out.strip().splitlines()[-1] if out.strip() else ""
        print(results)
        for op, last in results.items():
            assert last.startswith(f"error {errno.EIO} "), f"{op}: {last!r} (wanted -EIO)"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        sim.stop()   # removes the killed simulator's socket and shared memory
