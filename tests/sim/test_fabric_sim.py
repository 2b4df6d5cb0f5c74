"""The libfabric provider ``paranic`` (userlib/fabric, docs/fabric.md) on the simulated
4-node ring: the same libfabric program as on `sw` (userlib/fabric/tests/fi_test.c,
case ``match``: masks, directed receive, remote CQ data, inject, truncation, cancel,
peek/claim/discard, FI_MSG) over the gateware's host interface; the provider's counters
show the bytes went through the simulated NIC."""

from __future__ import annotations

import glob
import re
from pathlib import Path

from simtest import BUILD, TESTS, launch

FI_TEST = str(TESTS / "fi_test")


def test_provider_functions_on_the_simulator(sim4, tmp_path):
    addr = tmp_path / "addr"
    addr.mkdir()
    env = {"FI_PROVIDER_PATH": str(BUILD), "PARANIC_FI_STATS": str(tmp_path / "stats-%p"),
           "FI_TEST_BIG": str(96 * 1024)}   # the rendezvous truncation case, smaller
    r = launch(sim4, [FI_TEST, "match", str(addr)], 2, "fi-match", timeout=300, env=env)
    assert r.rc == 0 and not r.fails(), r.out
    for n in (0, 1):
        assert any(ln.startswith("ok fi_test match") for ln in r.nodes[n]), r.out
    rows = [{k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", Path(f).read_text())}
            for f in glob.glob(str(tmp_path / "stats-*"))]
    assert len(rows) == 2
    for s in rows:
        assert s["nic_sent_bytes"] > 200_000 and s["shm_sent_msgs"] == 0, s
        assert s["nic_tx_packets"] > 100 and s["truncated"] == 2, s
