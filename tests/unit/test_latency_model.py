"""The simulator's latency model (paranic.spec.sim, docs/simulator.md "Latency model"):
its corners order as their names say, its numbers reach the harness through the
generated header and the docs' table, and bad names or values are refused."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from paranic.spec import cgen, protocol as P, sim as S

ROOT = Path(__file__).resolve().parents[2]


def test_corners_order_and_cycles():
    o, r, p = (S.latency_model(n) for n in ("optimistic", "realistic", "pessimistic"))
    assert S.DEFAULT_MODEL == "realistic" and list(S.LATENCY_MODELS) == ["optimistic", "realistic", "pessimistic"]
    for k in S.LATENCY_KEYS:
        assert o.ns()[k] <= r.ns()[k] <= p.ns()[k], k
        assert o.ns()[k] < p.ns()[k], k
    for m in (o, r, p):
        assert set(m.ns()) == set(S.LATENCY_KEYS)
        for k, ns in m.ns().items():   # the harness's rounding: nearest cycle of the target clock
            assert m.cycles()[k] == math.floor(ns * P.TARGET_CLK_HZ / 1e9 + 0.5), (m.name, k)
    # the cable: transceiver datapath (UI at the line rate) + buffers + two crossings + propagation
    lk = r.link
    assert lk.serdes_ns == pytest.approx((169 + 242.5) / 10.0)
    assert lk.cdc_ns == pytest.approx((8 + 2 * 4) + (4 + 2 * 8))
    assert lk.propagation_ns == pytest.approx(S.NS_PER_M * 1.0)
    assert r.cable_ns == pytest.approx(lk.serdes_ns + lk.buffers_ns + lk.cdc_ns + lk.propagation_ns)
    assert [S.cable_cycles(n) for n in S.LATENCY_MODELS] == [8, 13, 22]
    assert S.cable_cycles() == S.cable_cycles("realistic")


def test_cable_cycles_and_bad_input():
    assert S.cable_cycles(cable_ns=0) == 1            # a cable is at least one register
    assert S.cable_cycles("pessimistic", cable_ns=80) == 10   # an explicit delay wins
    for bad in ("fastest", "", None, 3):
        if bad is None:
            continue
        with pytest.raises(ValueError, match="latency model"):
            S.latency_model(bad)
    for bad in (float("nan"), -1, 1e9, "64"):
        with pytest.raises(ValueError, match="cable latency"):
            S.cable_cycles(cable_ns=bad)


def test_header_carries_the_corners():
    """The harness's table (PN_SIM_LATENCY_MODELS) is generated from the spec."""
    h = cgen.sim_shm_header()
    assert f'#define PN_SIM_DEFAULT_MODEL "{S.DEFAULT_MODEL}"' in h
    rows = re.findall(r"X\((\w+), ([^)]*)\)", h.split("PN_SIM_LATENCY_MODELS(X)")[1])
    assert [n for n, _ in rows] == list(S.LATENCY_MODELS)
    for name, vals in rows:
        assert [float(v) for v in vals.split(",")] == pytest.approx(list(S.latency_model(name).ns().values()))


def test_docs_table_matches_the_spec():
    """docs/simulator.md's "Latency model" table shows the spec's values (ns) per corner."""
    doc = (ROOT / "docs/simulator.md").read_text()
    sec = doc.split("## Latency model", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for ln in sec.splitlines():
        m = re.match(r"\|\s*`(\w+)`\s*\|([^|]*)\|([^|]*)\|([^|]*)\|", ln)
        if m:
            rows[m.group(1)] = [float(x) for x in (m.group(2), m.group(3), m.group(4))]
    assert set(rows) >= set(S.LATENCY_KEYS), rows
    for k in S.LATENCY_KEYS:
        want = [S.latency_model(n).ns()[k] for n in S.LATENCY_MODELS]
        assert rows[k] == pytest.approx(want, abs=0.06), k
