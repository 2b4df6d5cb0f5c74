"""`paranic bench layers` (ParaStation's Table 3) on the sw backend, as a user runs it:
the JSON rows and how their figures hang together, the table, the plot, a subset of
layers, bad input; and its two programs on their own: pn_bench's ports, am and rma modes
and pn_sockbench with and without the preload library (pn_sock_now_ns, pn_sock_fd_kind).
The simulator run is tests/sim/test_bench_layers_sim.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.bench import layers, msg
from paranic.launch import BIN, USERLIB_BUILD

ROOT = Path(__file__).resolve().parents[2]
PARANIC = [sys.executable, "-m", "paranic.cli"]
READY = ["hal", "rawdata", "ports", "sockets", "pvm", "am", "rma", "os-tcp"]


def paranic(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`paranic ARGS` in a clean environment (no PARANIC_* variables)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    return subprocess.run([*PARANIC, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=e)


def table3() -> dict:
    try:
        return msg.parastation_table3()
    except FileNotFoundError:
        return {}


def _png(p: Path) -> bool:
    return p.is_file() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_layers_sw_quick_json_and_plot(userlib_build, tmp_path):
    """Every implemented layer, natively: one row each in table order, latency and
    bandwidth positive, no hardware figures, total = sw, MB/s from the stream's time,
    added = the difference to the layer below; ParaStation's figures beside them; the
    not-yet layers named; a plot."""
    png = tmp_path / "layers.png"
    r = paranic("bench", "layers", "--backend", "sw", "--quick", "--json", "--plot", str(png))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["bench"] == "layers" and res["not_yet"] == []
    assert res["config"]["latency_bytes"] == 8 and res["config"]["bandwidth_bytes"] == 1 << 20
    rows = res["rows"]
    ready = [x for x in READY if x not in res["skipped"]]       # pvm: when PVM is installed
    assert [x["layer"] for x in rows] == ready
    by = {x["layer"]: x for x in rows}
    for x in rows:
        assert {"layer", "latency_ns", "MBps", "hw_ns", "sw_ns"} <= set(x), x
        assert x["hw_ns"] is None and x["stream_hw_ns"] is None, x          # sw only
        assert 0 < x["sw_ns"] < 10_000_000 and x["latency_ns"] == x["sw_ns"], x
        assert x["MBps"] > 0 and x["MBps"] == pytest.approx((1 << 20) * 1e3 / x["stream_sw_ns"], rel=1e-3, abs=0.06), x
        assert x["iters"]["sw"][0] >= 2 and x["iters"]["sw"][1] >= 2, x
        if x["below"]:
            assert x["added_ns"] == pytest.approx(x["latency_ns"] - by[x["below"]]["latency_ns"], abs=0.2), x
    assert [layers.BY_NAME[n].below for n in READY] == [None, "hal", "hal", "ports", "sockets", "ports", "ports", None]
    assert all(by[n]["below"] == layers.BY_NAME[n].below for n in ready)
    for n in ("am", "rma"):   # no row of ParaStation's Table 3
        assert by[n]["parastation_layer"] is None and by[n]["parastation_latency_us"] is None, by[n]
    assert "layers: am on sw" in r.stderr and "layers: rma on sw" in r.stderr
    assert by["os-tcp"]["native_only"] and by["os-tcp"]["added_ns"] is None
    t3 = table3()
    if t3:
        assert by["hal"]["parastation_latency_us"] == t3["hardware"][0]
        assert by["sockets"]["parastation_MBps"] == t3["socket"][1]
        assert by["ports"]["parastation_added_us"] == pytest.approx(t3["port"][0] - t3["rawdata"][0], abs=0.01)
    assert "layers: sockets on sw" in r.stderr      # progress is visible
    assert _png(png)


def test_layers_subset_table(userlib_build):
    """--layers picks rows (table order whatever the order given); a layer whose lower
    layer was not measured has no added figure, one whose layer was has it; the text
    table lists the not-yet layers."""
    r = paranic("bench", "layers", "--backend", "sw", "--quick", "--layers", "rma,sockets,hal")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("protocol hierarchy (ParaStation's Table 3)")
    rows = [ln.split()[0] for ln in lines[3:] if ln and not ln.startswith(("(", " "))]
    assert rows == ["hal", "sockets", "rma"], r.stdout
    assert not any("not yet" in ln for ln in lines)
    for name in ("sockets", "rma"):
        row = next(ln for ln in lines if ln.startswith(name))
        assert row.split()[5] == "-", row      # added_ns (after "hw + sw"): ports not measured
    assert "rawdata on sw" not in r.stderr and "os-tcp on sw" not in r.stderr and "am on sw" not in r.stderr
    # the median's spread and sample count beside it (one run with --quick), the best case
    assert any(ln.startswith("(spread of the latency") for ln in lines), r.stdout
    for name in ("hal", "sockets", "rma"):
        row = next(ln for ln in lines if ln.startswith(f"  {name} "))
        assert "sw " in row and "(n=1)" in row and "best " in row, row
    r = paranic("bench", "layers", "--backend", "sw", "--quick", "--json", "--layers", "am,ports")
    assert r.returncode == 0, r.stderr[-3000:]
    by = {x["layer"]: x for x in json.loads(r.stdout)["rows"]}
    assert list(by) == ["ports", "am"]
    assert by["am"]["added_ns"] == pytest.approx(by["am"]["latency_ns"] - by["ports"]["latency_ns"], abs=0.2)


def test_layers_median_run_not_fastest():
    """Several runs of a layer: the median run is the figure (of an even count the lower
    middle one), the fastest only the best case; the runs' spread and count beside it."""
    def run(lat: float, st: float) -> tuple[dict, dict]:
        return ({"latency_ns": lat, "iters": 10}, {"latency_ns": st, "iters": 10})
    runs = [run(900.0, 50.0), run(500.0, 70.0), run(700.0, 60.0)]
    pp, st = layers._median_run(runs)
    assert pp["latency_ns"] == 700.0 and st["latency_ns"] == 60.0
    best = layers._median_run(runs, best=True)
    assert best[0]["latency_ns"] == 500.0 and best[1]["latency_ns"] == 50.0
    assert layers._median_run(runs[:2])[0]["latency_ns"] == 500.0    # even count: the lower middle
    sp = layers._runs_spread(runs)
    assert sp["pingpong_ns"] == {"median": 700.0, "min": 500.0, "max": 900.0, "runs": 3}
    assert sp["stream_ns"] == {"median": 60.0, "min": 50.0, "max": 70.0, "runs": 3}
    assert "pingpong_iterations" not in sp                            # no per-iteration samples (sw)
    assert msg.spread({"iter_samples": 0}) is None


