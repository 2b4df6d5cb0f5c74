"""`paranic bench simspeed --json`: the headline keys the issue names
(``ring4_cycles_per_s``, ``torus4x4_cycles_per_s``) come from the free-running rows,
never from the rows under traffic."""

from __future__ import annotations

from paranic.bench.simspeed import summary


def _row(topo: str, traffic: bool, median: float, cpu: float | None = None) -> dict:
    r = {"what": "cycles_per_s", "topo": topo, "split": False, "traffic": traffic, "median": median,
         "min": median, "max": median, "n": 1}
    if cpu is not None:
        r["per_cpu_s"] = {"median": cpu, "min": cpu, "max": cpu, "n": 1}
    return r


def test_summary_keys_per_topology():
    rows = [_row("ring:4", False, 150_000.0, 170_000.0), _row("ring:4", True, 30_000.0),
            _row("torus:4x4", False, 20_000.0, 22_000.0), _row("torus:4x4", True, 5_000.0)]
    assert summary(rows) == {"ring4_cycles_per_s": 150_000.0, "ring4_cycles_per_cpu_s": 170_000.0,
                             "torus4x4_cycles_per_s": 20_000.0, "torus4x4_cycles_per_cpu_s": 22_000.0}


def test_summary_of_latency_rows_is_empty():
    assert summary([{"what": "latency_hal_8B_min_ns", "traffic": False}]) == {}
