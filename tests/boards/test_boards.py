"""Board targets: facts, --links choice, generation (Verilog + Vivado tcl + xdc) without
Vivado, Verilator lint with generated black-box stubs, programming errors, and one small
yosys synthesis (NicCore alone, 16 contexts, 4 links, on the smallest part)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from paranic import boardtool
from paranic.boards import BOARDS, board_module, get_board
from paranic.boards.common import LINK_KINDS, BoardError, generate, program, summary_line

ALL = list(BOARDS)


# Facts and --links ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ALL)
def test_board_facts(name):
    b = get_board(name)
    assert b.name == name
    assert b.platform().device.startswith(b.part.name)   # the part is the platform's
    assert set(b.ports) <= set(LINK_KINDS)
    assert len(b.resolve_links(None)) == 2                # every board makes a ring
    for kind in b.kinds:                                  # each kind alone or mixed
        try:
            ports = b.resolve_links(kind)
        except BoardError as e:
            assert "a ring needs 2 links" in str(e)
            ports = b.resolve_links(",".join([kind] + [k for k in b.default_links if k != kind][:1]))
        assert kind in {p.kind for p in ports}
        assert len({p.connector for p in ports}) == 2     # two different connectors


def test_unknown_board():
    with pytest.raises(BoardError, match="unknown board 'nosuch'.*kc705"):
        board_module("nosuch")
    assert boardtool.run(_ns(boards_cmd="lint", board="nosuch", links=None)) == 2


@pytest.mark.parametrize("name,links,msg", [
    ("kcu105", "ribbon", "Xilinx KCU105 has no ribbon link connector"),
    ("u250", "sfp", "has no sfp link connector"),
    ("ac701", "sfp", "has 1 sfp link connector .*a ring needs 2 links"),
    ("kc705", "fibre", "unknown link kind 'fibre'"),
    ("stlv7325", "sfp,sfp,sfp", "3 kinds given for 2 links"),
])
def test_bad_links(name, links, msg):
    with pytest.raises(BoardError, match=msg):
        get_board(name).resolve_links(links)


def test_bad_links_main_is_one_line(capsys):
    """main() refuses before elaborating: exit status 2, one line on stderr."""
    assert board_module("kcu105").main(["--links", "qsfp"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kcu105: error: Xilinx KCU105 has no qsfp link connector; its links: sfp"]


# Generation and lint (one elaboration per board and link choice) ------------------------------

def _cases():
    out = []
    for n in ALL:
        b = get_board(n)
        seen = {tuple(p.connector for p in b.resolve_links(None))}
        out.append((n, None))
        for k in b.kinds:
            try:
                c = tuple(p.connector for p in b.resolve_links(k))
            except BoardError:
                continue
            if c not in seen:
                seen.add(c)
                out.append((n, k))
    # Under -m slow for make test's time budget: stlv7325's default Verilog is also generated
    # by test_build_without_vivado_prints_one_line; u250 (UltraScale+) stands beside kcu105
    # (UltraScale), which stays; kc705's two ribbons (FMC HPC and LPC) beside its default
    # (SFP on GTX + ribbon) and ac701's (SFP on GTP + ribbon). All are linted in make
    # test-all and make lint-boards.
    slow = {("stlv7325", None), ("u250", None), ("kc705", "ribbon")}
    return [pytest.param(*c, marks=pytest.mark.slow) if c in slow else c for c in out]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    cache = {}

    def get(name, links):
        if (name, links) not in cache:
            out = tmp_path_factory.mktemp(f"{name}_{links or 'default'}")
            cache[(name, links)] = boardtool.generate_board(name, links, out / "build")
        return cache[(name, links)]
    return get


@functools.lru_cache(maxsize=None)
def _standalone_map(with_sync_line: bool) -> dict:
    from paranic.hw.gen import csr_map
    return csr_map(links=2, with_sync_line=with_sync_line)


@pytest.mark.parametrize("name,links", _cases())
def test_generates_and_lints(generated, name, links):
    board, gen = generated(name, links)
    assert gen.verilog.read_text().count(f"module {name}(") + gen.verilog.read_text().count(f"module {name} (") == 1
    tcl = gen.tcl.read_text()
    assert board.part.name in tcl and gen.verilog.name in tcl
    assert "set_property" in gen.xdc.read_text() or "create_clock" in gen.xdc.read_text()
    man = json.loads(gen.manifest.read_text())
    kinds = [k for k, _ in man["links"]]
    assert kinds == [p.kind for p in board.resolve_links(links)]
    r = boardtool.lint(gen.manifest)
    assert r.returncode == 0 and r.errors == 0, r.log.read_text()[-2000:]
    # The board's NicCore has the CSR map the driver's pn_csr.h is generated from (the
    # default one; with a ribbon, the map with the sync line's CSR).
    built = json.loads((gen.gateware_dir.parent / "nic_csr.json").read_text())
    ribbon = "ribbon" in kinds
    assert built == _standalone_map(ribbon)
    assert ("barrier_use_line" in built) == ribbon
    pcie_ip = {"S7": "pcie_s7", "US": "pcie_us", "USP": "pcie_usp"}
    assert any(ip in r.stubbed for ip in pcie_ip.values())   # the hard IP is a black box


def test_build_without_vivado_prints_one_line(tmp_path, monkeypatch, capsys):
    """--build as a user types it: the soft CPU's BIOS is compiled (riscv64 gcc, and meson
    from the venv even when the venv is not on PATH) into the ROM, the gateware written,
    and one line says Vivado is missing."""
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(p) / "vivado").exists()
                                               and not (Path(p) / "meson").exists()))
    monkeypatch.delenv("LITEX_ENV_VIVADO", raising=False)
    out = tmp_path / "stlv"
    rc = board_module("stlv7325").main(["--build", "--output-dir", str(out), "--log-level", "error"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and "vivado is not on PATH" in lines[0] and "stlv7325.tcl" in lines[0]
    assert (out / "gateware" / "stlv7325.v").is_file()
    bios = out / "software" / "bios" / "bios.bin"
    assert bios.is_file() and bios.stat().st_size > 4096
    assert (out / "gateware" / "stlv7325_rom.init").is_file()


def test_summary_line_names_what_ran(tmp_path):
    from paranic.boards.common import Generated
    g = tmp_path / "gateware"
    gen = Generated(g, "kc705", g / "kc705.v", g / "kc705.tcl", g / "kc705.xdc", g / "build_kc705.sh",
                    g / "paranic_board.json")
    line = summary_line(gen, False)
    assert "\n" not in line and "kc705.v, kc705.tcl, kc705.xdc" in line
    assert "vivado is not on PATH" in line and "vivado -mode batch -source kc705.tcl" in line
    assert "Vivado wrote kc705.bit" in summary_line(gen, True)


def test_nothing_half_written(tmp_path, monkeypatch):
    """A generation that fails half-way leaves no directory, or the previous one intact."""
    from litex.soc.integration import builder as B

    def failing_build(self, **kw):
        Path(self.output_dir, "gateware").mkdir(parents=True, exist_ok=True)
        Path(self.output_dir, "gateware", "half.v").write_text("module half(")
        raise RuntimeError("elaboration failed")

    monkeypatch.setattr(B.Builder, "__init__", lambda self, soc, output_dir, **kw:
                        setattr(self, "output_dir", output_dir))
    monkeypatch.setattr(B.Builder, "build", failing_build)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError):
        generate(get_board("kc705"), object(), out, run_vivado=False)
    assert not out.exists()
    (out / "gateware").mkdir(parents=True)
    (out / "gateware" / "kc705.v").write_text("previous")
    with pytest.raises(RuntimeError):
        generate(get_board("kc705"), object(), out, run_vivado=False)
    assert (out / "gateware" / "kc705.v").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# Stubs ---------------------------------------------------------------------------------------

def test_stub_directions_inferred_from_a_wrapper(tmp_path, monkeypatch):
    """A Vivado IP instantiated inside an added Verilog source: a port whose net the wrapper
    drives is an input, one it only reads is an output; widths from the connections."""
    monkeypatch.setattr(boardtool, "BUILD", tmp_path)
    w = tmp_path / "wrap.v"
    w.write_text("""
