"""One short run at saturation per topology (the router benchmark's method,
paranic.bench.router.saturation): offered load 1.0 from every node, then the network
drains and the hardware checkers find every packet once, intact, in order (the bench
fails the run otherwise). Not a speed test: the figure is only checked to be a
throughput at all and not above the routing function's channel-load bound."""

from __future__ import annotations

import pytest

from paranic.bench.router import saturation


@pytest.mark.parametrize("topo", ["ring:8", pytest.param("torus:4x4", marks=pytest.mark.slow)])  # its own build
def test_saturation_run_loses_nothing(topo):
    r = saturation(topo, "uniform", samples=1, warmup=2_000, measure_cycles=6_000,
                   progress=lambda *a, **k: None)
    assert r["ties"] == "split" and len(r["samples"]) == 1
    # measured over a 6,000-cycle window: up to one packet per node may straddle its edges
    assert 0 < r["median"] <= r["bound"] + 130 / 6_000
    assert r["bound"] == {"ring:8": 0.875, "torus:4x4": 1.0}[topo]
