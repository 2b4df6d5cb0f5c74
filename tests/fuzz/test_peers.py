"""Peers that lie (tests/fuzz/peers.c): a fake simulator and a fake paranicd answer
libparanic with what the fuzz harnesses showed to be dangerous; the library must refuse
with an error, never crash and never hand garbage to its caller. Before the checks of
sim_proto.c and daemon_proto.c, sim-clk0 died of SIGFPE, sim-trace-off of SIGSEGV,
sim-global-short of SIGBUS, daemon-count returned three node records that were never sent
and daemon-strings a 144-byte string out of a 64-byte field."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from paranic.sim.paths import build_lock

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "fuzz"
CASES = ["sim-mtu", "sim-clk0", "sim-trace-off", "sim-global-short", "sim-refused", "daemon-count",
         "daemon-strings"]


@pytest.fixture(scope="module")
def peers(userlib_build) -> Path:
    with build_lock("fuzz"):
        r = subprocess.run(["make", "-s", "-C", str(HERE), f"BUILD={BUILD}", f"{BUILD}/peers"],
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return BUILD / "peers"


@pytest.mark.parametrize("case", CASES)
def test_lying_peer_refused(peers, case):
    r = subprocess.run([str(peers), case], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith(f"ok {case}"), \
        f"{case}: exit {r.returncode} (negative: killed by that signal)\n{r.stdout}{r.stderr}"


def test_peers_usage(peers):
    r = subprocess.run([str(peers), "nonsense"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "usage" in r.stderr
