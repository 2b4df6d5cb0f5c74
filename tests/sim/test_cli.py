"""The `paranic` commands as a user runs them: `paranic demo --quick` (the short demo),
`paranic bench ...` (JSON shape, bad input), `paranic run` and `paranic selftest` on the
sw backend and on a simulator they start themselves. The demo and a benchmark run as a
user's shell would start them: the installed `paranic` command, from a directory
outside the tree, with no PARANIC_* variable set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.paths import BUILD_ROOT, DOCS
from paranic.sim import run as simrun
from simtest import ROOT

PARANIC = [sys.executable, "-m", "paranic.cli"]
#: The command `make deps` installs (a console script beside the venv's python).
PARANIC_CMD = Path(sys.executable).parent / "paranic"


def paranic(*args: str, timeout: int = 600, env: dict | None = None, cwd: Path = ROOT,
            cmd: list[str] = PARANIC) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    e.update(env or {})
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd, env=e)


def _outside(tmp_path: Path) -> Path:
    """A working directory outside the tree."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    assert ROOT not in d.resolve().parents
    return d


def _png(p: Path) -> bool:
    return p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_demo_quick(sim_binary, userlib_build, tmp_path):
    """The short demo, run by the installed command from outside the tree with no
    PARANIC_* variable: tables beside ParaStation's figures, plots and JSON under
    build/demo (the documents' plots untouched), JSON rows whose figures hang together
    (total = hw + sw for latencies, max for stream, MB/s from the total), hardware
    figures in the range the gateware allows."""
    assert PARANIC_CMD.exists(), f"{PARANIC_CMD}: run `make deps`"
    out_dir = BUILD_ROOT / "demo"
    docs_img = {p.name: p.read_bytes() for p in (DOCS / "img").glob("*.png")}
    for p in out_dir.glob("demo-*.png"):
        p.unlink()
    cwd = _outside(tmp_path)
    r = paranic("demo", "--quick", cwd=cwd, cmd=[str(PARANIC_CMD)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in (DOCS / "img").glob("*.png")} == docs_img   # tree left as it was
    assert list(cwd.iterdir()) == []
    tmp_path, out = out_dir, out_dir / "results.json"
    assert f"plot: {out_dir / 'demo-messages.png'}" in r.stdout
    for title in ("pairwise — hal", "pairwise — rawdata", "ParaStation P120", "barrier (ParaStation's Table 2)",
                  "protocol hierarchy", "targets"):
        assert title in r.stdout, title
    assert "paranic bench: starting the ring:4 simulator" in r.stderr   # progress is visible
    assert _png(tmp_path / "demo-messages.png") and _png(tmp_path / "demo-barrier.png")
    res = json.loads(out.read_text())
    rows = res["rows"]
    sizes = [1 << i for i in range(13)]
    for bench in ("pairwise", "pingpong", "stream"):
        for layer in ("hal", "rawdata"):
            sel = [x for x in rows if x["bench"] == bench and x["layer"] == layer]
            assert [x["bytes"] for x in sel] == sizes, (bench, layer)
            for x in sel:
                assert x["hw_ns"] > 0 and x["sw_ns"] > 0, x
                want = max(x["hw_ns"], x["sw_ns"]) if bench == "stream" else x["hw_ns"] + x["sw_ns"]
                assert x["total_ns"] == pytest.approx(want, abs=0.2), x
                k = 2 if bench == "pairwise" else 1
                assert x["MBps"] == pytest.approx(k * x["bytes"] * 1e3 / x["total_ns"], rel=1e-3, abs=1e-3), x
                if bench != "stream":   # the median iteration, its spread and sample count beside it
                    sp = x["hw_spread"]
                    assert sp["samples"] >= 2 and sp["min"] <= sp["p10"] <= sp["median"] <= sp["p90"] <= sp["max"], x
                    assert x["hw_ns"] == pytest.approx(sp["median"], abs=0.2) and x["hw_best_ns"] == sp["min"], x
                    assert (x["hw_ns_p10"], x["hw_ns_p90"]) == (sp["p10"], sp["p90"]), x
    # One way over one hop by PIO, 1..8 bytes: MMIO stores, NIC, link, RX DMA write: at
    # least 60 cycles of pipeline (the PCIe model alone is 38); the upper bound is loose:
    # simulated time runs on while a client process waits for a CPU (see bench/msg.py).
    one_way = min(x["hw_ns"] for x in rows if x["bench"] == "pingpong" and x["layer"] == "hal" and x["bytes"] <= 8)
    assert 480 <= one_way <= 3000, one_way
    bar = [x for x in rows if x["bench"] == "barrier"]
    assert [x["nodes"] for x in bar] == [2, 4]
    assert all(x["topology"] == "ring:4" and 200 < x["hw_ns"] < 5000 for x in bar), bar
    assert bar[0]["hw_ns"] <= bar[1]["hw_ns"], bar   # more nodes, deeper tree / more hops
    for x in bar:   # the trace records' episodes: median, spread, count
        sp = x["hw_spread"]
        assert sp["samples"] >= 2 and sp["p10"] <= x["hw_ns"] <= sp["p90"] and sp["median"] == x["hw_ns"], x
    ov = {(x["layer"], x["bytes"]): x for x in rows if x["bench"] == "overhead"}
    assert set(ov) == {(la, b) for la in ("hal", "rawdata") for b in (0, 8, 64, 256)}
    assert all(x["hw_ns"] is None and x["sw_ns"] > 0 for x in ov.values())
    assert {t["target"].split(",")[0] for t in res["targets"]} >= {"one-way 8 B", "stream >= 4 KiB",
                                                                    "rawdata send + receive"}
    assert [h["layer"] for h in res["hierarchy"]] == ["hal", "rawdata"]


def test_bench_json_sw_only(userlib_build, tmp_path):
    """--backend sw: no hardware figures, total = sw; the JSON is one object (the
    installed command, run from outside the tree with no PARANIC_* variable)."""
    r = paranic("bench", "pingpong", "--backend", "sw", "--layer", "rawdata", "--max", "64", "--quick", "--json",
                cwd=_outside(tmp_path), cmd=[str(PARANIC_CMD)])
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout)
    rows = res["rows"]
    assert [x["bytes"] for x in rows] == [1, 2, 4, 8, 16, 32, 64]
    for x in rows:
        assert x["layer"] == "rawdata" and x["hw_ns"] is None and x["sw_ns"] > 0
        assert x["total_ns"] == x["sw_ns"] and x["iters"]["sw"] > 0


