"""The clock of libparanic's own deadlines on the sim backend (docs/userlib.md,
"Deadlines"): the simulator's work clock (``pn_sim_global.work_ns``), which stands still
while the simulator cannot run. A simulator left without a CPU (here: stopped with
SIGSTOP for several deadlines, as a loaded machine would starve it) must not turn a
slow cluster into a dead one: the transfer goes on afterwards and ends without error.
With the wall clock as the deadline, the sender gave up with -ETIMEDOUT."""

from __future__ import annotations

import os
import signal
import threading
import time

from paranic.sim import run as simrun

from simtest import TESTS, launch, sim_socket

# One 1 MiB descriptor is one step of progress for the deadline: about a second of the work
# clock on an idle machine here, twice that on a slower CI machine. The deadline leaves
# room for that, and the stop lasts two and a half deadlines.
DEADLINE_MS = 4000
STOP_S = 10.0


def test_stopped_simulator_is_not_a_dead_network(sim_binary, userlib_build):
    sim = simrun.start("ring:4", socket=sim_socket("deadline"))
    result = {}
    try:
        def run():
            result["r"] = launch(sim, [str(TESTS / "rawdata_test"), "sizes", "sim"], 2, "deadline", timeout=300,
                                 env={"PARANIC_RD_TIMEOUT_MS": str(DEADLINE_MS)})

        t = threading.Thread(target=run)
        t.start()
        # Wait until the 1 MiB messages are under way (DMA moving), then stop the simulator.
        t0 = time.time()
        while sim.counters()["mmio_ops"] < 400 and t.is_alive():
            assert time.time() - t0 < 120, "the transfer did not start"
            time.sleep(0.05)
        assert t.is_alive(), result["r"].out
        os.kill(sim.pid, signal.SIGSTOP)
        time.sleep(0.3)   # the signal has taken effect
        before = sim.counters()
        time.sleep(STOP_S)
        stopped = sim.counters()
        os.kill(sim.pid, signal.SIGCONT)
        t.join(300)
        r = result["r"]
        assert r.rc == 0 and not r.fails(), r.out
        assert r.ok(0, "sizes").startswith("ok sizes 9 sizes"), r.out
        # The work clock stood still while the simulator was stopped (it moved by less than
        # a quarter of the deadline, where the wall clock moved by two and a half deadlines).
        assert stopped["cycle"] == before["cycle"]
        assert stopped["work_ns"] - before["work_ns"] < DEADLINE_MS * 1_000_000 // 4, (before, stopped)
        # ... and runs while the simulator works.
        assert sim.counters()["work_ns"] > stopped["work_ns"]
    finally:
        try:
            os.kill(sim.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        assert sim.stop() == 0
