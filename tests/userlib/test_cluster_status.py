"""pn_cluster_status and `paranic cluster status` on the sw backend: no firmware (state
NONE), no links, node ids = indices; bad input refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from paranic.launch import clean_env, cluster_name
from paranic.lib import Hal, PnError, sw_cluster_destroy


@pytest.fixture
def sw4(userlib_build):
    name = cluster_name(f"pytest-{os.getpid()}-cstatus")
    h = Hal.open(backend="sw", cluster=name, nodes=4, node=2)
    try:
        yield name, h
    finally:
        h.close()
        sw_cluster_destroy(name, missing_ok=True)


def test_hal_cluster_status_sw(sw4):
    _, h = sw4
    nodes = h.cluster()
    assert [n["index"] for n in nodes] == [0, 1, 2, 3]
    assert [n["node_id"] for n in nodes] == [0, 1, 2, 3]
    for n in nodes:
        assert n["fw_state"] == 0 and n["flags"] == 0 and n["n_links"] == 0 and n["links"] == []
        assert n["dna"] == 0 and n["epoch"] == 0
    assert h.cluster_status(4) is None
    with pytest.raises((PnError, TypeError)):
        h.cluster_status(-1)


def test_cli_cluster_status_sw(sw4):
    name, _ = sw4
    env = clean_env()
    cmd = [sys.executable, "-m", "paranic.cli", "cluster", "status", "--backend", "sw", "--cluster", name]
    r = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["backend"] == "sw" and len(d["nodes"]) == 4
    assert [n["fw_state"] for n in d["nodes"]] == ["none"] * 4
    assert [n["node_id"] for n in d["nodes"]] == [0, 1, 2, 3]
    assert all(n["links"] == [] for n in d["nodes"])
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "backend sw: 4 node(s)" in r.stdout and r.stdout.count("no links") == 4
    r = subprocess.run([sys.executable, "-m", "paranic.cli", "cluster", "status", "--backend", "bogus"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "invalid choice" in r.stderr
