"""`paranic bench simspeed --json`: the headline keys the issue names
(``ring4_cycles_per_s``, ``torus4x4_cycles_per_s``) come from the free-running rows,
never from the rows under traffic."""

from __future__ import annotations

from paranic.bench.simspeed import plot, summary


def _row(topo: str, traffic: bool, median: float, cpu: float | None = None, threads: int = 1,
         window: bool = False) -> dict:
    r = {"what": "cycles_per_s", "topo": topo, "split": threads > 1 or window, "threads": threads, "window": window,
         "traffic": traffic, "median": median, "min": median, "max": median, "n": 1, "loadavg": "0.5-0.9"}
    if cpu is not None:
        r["per_cpu_s"] = {"median": cpu, "min": cpu, "max": cpu, "n": 1}
    return r


def test_summary_keys_per_topology():
    rows = [_row("ring:4", False, 150_000.0, 170_000.0), _row("ring:4", True, 30_000.0),
            _row("torus:4x4", False, 20_000.0, 22_000.0), _row("torus:4x4", True, 5_000.0)]
    assert summary(rows) == {"ring4_cycles_per_s": 150_000.0, "ring4_cycles_per_cpu_s": 170_000.0, "ring4_threads": 1,
                             "ring4_window": False,
                             "torus4x4_cycles_per_s": 20_000.0, "torus4x4_cycles_per_cpu_s": 22_000.0,
                             "torus4x4_threads": 1, "torus4x4_window": False}


def test_summary_takes_the_fastest_configuration():
    rows = [_row("ring:4", False, 150_000.0, 170_000.0), _row("ring:4", False, 240_000.0, 130_000.0, threads=2),
            _row("ring:4", False, 200_000.0, 150_000.0, threads=2, window=True),
            _row("ring:4", True, 400_000.0, threads=2)]
    assert summary(rows) == {"ring4_cycles_per_s": 240_000.0, "ring4_cycles_per_cpu_s": 130_000.0,
                             "ring4_threads": 2, "ring4_window": False}
    rows.append(_row("ring:4", False, 260_000.0, 140_000.0, threads=2, window=True))
    assert summary(rows)["ring4_window"] is True


def test_threads_need_the_split_build():
    import pytest

    from paranic.bench.simspeed import _threads

    assert _threads("1", False) == [(1, False)]
    assert _threads("1,2,2w", True) == [(1, False), (2, False), (2, True)]
    with pytest.raises(ValueError, match="needs --split"):
        _threads("2", False)
    with pytest.raises(ValueError, match=">= 1"):
        _threads("0,2", True)
    with pytest.raises(ValueError, match="thread counts"):
        _threads("two", True)


def test_summary_of_latency_rows_is_empty():
    assert summary([{"what": "latency_hal_8B_min_ns", "traffic": False}]) == {}


def test_plot_draws_every_configuration(tmp_path):
    """--plot: a PNG with a bar per topology and configuration; rows of latencies only
    (--load) are refused with the reason."""
    import pytest
    rows = [_row(t, tr, m, threads=th, window=w) for t in ("ring:4", "torus:4x4") for tr in (False, True)
            for th, w, m in ((1, False, 100_000.0), (2, False, 150_000.0), (2, True, 190_000.0))]
    out = tmp_path / "simspeed.png"
    plot(rows, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    with pytest.raises(ValueError, match="no speed rows"):
        plot([{"what": "latency_hal_8B_min_ns"}], str(tmp_path / "none.png"))
