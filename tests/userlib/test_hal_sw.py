"""libparanic HAL on the `sw` backend: the conformance vectors (userlib/tests/
hal_conformance.c) under pn_launch with 2..8 processes, the sw backend's own
behaviour (sw_cluster_test.c), proof that the vectors catch a broken NIC, the
launcher, and the benchmark's output format."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from paranic.paths import TREE as ROOT
from paranic.launch import BIN, TESTS, USERLIB_BUILD as BUILD

CASES_2 = ["vectors", "stamp", "errors", "fullring", "barrier"]
CASES_3 = CASES_2 + ["multisend"]


def conformance(run_nodes, n, name, *args, env=None):
    return run_nodes([str(TESTS / "hal_conformance"), "sw", *args], n, name, timeout=90, env=env)


def test_library_builds_and_exports(userlib_build):
    so = BUILD / "libparanic.so"
    assert so.exists() and (BUILD / "libparanic.a").exists()
    syms = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True).stdout
    for fn in ("pn_open", "pn_close", "pn_send_pio", "pn_send_dma", "pn_send", "pn_recv_header",
               "pn_recv_body", "pn_recv_wait", "pn_barrier", "pn_status", "pn_sw_cluster_destroy",
               "pn_rd_open", "pn_rd_send", "pn_rd_recv", "pn_rd_peek", "pn_backend_sw"):
        assert f" {fn}\n" in syms, fn


def test_public_headers_stand_alone(userlib_build, tmp_path):
    """pn_hal.h and pn_rawdata.h compile on their own, in C11 and in C++."""
    src = tmp_path / "h.c"
    src.write_text("#include <paranic/pn_rawdata.h>\n#include <paranic/pn_hal.h>\n"
                   "int main(void) { pn_hal_t *h = 0; return pn_close(h) == -22 ? 0 : 1; }\n")
    inc = str(ROOT / "userlib/include")
    for cc, std in (("gcc", "-std=c11"), ("g++", "-std=c++17")):
        r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-I", inc, "-x",
                            "c" if cc == "gcc" else "c++", str(src), "-o", str(tmp_path / "a"),
                            "-L", str(BUILD), f"-Wl,-rpath,{BUILD}", "-lparanic"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(tmp_path / "a")]).returncode == 0


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_conformance(run_nodes, n):
    r = conformance(run_nodes, n, f"conf{n}")
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0"
    for node in range(n):
        assert r.nodes[node][-1] == "PASS", r.out
        for case in (CASES_3 if n >= 3 else CASES_2):
            r.ok(node, case)
        if n == 2:
            assert "skip multisend (needs 3 nodes)" in r.nodes[node]
    # Exact figures the vectors check.
    assert "17 vectors, 1104 packets received" in r.ok(0, "vectors")
    assert r.ok(0, "errors") == "ok errors 17 HAL refusals, 7 NIC refusals counted, nothing delivered"
    assert r.ok(1, "fullring").startswith(
        "ok fullring received 773 PIO + 1024 DMA packets in order; ring held exactly 256 while full")
    if n >= 3:
        assert r.ok(0, "multisend").startswith(
            f"ok multisend received {(n - 1) * 3000} messages from {n - 1} senders in order")
    assert r.ok(0, "barrier").startswith(f"ok barrier 30 barriers of {n} nodes")


def test_barrier_many(run_nodes):
    """60 barriers of 8 processes (more processes than cores): no early exit, exact counts."""
    r = conformance(run_nodes, 8, "bar8", "--case", "barrier", "--barriers", "60")
    assert r.rc == 0, r.out
    for node in range(8):
        assert r.ok(node, "barrier").startswith("ok barrier 60 barriers of 8 nodes")


@pytest.mark.parametrize("fault,expect", [
    ("drop=300", "vectors"),        # a lost packet
    ("corrupt=200", "vectors"),     # a flipped payload bit
    ("nostamp", "vectors"),         # source not stamped by the NIC
])
def test_conformance_catches_broken_nic(run_nodes, fault, expect):
    """The sw backend's fault injector ($PARANIC_SW_FAULT) makes a broken NIC: the
    vectors must fail, and pn_launch -f must stop the run at once."""
    r = conformance(run_nodes, 3, f"fault-{fault}",
                    env={"PARANIC_SW_FAULT": fault, "HAL_CONF_TIMEOUT_MS": "3000"})
    assert r.rc != 0, r.out
    assert any(f"FAIL {expect}:" in f for f in r.fails()), r.out
    assert "launch: fail fast, killing the others" in r.launch, r.out


def test_sw_backend_specifics(userlib_build):
    r = subprocess.run([str(TESTS / "sw_cluster_test"), f"pytest-sw-{os.getpid()}"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[-1] == "PASS", r.stdout + r.stderr
    for name in ("contexts", "reclaim", "dead_receiver", "shapes", "environment"):
        assert any(ln.startswith(f"ok {name}") for ln in lines), name
    assert any(ln.startswith("ok dead_receiver 300 packets into a dead 256-slot ring: 256 queued, 44 dropped")
               for ln in lines)


def test_launcher(userlib_build):
    """pn_launch passes the node identity, collects output per node, reports failures."""
    r = subprocess.run([str(BIN / "pn_launch"), "-n", "3", "-c", "pytest-launch", "--",
                        "sh", "-c", 'echo "$PARANIC_NODE/$PARANIC_NODES/$PARANIC_CLUSTER"'],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert sorted(ln for ln in r.stdout.splitlines() if ":" in ln and not ln.startswith("launch")) == [
        "0: 0/3/pytest-launch", "1: 1/3/pytest-launch", "2: 2/3/pytest-launch"]
    r = subprocess.run([str(BIN / "pn_launch"), "-n", "2", "-f", "-t", "20", "--",
                        "sh", "-c", 'if [ "$PARANIC_NODE" = 1 ]; then exit 3; fi; sleep 30'],
                       capture_output=True, text=True, timeout=40)
    assert r.returncode == 1
    assert "launch: node 1 exited with status 3" in r.stdout
    assert "launch: fail fast, killing the others" in r.stdout
    r = subprocess.run([str(BIN / "pn_launch"), "-n", "1", "-t", "1", "--", "sleep", "10"],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 124 and "launch: timeout after 1 s" in r.stdout


def test_bench_output(run_nodes):
    """The micro-benchmark prints one JSON object per measurement (not a timing test)."""
    r = run_nodes([str(BIN / "pn_bench"), "--max", "4096", "--scale", "0.02"], 2, "bench", timeout=120)
    assert r.rc == 0, r.out
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    sizes = [1 << i for i in range(13)]
    for layer in ("hal", "rawdata"):
        for bench in ("pairwise", "pingpong", "stream"):
            got = [row["bytes"] for row in rows if row["layer"] == layer and row["bench"] == bench]
            assert got == sizes, (layer, bench, got)
        assert [row["bytes"] for row in rows if row["layer"] == layer and row["bench"] == "overhead"] == \
            [0, 8, 64, 256]
    for row in rows:
        assert row["backend"] == "sw" and row["iters"] >= 2
        assert row["ns_per_iter"] > 0 and row["latency_ns"] > 0 and row["MBps"] >= 0


@pytest.mark.slow
@pytest.mark.parametrize("rep", range(10))
def test_conformance_repeated(run_nodes, rep):
    """The whole suite again and again with 4..6 processes on 2 cores (scheduling varies)."""
    n = 4 + rep % 3
    r = conformance(run_nodes, n, f"rep{rep}")
    assert r.rc == 0 and not r.fails(), r.out
