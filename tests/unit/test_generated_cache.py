"""paranic.sim.paths.generate_unless_current: the stamp that keeps generated Verilog (the
clusters', a split node's, the cocotb benches' NicCore clusters) from being made twice."""

from __future__ import annotations

import pytest

from paranic.sim.paths import generate_unless_current, source_key


def test_made_once_per_key_and_again_when_missing(tmp_path):
    out = tmp_path / "v"
    made = []

    def make(text):
        return lambda: (made.append(text), out.write_text(text))

    assert generate_unless_current(tmp_path, "k1", [out], make("1"))
    assert not generate_unless_current(tmp_path, "k1", [out], make("2"))
    assert generate_unless_current(tmp_path, "k2", [out], make("3"))
    out.unlink()
    assert generate_unless_current(tmp_path, "k2", [out], make("4"))
    assert made == ["1", "3", "4"] and out.read_text() == "4"


def test_a_failed_run_leaves_nothing_current(tmp_path):
    """A run that fails after writing part of its outputs must not let the old key match
    them: going back to the old sources makes them again."""
    out = tmp_path / "v"
    generate_unless_current(tmp_path, "old", [out], lambda: out.write_text("old"))

    def half():
        out.write_text("half")
        raise RuntimeError("generator failed")

    with pytest.raises(RuntimeError):
        generate_unless_current(tmp_path, "new", [out], half)
    assert generate_unless_current(tmp_path, "old", [out], lambda: out.write_text("old"))
    assert out.read_text() == "old"


def test_source_key_reads_files(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    k = source_key(1, f)
    assert source_key(1, f) == k and source_key(2, f) != k
    f.write_text("x = 2\n")
    assert source_key(1, f) != k