module wrap(input clk, input [7:0] a, output [3:0] y, output z);
  wire [3:0] q; wire r;
  vendor_ip #(.MODE("X")) u (.CLK(clk), .A(a), .B(8'd3), .Q(q), .R(r));
  assign y = q; assign z = r;
endmodule
""")
    got = boardtool._yosys_inferred([w], ["wrap"], {"vendor_ip"})
    assert got["vendor_ip"]["ports"] == {"CLK": ["input", 1], "A": ["input", 8], "B": ["input", 8],
                                         "Q": ["output", 4], "R": ["output", 1]}
    assert "MODE" in got["vendor_ip"]["params"]
    text = boardtool.stub_text("vendor_ip", got["vendor_ip"]["ports"], ["MODE"])
    assert "input wire [7:0] A" in text and "output wire [3:0] Q" in text and "parameter MODE" in text


# Programming ---------------------------------------------------------------------------------

#: What Debian's openFPGALoader 0.10 prints (stderr) and its exit status when no cable is found.
NO_CABLE = ("unable to open ftdi device: -3 (device not found)\n"
            "JTAG init failed with: unable to open ftdi device\n")


def _fake_ofl(bindir: Path, stderr: str, rc: int) -> None:
    bindir.mkdir(exist_ok=True)
    f = bindir / "openFPGALoader"
    f.write_text(f"#!/bin/sh\necho \"$@\" > {bindir}/args\nprintf '%s' '{stderr}' >&2\nexit {rc}\n")
    f.chmod(f.stat().st_mode | stat.S_IXUSR)


def test_fake_openfpgaloader_no_cable(tmp_path, monkeypatch):
    _fake_ofl(tmp_path / "bin", NO_CABLE, 1)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    bit = tmp_path / "kc705.bit"
    bit.write_bytes(b"\0")
    with pytest.raises(BoardError, match="exit status 1: no board found on the JTAG cable"):
        program(get_board("kc705"), bit, flash=True)
    assert (tmp_path / "bin" / "args").read_text().split() == ["-b", "kc705", "--write-flash", str(bit)]


def test_fake_openfpgaloader_success(tmp_path, monkeypatch):
    _fake_ofl(tmp_path / "bin", "", 0)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    bit = tmp_path / "x.bit"
    bit.write_bytes(b"\0")
    assert "loaded" in program(get_board("stlv7325"), bit)
    assert (tmp_path / "bin" / "args").read_text().split() == ["-b", "stlv7325", str(bit)]


@pytest.mark.skipif(shutil.which("openFPGALoader") is None, reason="Debian's openfpgaloader not installed")
def test_real_openfpgaloader_no_cable(tmp_path):
    """The Debian binary itself, with no board on this machine: the same summary."""
    bit = tmp_path / "kc705.bit"
    bit.write_bytes(b"\0")
    with pytest.raises(BoardError, match="no board found on the JTAG cable"):
        program(get_board("kc705"), bit)


def test_missing_openfpgaloader_and_bitstream(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BoardError, match="openFPGALoader is not on PATH.*apt-get install openfpgaloader"):
        program(get_board("kc705"), tmp_path / "kc705.bit")
    _fake_ofl(tmp_path / "bin", "", 0)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(BoardError, match="no bitstream at .*kc705.bit: build one with --build"):
        program(get_board("kc705"), tmp_path / "kc705.bit")
    with pytest.raises(BoardError, match="does not know the xcu250"):
        program(get_board("u250"), tmp_path / "u250.bit")


def test_load_main_without_bitstream(tmp_path, monkeypatch, capsys):
    _fake_ofl(tmp_path / "bin", "", 0)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert board_module("kc705").main(["--load", "--output-dir", str(tmp_path / "none")]) == 2
    assert "no bitstream at" in capsys.readouterr().err


# Resources -----------------------------------------------------------------------------------

def test_count_resources():
    r = boardtool.count_resources({"LUT6": 10, "LUT2": 5, "RAM64M": 2, "SRLC32E": 3, "FDRE": 7,
                                   "FDSE": 1, "RAMB36E1": 2, "RAMB18E1": 3, "DSP48E1": 4, "CARRY4": 9})
    assert r == {"lut": 15 + 8 + 3, "lut_logic": 15, "lut_ram": 11, "ff": 8, "bram36": 3.5, "dsp": 4}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("yosys") is None, reason="Debian's yosys not installed")
def test_niccore_fits_smallest_part(tmp_path, monkeypatch):
    """NicCore with 16 contexts and 4 links on the smallest board's part (xc7a200t), with
    room to spare: under half of each resource (about 2 minutes of yosys)."""
    monkeypatch.setattr(boardtool, "BUILD", tmp_path)
    smallest = min((get_board(n).part for n in ALL), key=lambda p: p.luts)
    assert smallest.name == "xc7a200t"
    row = boardtool.report_niccore(4, 16, smallest.name)
    assert 5_000 < row.lut < smallest.luts / 2
    assert 2_000 < row.ff < smallest.ffs / 2
    assert 1 <= row.bram36 < smallest.bram36 / 2
    assert row.dsp < smallest.dsps / 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_board_resources(name, tmp_path, monkeypatch):
    monkeypatch.setattr(boardtool, "BUILD", tmp_path)
    row = boardtool.report_board(name)
    assert 0 < row.lut < row.cap_lut and 0 < row.ff < row.cap_ff and row.bram36 < row.cap_bram36


def _ns(**kw):
    import argparse
    return argparse.Namespace(**kw)


def test_vitis_collective_takes_the_exported_rtl(tmp_path):
    """--collective vitis: the Verilog from where `make hls` exports it (the spec's
    hls_export_path under build/, as paranic.hls's flow leaves it), or one line saying
    how to make it."""
    from paranic.boards.common import add_collective_rtl
    from paranic.sim import hlsenv
    from paranic.spec import kernels as K

    class Platform:
        def __init__(self):
            self.sources: list[str] = []

        def add_source(self, f):
            self.sources.append(f)

    class Soc:
        def __init__(self):
            self.platform = Platform()

    rel = K.hls_export_path("collective")
    assert rel == "hls/collective/pn_collective/solution1/impl/verilog"
    assert str(hlsenv.exported_rtl_dir("collective")).endswith(rel)
    assert hlsenv.exported_rtl_dir("collective").parent.parent.parent == \
        hlsenv.hls_work_dir("collective") / hlsenv.hls_project("collective")
    if not any((Path(__file__).resolve().parents[2] / "build" / rel).glob("*.v")):
        with pytest.raises(BoardError, match=rf"--collective vitis: no exported RTL in .*{rel}.*run `make hls`"):
            add_collective_rtl(Soc())
    (tmp_path / "collective.v").write_text("module collective; endmodule\n")
    (tmp_path / "collective_notes.txt").write_text("")
    soc = Soc()
    assert add_collective_rtl(soc, tmp_path) == [tmp_path / "collective.v"]
    assert soc.platform.sources == [str(tmp_path / "collective.v")]


def test_route_rtl(tmp_path):
    """--route vitis: the route kernel's exported Verilog joins the sources; without it,
    a BoardError that says how to make it."""
    from types import SimpleNamespace

    from paranic.boards.common import add_route_rtl, make_parser

    added = []
    soc = SimpleNamespace(platform=SimpleNamespace(add_source=added.append))
    with pytest.raises(BoardError, match="--route vitis: no exported RTL.*--route migen"):
        add_route_rtl(soc, tmp_path)
    (tmp_path / "route.v").write_text("module route; endmodule\n")
    assert add_route_rtl(soc, tmp_path) == [tmp_path / "route.v"]
    assert added == [str(tmp_path / "route.v")]
    assert make_parser(get_board(ALL[0])).parse_args([]).route == "migen"
    assert make_parser(get_board(ALL[0])).parse_args(["--route", "vitis"]).route == "vitis"
    # without a folder: where `make hls` exports the kernel (build/ + the spec's path)
    if not any((Path(__file__).resolve().parents[2] / "build" / "hls" / "route").rglob("*.v")):
        with pytest.raises(BoardError, match=r"no exported RTL in .*/build/hls/route/pn_route/solution1/impl/verilog"):
            add_route_rtl(soc)
