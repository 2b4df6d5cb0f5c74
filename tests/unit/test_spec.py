"""The spec package: it stands alone, its generated files are current, its C structures
compile to the layout Python packs, and its facts hold together."""

from __future__ import annotations

import ast
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.spec import __main__ as spec_main
from paranic.spec import cgen, cstruct, link
from paranic.spec import sim as S

ROOT = Path(__file__).resolve().parents[2]


def test_generated_files_are_current():
    """Every C header and document table generated from the spec matches it (`make headers`)."""
    stale = [str(p.relative_to(ROOT)) for p, text in spec_main.expected(ROOT).items()
             if not p.exists() or p.read_text() != text]
    assert not stale, f"stale generated files (run `make headers`): {stale}"
    r = subprocess.run([sys.executable, "-m", "paranic.spec", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_check_mode_reports_a_stale_file(tmp_path):
    """--check exits 1 and names the file when a generated file differs, and writes nothing."""
    (tmp_path / "docs").mkdir()
    for rel in spec_main.HEADERS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("stale\n")
    r = subprocess.run([sys.executable, "-m", "paranic.spec", "--check", "--tree", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "pn_protocol.h is stale" in r.stderr
    assert (tmp_path / "userlib/include/paranic/pn_protocol.h").read_text() == "stale\n"


def test_spec_imports_nothing_of_ours_but_itself():
    """The spec is the bottom layer: no module imports the gateware, the simulator or a tool."""
    for f in sorted((ROOT / "spec").glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert not node.module.startswith("paranic"), f"{f.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("paranic") for a in node.names), f.name


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None, reason="needs gcc, g++")
@pytest.mark.parametrize("lang", ["c", "c++"])
def test_sim_shm_layout_compiles_and_matches_python(tmp_path, lang):
    """The generated pn_sim_shm.h compiles as C11 and C++17 (its static asserts hold the
    offsets Python computes), and the compiled offsets are the ones Python packs at."""
    lines = ['#include <stdio.h>', '#include "pn_sim_shm.h"', "int main(void) {"]
    for s in S.STRUCTS:
        lines.append(f'printf("{s.name} %zu\\n", sizeof(struct {s.name}));')
        for m in s.members:
            lines.append(f'printf("{s.name}.{m.name} %zu\\n", offsetof(struct {s.name}, {m.name}));')
    lines += ["return 0;", "}"]
    src = tmp_path / ("t.c" if lang == "c" else "t.cpp")
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "t"
    cc = ["gcc", "-std=c11"] if lang == "c" else ["g++", "-std=c++17"]
    subprocess.run([*cc, "-Wall", "-Wextra", "-Werror", f"-I{ROOT / 'userlib/src'}", str(src), "-o", str(exe)],
                   check=True)
    got = dict(ln.split() for ln in subprocess.run([str(exe)], capture_output=True, text=True,
                                                     check=True).stdout.splitlines())
    for s in S.STRUCTS:
        assert int(got[s.name]) == s.size
        for m in s.members:
            assert int(got[f"{s.name}.{m.name}"]) == s.offset(m.name), (s.name, m.name)


def test_cstruct_refuses_misaligned_and_mis_sized():
    M = cstruct.Member
    with pytest.raises(ValueError, match="aligned"):
        cstruct.CStruct("bad", (M("a", "u32"), M("b", "u64"), M("c", "u32")), 16)
    with pytest.raises(ValueError, match="stated"):
        cstruct.CStruct("bad", (M("a", "u64"),), 16)


def test_cstruct_pack_unpack_roundtrip():
    raw = S.HELLO.pack(magic=S.MAGIC_HELLO, version=1, node=3, ctx=-1, nodes=4, pid=99, rx_log2=5,
                       tx_log2=6, flags=0, mem_bytes=1 << 20, status_off=8192, rx_off=12288,
                       tx_off=65536, heap_off=131072, heap_bytes=4096)
    assert len(raw) == S.HELLO.size == 88
    d = S.HELLO.unpack(raw)
    assert (d["node"], d["ctx"], d["heap_bytes"]) == (3, -1, 4096)
    assert S.CTL.read(S.CTL.pack(q_head=7, r_seq=9), "r_seq") == 9
    with pytest.raises(KeyError):
        S.OP.pack(nonsense=1)


def test_ber_threshold():
    """The cable error model: 0 for a perfect cable, about 65 x BER x 2^32 for small rates,
    saturating at 2^32-1; anything that is not a rate in 0..1 is refused."""
    assert S.ber_to_threshold(0) == 0
    t = S.ber_to_threshold(1e-6)
    assert abs(t - 65e-6 * 2**32) / t < 1e-3
    assert S.ber_to_threshold(1.0) == 2**32 - 1
    for bad in (-1e-9, 1.5, math.nan, math.inf, "1e-3"):
        with pytest.raises(ValueError):
            S.ber_to_threshold(bad)


def test_control_words():
    """Every kind round-trips; one flipped bit anywhere is caught by the check."""
    for kind in link.CtlKind:
        w = link.pack_ctl(kind=int(kind), ack=5, seq=9, credit=1234)
        assert link.unpack_ctl(w)["kind"] == kind
        for bit in range(64):
            assert link.unpack_ctl(w ^ (1 << bit)) is None, (kind, bit)
    assert link.crc16(b"123456789") == 0x906E
    assert link.frame_words(0) == 4 and link.link_efficiency(1024) == pytest.approx(1024 / (8 * 132))


def test_csr_header_requires_the_driver_csrs():
    with pytest.raises(ValueError, match="lacks"):
        cgen.csr_header({"node": {"addr": 0x40000, "size": 12, "kind": "rw"}})