@pytest.mark.parametrize("spec, why", [("foo", "unknown layer 'foo'"), ("hal,bogus", "unknown layer 'bogus'"),
                                       ("PVM", "unknown layer 'PVM'")])
def test_bad_layers_exit_2(spec, why):
    """An unknown layer: a clear message and exit 2, before anything is built or run."""
    r = paranic("bench", "layers", "--backend", "sw", "--layers", spec, timeout=60)
    assert r.returncode == 2, r.stderr
    assert why in r.stderr and "hal, rawdata, ports, sockets, pvm, am, rma, os-tcp" in r.stderr, r.stderr
    assert "building" not in r.stderr and r.stdout == ""


def test_parse_layers():
    assert layers.parse_layers(None) == READY == list(layers.READY)
    assert layers.parse_layers("all") == READY
    assert layers.parse_layers(" os-tcp , hal ") == ["hal", "os-tcp"]
    with pytest.raises(ValueError, match="unknown layer 'HAL'"):
        layers.parse_layers("HAL")
    assert layers.NOT_YET == ()
    assert layers.parse_layers("rma,am") == ["am", "rma"]
    assert all(layers.BY_NAME[x.below] for x in layers.LAYERS if x.below)   # every "below" is a layer


def test_layers_pvm_and_sockets_sw(userlib_build):
    """The pvm row (pn_pvm_bench as a PVM job of 2 nodes, over the socket emulation):
    table order pvm after sockets, its layer below; latency and bandwidth positive and
    consistent with the stream's time; the added latency is the difference to sockets;
    ParaStation's PVM figure (Table 3) beside it. Skipped when PVM is not installed."""
    why = layers.pvm_missing()
    if why:
        pytest.skip(why)
    r = paranic("bench", "layers", "--backend", "sw", "--quick", "--json", "--layers", "pvm,sockets")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    res = json.loads(r.stdout)
    assert res["skipped"] == {}
    rows = res["rows"]
    assert [x["layer"] for x in rows] == ["sockets", "pvm"]
    sock, pvm = rows
    for x in rows:
        assert {"layer", "latency_ns", "MBps", "hw_ns", "sw_ns", "added_ns", "parastation_latency_us"} <= set(x), x
        assert x["hw_ns"] is None and 0 < x["sw_ns"] < 10_000_000 and x["latency_ns"] == x["sw_ns"], x
        assert x["MBps"] > 0 and x["MBps"] == pytest.approx((1 << 20) * 1e3 / x["stream_sw_ns"], rel=1e-3, abs=0.06), x
        assert x["iters"]["sw"][0] >= 2 and x["iters"]["sw"][1] >= 2, x
    assert pvm["below"] == "sockets" and pvm["title"].startswith("PVM")
    assert pvm["added_ns"] == pytest.approx(pvm["latency_ns"] - sock["latency_ns"], abs=0.2)
    assert pvm["parastation_layer"] == "pvm"
    t3 = table3()
    if t3:
        assert pvm["parastation_latency_us"] == t3["pvm"][0] and pvm["parastation_MBps"] == t3["pvm"][1]
        assert pvm["parastation_added_us"] == pytest.approx(t3["pvm"][0] - t3["socket"][0], abs=0.01)
    assert "layers: pvm on sw" in r.stderr and "[sw] stream   pvm" in r.stderr


