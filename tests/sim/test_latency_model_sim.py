"""The latency model on the running simulator (docs/simulator.md, "Latency model"):
`paranic-sim --model` sets every host latency at once and the ready file shows them, an
individual option overrides one, and the 8-byte one-way hardware path (simulated,
deterministic) orders optimistic < realistic < pessimistic, each corner's latencies
entering it exactly once. The cable is the build's (the default model's) in all runs."""

from __future__ import annotations

import re

import pytest

from simtest import BUILD, launch, sim_socket
from paranic.sim import build as simbuild, run as simrun
from paranic.spec import sim as S


def _expected(model: str) -> dict:
    c = S.latency_model(model).cycles()
    return {"mmio_write": c["mmio_write"], "mmio_read": c["mmio_read"], "dma_read": c["dma_read"],
            "dma_write": c["dma_write"] + c["poll_miss"], "dma_write_pcie": c["dma_write"],
            "poll_miss": c["poll_miss"], "cable": simbuild.DEFAULT_PHY_DELAY}


def _one_way(sim) -> tuple[int, int, int, int]:
    """sim_latency on nodes 0 and 1: (median one-way, min, max, issue->doorbell) in cycles."""
    r = launch(sim, [str(BUILD / "simtests" / "sim_latency"), "20", "8"], 2, "latency-model", timeout=200)
    assert r.rc == 0 and not r.fails(), r.out
    ok = r.ok(0, "latency")
    mn, med, mx = map(int, re.search(r"min (\d+) median (\d+) max (\d+) cycles", ok).groups())
    line = [ln for ln in r.nodes[0] if ln.startswith("direction")][0]
    db = int(re.search(r"issue->doorbell (\d+)", line).group(1))
    return med, mn, mx, db


def test_corners_ready_file_and_one_way_order(sim_binary, userlib_build):
    assert S.DEFAULT_MODEL == "realistic" and simbuild.DEFAULT_PHY_DELAY == S.cable_cycles("realistic")
    got = {}
    for model in S.LATENCY_MODELS:
        with simrun.start("ring:4", socket=sim_socket(f"model-{model}"), extra_args=["--model", model]) as sim:
            info = sim.info
            assert info["model"] == model
            assert info["latency_cycles"] == _expected(model), info
            ns = S.latency_model(model).ns()
            for k in ("mmio_write", "mmio_read", "dma_read", "dma_write", "poll_miss"):
                assert info["latency_ns"][k] == pytest.approx(ns[k]), (k, info)
            assert info["model_cable_cycles"] == S.latency_model(model).cycles()["cable"]
            if model != S.DEFAULT_MODEL:   # the build's cable is the default model's: said in the log
                assert "note: this build's cables delay" in sim.log_text()
            got[model] = _one_way(sim), info["latency_cycles"]
    (o, lo), (r, lr), (p, lp) = (got[m] for m in ("optimistic", "realistic", "pessimistic"))
    assert o[0] < r[0] < p[0], got
    # the realistic corner's one-way, 96 cycles = 768 ns (103 before the cuts of
    # docs/host-interface.md, "The whole path"): with the native software's 121 ns,
    # under the 0.9 us goal
    assert r[0] == 96, got
    # deterministic with one message in flight; a client descheduled between its stores
    # makes one sample longer (max), never the median shorter than the minimum + 1
    for med, mn, mx, _ in (o, r, p):
        assert mn <= med <= mx and med - mn <= 1, got
    # each corner's latencies enter once: issue->doorbell = MMIO write + the same bus work,
    # one-way = MMIO write + DMA write (to the polling CPU) + the same NIC and cable path
    bus = {m: got[m][0][3] - got[m][1]["mmio_write"] for m in got}
    nic = {m: got[m][0][0] - got[m][1]["mmio_write"] - got[m][1]["dma_write"] for m in got}
    assert len(set(bus.values())) == 1, bus
    assert max(nic.values()) - min(nic.values()) <= 1, nic
    print("\n" + "\n".join(f"{m}: one-way median {got[m][0][0]} cycles (min {got[m][0][1]}, max {got[m][0][2]}), "
                           f"issue->doorbell {got[m][0][3]}" for m in got))


def test_option_overrides_the_model(sim_binary):
    """--mmio-write-ns and --poll-miss-ns override the corner's, whatever their order."""
    with simrun.start("ring:4", socket=sim_socket("model-override"), mmio_write_ns=100, poll_miss_ns=0,
                      extra_args=["--model", "pessimistic"]) as sim:
        want = _expected("pessimistic")
        want.update(mmio_write=13, poll_miss=0, dma_write=want["dma_write_pcie"])
        assert sim.info["model"] == "pessimistic" and sim.info["latency_cycles"] == want, sim.info


def test_bad_model_refused_before_building(capsys):
    """An unknown corner or a bad cable delay is refused by every entry point, before
    anything is built or started."""
    from paranic.sim.__main__ import main as sim_main
    from paranic.bench import msg

    for argv, why in ((["--model", "fast", "--build-only"], "invalid choice: 'fast'"),
                      (["--cable-ns", "nan", "--build-only"], "cable latency must be a number"),
                      (["--cable-ns", "-3", "--build-only"], "cable latency must be a number")):
        with pytest.raises(SystemExit) as e:
            sim_main(argv)
        assert e.value.code == 2 and why in capsys.readouterr().err, argv
    with pytest.raises(ValueError, match="latency model 'fast'"):
        simrun.start("ring:4", model="fast")
    with pytest.raises(ValueError, match="latency model 'fast'"):
        msg.Session(model="fast")
