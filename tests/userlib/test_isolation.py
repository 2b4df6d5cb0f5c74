"""Isolation between owners of a context on the `sw` backend (docs/reliability.md):
userlib/tests/iso_test.c against a fresh sw cluster. The same program runs against the
simulated gateware in tests/sim/test_isolation_sim.py.

* handover: a new owner of a context finds its RX ring and status block zero, a PIO
  header saying 1000 bytes with nothing staged is refused (it used to send the previous
  owner's last PIO bytes), and bytes of the window it did not write go out as zeros.
* dereg: pn_dma_free / pn_mem_deregister return -EBUSY while a DMA send still reads the
  memory (it used to return 0, and the munmap that followed killed the sender).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from paranic.launch import TESTS, clean_env


@pytest.mark.parametrize("case", ["handover", "dereg"])
def test_isolation_sw(userlib_build, case):
    cluster = f"pytest-iso-{os.getpid()}-{case}"
    try:
        r = subprocess.run([str(TESTS / "iso_test"), "sw", cluster, case], capture_output=True, text=True,
                           timeout=60, env=clean_env())
    finally:
        Path(f"/dev/shm/paranic-{cluster}").unlink(missing_ok=True)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[-1] == "PASS", r.stdout + r.stderr
    assert any(ln.startswith(f"ok {case} ") for ln in lines), r.stdout