def test_pn_pvm_bench_rows(userlib_build, tmp_path):
    """pn_pvm_bench on its own in a PVM job (pvm_job.sh, 2 nodes): a ping-pong row and a
    stream row of the sizes asked for, the worker on the other host, over a ParaNIC
    connection (tcp_remote >= 1, timed with pn_sock_now_ns), the encoding named; --encoding raw is accepted, a bad
    one is "FAIL bad arguments"."""
    why = layers.pvm_missing()
    if why:
        pytest.skip(why)
    exe = layers.build_pvm_bench()
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    e["PVM_EP"] = f"/usr/bin:{exe.parent}"
    def job(args: str, name: str) -> subprocess.CompletedProcess:
        return subprocess.run([*PARANIC, "run", "--backend", "sw", "--nodes", "2", "--timeout", "90", "--", "sh",
                               str(layers.PVM_JOB), str(tmp_path / name), f"{exe} {args}"],
                              capture_output=True, text=True, cwd=tmp_path, env=e, timeout=150)
    r = job("--min 64 --bw 65536 --encoding raw --scale 0.01", "raw")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [json.loads(ln[3:]) for ln in r.stdout.splitlines() if ln.startswith("0: {")]
    assert [(x["bench"], x["bytes"]) for x in rows] == [("pingpong", 64), ("stream", 65536)], r.stdout
    for x in rows:
        assert x["layer"] == "pvm" and x["latency_ns"] > 0 and x["MBps"] > 0 and x["iters"] >= 2, x
        assert x["peer"] == "pn-node1" and x["tcp_remote"] >= 1 and x["clock"] == "backend", x
    assert rows[1]["encoding"] == "raw" and rows[0]["encoding"] == "raw"
    r = job("--encoding xdr", "bad")
    assert r.returncode != 0 and "FAIL bad arguments" in r.stdout, r.stdout


def test_pn_bench_ports_mode(run_nodes):
    """pn_bench --layer ports: pairwise, ping-pong and stream rows, eager and rendezvous
    (pairwise above the eager limit: both nodes send before they receive, which two
    blocking rendezvous sends could not); a bad layer name in the list exits 2 with a
    message."""
    r = run_nodes([str(BIN / "pn_bench"), "--layer", "ports", "--bench", "pairwise,pingpong,stream", "--min", "8",
                   "--max", str(1 << 20), "--scale", "0.01"], 2, "layers-ports", timeout=120)
    assert r.rc == 0, r.out
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    assert {(x["bench"], x["bytes"]) for x in rows} == {(b, 8 << i) for b in ("pairwise", "pingpong", "stream")
                                                         for i in range(18)}
    assert all(x["layer"] == "ports" and x["latency_ns"] > 0 and x["MBps"] > 0 for x in rows)
    r = run_nodes([str(BIN / "pn_bench"), "--layer", "hal,portz"], 2, "layers-bad", timeout=30)
    assert r.rc != 0 and "unknown layer 'portz'" in r.out