@pytest.mark.parametrize("args, msg", [
    (["pairwise", "--min", "100", "--max", "10"], "1 <= min <= max"),
    (["stream", "--layer", "ports"], "unknown layer 'ports'"),
    (["barrier", "--nodes", "2,17"], "1..16 nodes"),
    (["barrier", "--nodes", "0"], "1..16 nodes"),
])
def test_bench_bad_input(userlib_build, args, msg):
    r = paranic("bench", *args, "--quick", timeout=120)
    assert r.returncode == 1 and msg in r.stderr, r.stderr
    assert not r.stdout.strip()


def test_bench_bad_size_syntax():
    r = paranic("bench", "pairwise", "--max", "lots", timeout=60)
    assert r.returncode == 2 and "not a size: 'lots'" in r.stderr


def test_run_sw(userlib_build):
    r = paranic("run", "--nodes", "3", "--", "sh", "-c", 'echo "$PARANIC_NODE/$PARANIC_NODES/$PARANIC_BACKEND"')
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(ln for ln in r.stdout.splitlines() if ln[:1].isdigit()) == ["0: 0/3/sw", "1: 1/3/sw", "2: 2/3/sw"]
    r = paranic("run", "--nodes", "2", "--", "sh", "-c", 'exit $PARANIC_NODE')
    assert r.returncode == 1 and "launch: node 1 exited with status 1" in r.stdout
    for bad, msg in ((["--nodes", "2"], "no program given"), (["--nodes", "0", "--", "true"], "--nodes/-n: 0 is out of range"),
                     (["--", "/no/such/program"], "not found or not executable"),
                     (["--cluster", "a/b", "--", "true"], "bad cluster name"),
                     (["--ppn", "0", "--", "true"], "--ppn: 0 is out of range")):
        r = paranic("run", *bad)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)


def test_run_ppn_sw(userlib_build, tmp_path):
    """`paranic run --ppn 2`: two processes per node, each attached to its own context
    of its node (through the Python bindings) while all four hold theirs, under the
    job's paranicds."""
    prog = ("import os, time, pathlib; from paranic.lib import Hal; h = Hal.open(); "
            "print('ctx', h.node_id, h.ctx_id, flush=True); d = pathlib.Path(os.environ['MARK']); "
            "(d / os.environ['PARANIC_RANK']).touch(); t = time.time() + 30\n"
            "while len(list(d.iterdir())) < 4 and time.time() < t: time.sleep(0.01)\n"
            "h.close()")
    r = paranic("run", "--nodes", "2", "--ppn", "2", "--", sys.executable, "-c", prog,
                timeout=120, env={"MARK": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    seen = sorted(ln.split(": ", 1) for ln in r.stdout.splitlines() if ln[:1].isdigit() and ": ctx" in ln)
    assert [who for who, _ in seen] == ["0.0", "0.1", "1.0", "1.1"], r.stdout
    for node in (0, 1):
        mine = [line.split() for who, line in seen if who.startswith(f"{node}.")]
        assert all(f[1] == str(node) for f in mine), r.stdout
        assert len({f[2] for f in mine}) == 2, f"node {node}: both processes got one context\n{r.stdout}"


def test_run_and_selftest_on_sim(sim_binary, userlib_build):
    """`paranic run --backend sim` starts the simulator, runs the program on it and
    stops it again (socket gone); `paranic selftest` does the same with the bindings."""
    before = set(simrun.RUN_DIR.glob("sim-run-*.sock"))
    r = paranic("run", "--backend", "sim", "--nodes", "2", "--", str(userlib_build / "hal_conformance"), "sim",
                "--case", "stamp")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "paranic run: starting the ring:4 simulator" in r.stderr
    assert "0: ok stamp" in r.stdout and "1: PASS" in r.stdout
    r = paranic("selftest", "--backend", "sim", "--nodes", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert all(f"{n}: ok bindings node={n} nodes=4 backend=sim" in r.stdout for n in range(4)), r.stdout
    assert set(simrun.RUN_DIR.glob("sim-run-*.sock")) == before
    r = paranic("run", "--backend", "sim", "--nodes", "5", "--topo", "ring:4", "--", "true")
    assert r.returncode == 2 and "fewer than --nodes 5" in r.stderr
