"""Isolation between owners of a context on the simulated gateware (docs/reliability.md):
userlib/tests/iso_test.c (see tests/userlib/test_isolation.py for the cases)
against the 4-node ring. The hand-over is the harness's OPEN sequence (ctxseq.c), which
waits for the PIO buffer clear that ctx_reset starts; the unstaged header is refused
by the PIO engine (hw/host_pio.py), counted in err_length."""

from __future__ import annotations

import subprocess

import pytest

from simtest import TESTS, clean_env
from paranic.hw.standalone import read_csr_json
from rawclient import RawClient


@pytest.mark.parametrize("case", ["handover", "dereg"])
def test_isolation_sim(sim4, sim_binary, case):
    regs = read_csr_json(sim_binary.parent / "csr.json")
    probe = RawClient(sim4.socket, node=0)
    probe.attach()
    before = probe.csr(regs["host_err_length"].addr)
    try:
        r = subprocess.run([str(TESTS / "iso_test"), "sim", "iso", case], capture_output=True, text=True,
                           timeout=300, env=sim4.env(clean_env()))
        lines = r.stdout.splitlines()
        assert r.returncode == 0 and lines[-1] == "PASS", r.stdout + r.stderr + sim4.log_text()[-2000:]
        assert any(ln.startswith(f"ok {case} ") for ln in lines), r.stdout
        if case == "handover":   # the one refused header, counted by node 0's NIC
            assert probe.csr(regs["host_err_length"].addr) - before == 1
    finally:
        probe.close()