def test_pn_bench_am_and_rma_modes(run_nodes):
    """pn_bench --layer am,rma: a row per bench and size (8 B .. 1 MiB: eager and
    rendezvous, AM's 1 MiB requests beyond the default max_payload through the
    receiver's slow path). Node 0's endpoint counters show what each mode does:
    am ping-pong = one request and one reply handled per iteration (warm-up included),
    am stream = requests only; rma = puts only (ping-pong each waited for). Every
    message's length is checked by the program and the target's region is compared
    with the initiator's data after every rma run (else it exits non-zero). --per-iter:
    every iteration timed on sw too, latency_ns still the mean."""
    r = run_nodes([str(BIN / "pn_bench"), "--layer", "am,rma", "--bench", "pingpong,stream,pairwise,overhead",
                   "--min", "8", "--max", str(1 << 20), "--scale", "0.01", "--per-iter"], 2, "layers-am-rma",
                  timeout=180)
    assert r.rc == 0, r.out
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    sizes = [8 << i for i in range(18)]
    for layer in ("am", "rma"):
        got = {(x["bench"], x["bytes"]) for x in rows if x["layer"] == layer}
        assert got == {(b, n) for b in ("pingpong", "stream", "pairwise") for n in sizes} | {
            ("overhead", n) for n in (0, 8, 64, 256)}, (layer, got)
    for x in rows:
        assert x["latency_ns"] > 0 and x["iters"] >= 2, x
        if x["bench"] == "overhead":
            continue
        if x["bench"] == "pingpong":   # --per-iter: sampled, but the row's latency is the mean
            assert 0 < x["min_ns_per_iter"] <= x["median_ns_per_iter"], x
            # the spread beside the median: p10 <= median <= p90 <= slowest, one sample per iteration
            assert x["iter_samples"] == x["iters"], x
            assert (x["min_ns_per_iter"] <= x["iter_p10_ns"] <= x["median_ns_per_iter"] <= x["iter_p90_ns"]
                    <= x["iter_max_ns"]), x
            sp = msg.spread(x, per=0.5)
            assert sp["median"] == pytest.approx(x["median_ns_per_iter"] / 2, abs=0.1) and sp["samples"] == x["iters"]
            assert x["latency_ns"] == pytest.approx(x["ns_per_iter"] / 2, rel=1e-3), x
        runs = x["iters"] + x["iters"] // 10 + 1           # with the warm-up
        if x["layer"] == "am":
            assert x["rma_puts"] == 0 and x["am_requests"] == runs, x
            assert x["am_handled_replies"] == (runs if x["bench"] == "pingpong" else 0), x
        else:
            assert x["am_requests"] == 0 and x["am_handled_replies"] == 0 and x["rma_puts"] == runs, x
        # the window (16) bounds what is outstanding: a stream waits for it, a ping-pong never
        if x["bench"] == "pingpong":
            assert x["am_window_waits"] == 0, x
    assert any(x["am_window_waits"] > 0 for x in rows if x["bench"] == "stream" and x["bytes"] == 8), rows


def test_pn_sockbench_preloaded_and_not(run_nodes):
    """pn_sockbench under the preload library: a ParaNIC connection (pn_sock_fd_kind 4)
    timed with pn_sock_now_ns (clock "backend"); without it: the OS's TCP over loopback
    (no library: fd_kind -1, the monotonic clock)."""
    so = USERLIB_BUILD / "libparanic_sock.so"
    args = ["--bench", "all", "--min", "1", "--max", "4096", "--scale", "0.01"]
    r = run_nodes(["env", f"LD_PRELOAD={so}", str(BIN / "pn_sockbench"), "--port", "7000", *args], 2, "sockbench",
                  timeout=60)
    assert r.rc == 0, r.out
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    assert len(rows) == 26 and all(x["layer"] == "sockets" and x["fd_kind"] == 4 and x["clock"] == "backend"
                                   and x["latency_ns"] > 0 for x in rows), rows
    port = layers._free_port()
    r = run_nodes([str(BIN / "pn_sockbench"), "--mode", "loopback", "--port", str(port), *args], 2, "sockbench-os",
                  timeout=60)
    assert r.rc == 0, r.out
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    assert len(rows) == 26 and all(x["layer"] == "os-tcp" and x["fd_kind"] == -1 and x["clock"] == "monotonic"
                                   for x in rows), rows
    r = run_nodes([str(BIN / "pn_sockbench"), "--mode", "udp", "--port", "7000"], 2, "sockbench-bad", timeout=30)
    assert r.rc != 0 and "bad arguments" in r.out
