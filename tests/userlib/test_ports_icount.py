"""Instruction budget of the ports layer's NIC path (userlib/tests/ports_icount.c).

ports_icount runs a ping-pong between two ports of one process on the `sw` backend:
the sw NIC delivers in the sender's doorbell, so nothing waits and the instructions per
round trip are the same in every run. Under valgrind's callgrind (when installed) the
8-byte round trip and an empty progress round must stay within the budgets below,
about 5 % above the measured 5330 and 408 instructions (docs/ports.md has the history
of these figures).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from paranic.launch import TESTS

ICOUNT = TESTS / "ports_icount"

# Instructions (callgrind Ir) per 8-byte round trip with the receive posted first, and
# per pn_port_progress with nothing arriving.
BUDGET = {"posted": 5600, "idle": 430}


@pytest.mark.parametrize("mode", ["posted", "unx", "idle"])
def test_icount_runs(userlib_build, mode):
    r = subprocess.run([str(ICOUNT), mode, "300", "8"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and f"ok icount {mode}" in r.stdout, r.stdout + r.stderr


def test_icount_bad_args(userlib_build):
    r = subprocess.run([str(ICOUNT), "nonsense", "1"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "usage" in r.stderr


@pytest.mark.skipif(not shutil.which("valgrind"), reason="valgrind not installed")
@pytest.mark.parametrize("mode", sorted(BUDGET))
def test_icount_budget(userlib_build, tmp_path, mode):
    iters = 500
    out = tmp_path / "cg.out"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--collect-atstart=no",
                        "--toggle-collect=run_loop", str(ICOUNT), mode, str(iters), "8"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and f"ok icount {mode}" in r.stdout, r.stdout + r.stderr
    m = re.search(r"Collected : (\d+)", r.stderr)
    assert m, r.stderr
    per = int(m.group(1)) / iters
    assert per <= BUDGET[mode], f"{mode}: {per:.0f} instructions per iteration (budget {BUDGET[mode]})"
    assert per > BUDGET[mode] / 4, f"{mode}: {per:.0f} instructions: did the loop run?"
