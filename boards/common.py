"""What every ParaNIC board target shares: board facts, link-connector choice, the
argument parser, generation (with or without Vivado) and programming through
openFPGALoader.

A board module defines ``BOARD = Board(...)`` and a ``Target(ParaNicSoC)``; its
``main()`` is ``run(BOARD, Target)``. Errors the user can fix (unknown link type, no
Vivado, no openFPGALoader, no cable) raise :class:`BoardError`, which ``run`` prints as
one line and turns into exit status 2.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from paranic.spec import protocol as P

#: Link kinds ``--links`` understands, and what carries them.
LINK_KINDS = {
    "sfp": "an SFP/SFP+ cage on a gigabit transceiver (GTP/GTX/GTH), 8b/10b",
    "qsfp": "one lane of a QSFP28 cage on a GTY transceiver, 8b/10b",
    "ribbon": "source-synchronous LVDS lanes on an FMC header, cabled with a ribbon/FMC cable",
}


class BoardError(Exception):
    """A problem the user can fix; printed as one line, no traceback."""


# Parts -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """An FPGA's capacity (from the vendor's product tables) and how yosys synthesizes it."""
    name: str
    luts: int
    ffs: int
    bram36: int          # 36 Kb block RAMs
    dsps: int
    yosys_family: str    # synth_xilinx -family
    gt_family: str       # its transceivers (paranic.hw.phy.gt_glue.FAMILIES)
    yosys_extra: str = ""   # further synth_xilinx options
    approximate: str = ""   # why yosys' figure is only an estimate for this part, "" if not


#: Capacities: Xilinx DS180 (7 series), DS890 (UltraScale), DS962 (Alveo U250 = xcu250).
#: yosys 0.23 maps 7 series natively; for UltraScale(+) ``-family xcu`` maps LUT/FF/BRAM/DSP
#: to the UltraScale cells, LUT RAM is left out (-nolutram: its xcu mapping is incomplete in 0.23).
PARTS = {
    "xc7a200t": Part("xc7a200t", 134_600, 269_200, 365, 740, "xc7", "gtp"),
    "xc7k325t": Part("xc7k325t", 203_800, 407_600, 445, 840, "xc7", "gtx"),
    "xcku040": Part("xcku040", 242_400, 484_800, 600, 1_920, "xcu", "gth", "-nolutram",
                    "yosys xcu mapping without LUT RAM (memories go to FFs/BRAM)"),
    "xcu250": Part("xcu250", 1_728_000, 3_456_000, 2_688, 12_288, "xcu", "gty", "-nolutram",
                   "UltraScale+ part synthesized as UltraScale (xcu) without LUT RAM"),
}


# Links -------------------------------------------------------------------------------------------

#: builds a link PHY adapter (the PHY adapter contract of paranic.hw.phy) on a target
AdapterBuilder = Callable[[Any, int], Any]


@dataclass(frozen=True)
class LinkPort:
    """One connector that can carry one ParaNIC link."""
    kind: str           # a key of LINK_KINDS
    connector: str      # what it is called on the board ("SFP", "FMC HPC lanes 0-3", ...)
    build: AdapterBuilder = field(compare=False, repr=False)


@dataclass(frozen=True)
class Board:
    """The facts of one board target."""
    name: str                   # short name: `paranic boards lint kc705`, `make BOARD=kc705`
    title: str
    platform: Callable[..., Any] = field(repr=False)  # litex_boards Platform class
    part: Part
    pcie: str                   # what the target builds: "x8 Gen2", ...
    ports: dict[str, tuple[LinkPort, ...]] = field(repr=False)
    default_links: tuple[str, ...]
    ofl_args: tuple[str, ...] | None    # openFPGALoader arguments naming board/cable, None: unsupported
    ofl_note: str = ""                  # why not / what to know about programming it
    cable: str = ""                     # the link cable to buy

    @property
    def kinds(self) -> list[str]:
        return [k for k, v in self.ports.items() if v]

    def resolve_links(self, links: str | Sequence[str] | None, n_links: int = 2) -> list[LinkPort]:
        """The connectors of ``--links``: one kind for all links ("sfp") or one per link
        ("sfp,ribbon"). A kind the board lacks, or too few connectors of it, is a BoardError."""
        if links is None:
            kinds = list(self.default_links)
        elif isinstance(links, str):
            kinds = [k.strip() for k in links.split(",") if k.strip()]
        else:
            kinds = list(links)
        if not kinds:
            raise BoardError("--links: give a link kind (sfp, qsfp or ribbon)")
        for k in kinds:
            if k not in LINK_KINDS:
                raise BoardError(f"--links: unknown link kind {k!r} (known: {', '.join(LINK_KINDS)})")
            if not self.ports.get(k):
                raise BoardError(f"{self.title} has no {k} link connector; its links: "
                                 f"{', '.join(self.kinds)}")
        if len(kinds) == 1:
            kinds = kinds * n_links
        if len(kinds) != n_links:
            raise BoardError(f"--links: {len(kinds)} kinds given for {n_links} links")
        out, used = [], {k: 0 for k in LINK_KINDS}
        for k in kinds:
            avail = self.ports[k]
            if used[k] >= len(avail):
                raise BoardError(
                    f"{self.title} has {len(avail)} {k} link connector{'s' * (len(avail) != 1)} "
                    f"({', '.join(p.connector for p in avail)}), {kinds.count(k)} asked for: "
                    f"a ring needs {n_links} links; mix kinds, e.g. --links "
                    f"{','.join(self.default_links)}")
            out.append(avail[used[k]])
            used[k] += 1
        return out


# PCIe ----------------------------------------------------------------------------------------------

def set_pci_ids(phy) -> None:
    """ParaNIC's PCI vendor/device ids (paranic.spec.protocol) into the PCIe hard IP's config."""
    dev = f"{P.PCI_DEVICE_ID:04X}"
    ven = f"{P.PCI_VENDOR_ID:04X}"
    if type(phy).__name__ == "S7PCIEPHY":          # Vivado's pcie_7x
        phy.update_config({"Vendor_ID": ven, "Device_ID": dev, "Subsystem_Vendor_ID": ven,
                           "Subsystem_ID": dev})
    else:                                          # pcie3_ultrascale / pcie4_uscale_plus
        phy.update_config({"PF0_DEVICE_ID": dev, "PF0_SUBSYSTEM_VENDOR_ID": ven,
                           "PF0_SUBSYSTEM_ID": dev})


def s7_pcie_phy(platform, lanes: str):
    """The PCIe PHY of a 7-series board (``lanes``: the platform's ``pcie_x4``/``pcie_x8``):
    the hard block's 128-bit stream, ParaNicSoC's 64-bit core, BAR0 the size of NicCore's
    window, one MSI vector per context."""
    from paranic.hw.pcie_phy import S7PCIEPHY   # LitePCIe's, with a working receive path

    return S7PCIEPHY(platform, platform.request(lanes), data_width=64, pcie_data_width=128,
                     bar0_size=P.BAR0_BYTES, msi_type="msi-multi-vector")


def add_pcie(soc, phy) -> None:
    """``phy`` as the target's PCIe endpoint: ParaNIC's ids in the hard IP's
    configuration, then LitePCIe's endpoint with BAR0 and NicCore's DMA ports
    (:meth:`ParaNicSoC.add_paranic_pcie`)."""
    set_pci_ids(phy)
    soc.add_paranic_pcie(phy)


# Link PHYs on a target -----------------------------------------------------------------------

def gt_pads(platform, name: str, number: int = 0, lane: int | None = None):
    """(tx, rx) pads with ``p``/``n`` of a transceiver connector, whichever way the
    litex-boards platform spells it (``sfp_tx``/``sfp_rx``, or ``sfp`` with txp/txn/rxp/rxn;
    ``lane`` picks one lane of a multi-lane connector such as ``qsfp28``)."""
    from types import SimpleNamespace

    names = {r[0] for r in platform.constraint_manager.available}
    if lane is None and f"{name}_tx" in names:
        return platform.request(f"{name}_tx", number), platform.request(f"{name}_rx", number)
    pads = platform.request(name, number)
    if lane is None:
        return SimpleNamespace(p=pads.txp, n=pads.txn), SimpleNamespace(p=pads.rxp, n=pads.rxn)
    return (SimpleNamespace(p=pads.txp[lane], n=pads.txn[lane]),
            SimpleNamespace(p=pads.rxp[lane], n=pads.rxn[lane]))


def gt_link(soc, i: int, *, tx, rx, refclk, refclk_freq: float):
    """A transceiver link PHY (:class:`paranic.hw.phy.gt_glue.GTLinkPHY`) on ``tx``/``rx``.

    ``refclk`` is the quad's reference clock pads, requested once per quad: the first
    lane on it buffers it and builds the quad PLL, later lanes on the same pads share
    that PLL (two buffers on one pad pair would not place)."""
    from paranic.hw.phy.gt_glue import GTLinkPHY

    quads = soc.__dict__.setdefault("_gt_quads", {})
    first = quads.get(id(refclk))
    phy = GTLinkPHY(soc.platform, soc.board_part.gt_family, refclk, refclk_freq, tx, rx,
                    soc.sys_clk_freq, name=f"gt{i}", pll=first.pll if first else None,
                    sys_clk=soc.crg.cd_sys.clk)
    quads.setdefault(id(refclk), phy)
    return phy


def ribbon_link(soc, i: int, *, connector: str):
    """A ribbon link PHY (:class:`paranic.hw.phy.ribbon.RibbonPHY`) on the LA pairs of FMC
    connector ``connector``; the CRG provides ``sys4x`` and the IDELAYCTRL it needs."""
    from paranic.hw.phy.ribbon import RibbonPHY
    from paranic.hw.phy.ribbon_pads import ribbon_io

    soc.platform.add_extension(ribbon_io(connector, i, platform=soc.platform))
    soc.__dict__.setdefault("_ribbon_connectors", []).append(connector)
    return RibbonPHY(soc.platform.request("ribbon", i), soc.sys_clk_freq, cd_rx=f"ribbon{i}_rx")


def s7_crg(platform, sys_clk_freq: float, *, reset: str, reset_active_low: bool = False,
           ribbon: bool = False, mmcm: bool = False):
    """The CRG of a 7-series board with a 200 MHz oscillator (``clk200``): ``sys`` and,
    for boards with ribbon links, ``sys4x`` (the ribbon's serial DDR clock) and the
    200 MHz reference of the IDELAYCTRL the ribbon receivers need."""
    from litex.gen import LiteXModule
    from litex.soc.cores.clock import S7IDELAYCTRL, S7MMCM, S7PLL
    from migen import ClockDomain, Signal

    class S7CRG(LiteXModule):
        def __init__(self) -> None:
            self.rst = Signal()
            self.cd_sys = ClockDomain()
            self.pll = pll = (S7MMCM if mmcm else S7PLL)(speedgrade=-2)
            rst = platform.request(reset)
            self.comb += pll.reset.eq((~rst if reset_active_low else rst) | self.rst)
            pll.register_clkin(platform.request("clk200"), 200e6)
            pll.create_clkout(self.cd_sys, sys_clk_freq)
            if ribbon:
                self.cd_sys4x = ClockDomain()
                self.cd_idelay = ClockDomain()
                pll.create_clkout(self.cd_sys4x, 4 * sys_clk_freq)
                pll.create_clkout(self.cd_idelay, 200e6)
                self.idelayctrl = S7IDELAYCTRL(self.cd_idelay)
            platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)

    return S7CRG()


def us_crg(platform, sys_clk_freq: float, *, mmcm_cls, clkin: str, clkin_freq: float,
           reset: str | None = None):
    """The CRG of an UltraScale(+) board: ``sys`` from the oscillator ``clkin`` through
    an MMCM (``mmcm_cls``: LiteX's ``USMMCM`` or ``USPMMCM``), held in reset by the
    ``reset`` button if the board has one."""
    from litex.gen import LiteXModule
    from migen import ClockDomain, Signal

    class USCRG(LiteXModule):
        def __init__(self) -> None:
            self.rst = Signal()
            self.cd_sys = ClockDomain()
            self.pll = pll = mmcm_cls(speedgrade=-2)
            self.comb += pll.reset.eq((platform.request(reset) if reset else 0) | self.rst)
            pll.register_clkin(platform.request(clkin), clkin_freq)
            pll.create_clkout(self.cd_sys, sys_clk_freq)
            platform.add_false_path_constraints(self.cd_sys.clk, pll.clkin)

    return USCRG()


def led_pads(platform, n: int, name: str = "user_led"):
    """The board's first ``n`` LEDs as one signal (bit i: link i)."""
    from migen import Cat

    return Cat(*[platform.request(name, i) for i in range(n)])


def has_ribbon(board: "Board", links) -> bool:
    """Whether ``--links`` puts a ribbon on the board: its targets then build the SoC
    with the sync line (``ParaNicSoC(with_sync_line=True)``), which :func:`add_links`
    wires to the first ribbon's connector."""
    return any(p.kind == "ribbon" for p in board.resolve_links(links))


def add_links(soc, board: "Board", links, leds=None, leds_active_low: bool = False) -> None:
    """The link PHYs of ``--links`` on NicCore's link ports, one LED per link (up)."""
    from migen import Signal

    soc.board_part = board.part
    soc.link_ports = ports = board.resolve_links(links, soc.nic.nic.n_links)
    for i, lp in enumerate(ports):
        soc.add_link_phy(i, lp.build(soc, i))
    if soc.nic.nic.barrier.with_sync_line:
        # The wired-AND barrier line, on the first ribbon's FMC connector.
        from paranic.hw.phy.ribbon_pads import sync_io

        connector = soc._ribbon_connectors[0]
        soc.platform.add_extension(sync_io(connector, platform=soc.platform))
        soc.add_sync_line(soc.platform.request("ribbon_sync"))
    add_dna(soc, board)
    if leds is not None:
        if leds_active_low:
            up = Signal(len(ports))
            soc.comb += leds.eq(~up)
            leds = up
        soc.add_link_leds(leds)


def add_dna(soc, board: "Board") -> None:
    """NicCore's ``dna`` identity input from the FPGA's device DNA (LiteX's XilinxDNA:
    DNA_PORT, 57 bits, on 7 series; DNA_PORTE2, 96 bits of which the low 64 are used, on
    UltraScale(+)); the firmware reads it as ``id_dna`` (docs/mgmt.md). No configured
    node id: ``cfg_node`` stays 0."""
    from litex.soc.cores.dna import XilinxDNA

    if board.part.yosys_family == "xc7":
        soc.dna = XilinxDNA(nbits=57, primitive="DNA_PORT")
    else:
        soc.dna = XilinxDNA(nbits=96, primitive="DNA_PORTE2")
    soc.comb += soc.nic.nic.dna.eq(soc.dna._id.status[:64])


# Argument parser -----------------------------------------------------------------------------------

#: --collective: NicCore's build option ``collective`` (docs/hls.md, "In NicCore").
COLLECTIVE_CHOICES = ("migen", "vitis", "none")


def add_kernel_rtl(soc, kernel: str, option: str, rtl_dir: Path | None = None) -> list[Path]:
    """A board built with ``--<option> vitis`` needs the HLS kernel's exported RTL: add its
    Verilog files (from where `make hls` exports them: ``build/`` +
    ``paranic.spec.kernels.hls_export_path``) to the platform's sources, or fail saying
    how to make them."""
    from paranic.spec import kernels as K

    d = Path(rtl_dir) if rtl_dir else Path(__file__).resolve().parents[1] / "build" / K.hls_export_path(kernel)
    files = sorted(d.glob("*.v"))
    if not files:
        raise BoardError(f"--{option} vitis: no exported RTL in {d}; run `make hls` where Vitis HLS is "
                         f"installed (it exports the kernel there), or build with --{option} migen")
    for f in files:
        soc.platform.add_source(str(f))
    return files


def add_collective_rtl(soc, rtl_dir: Path | None = None) -> list[Path]:
    """``--collective vitis``: the collective kernel's RTL (module ``collective``)."""
    return add_kernel_rtl(soc, "collective", "collective", rtl_dir)


#: --route: NicCore's build option ``route_fn`` (docs/hls.md, "In the router").
ROUTE_CHOICES = ("migen", "vitis")


def add_route_rtl(soc, rtl_dir: Path | None = None) -> list[Path]:
    """``--route vitis``: the route kernel's RTL (module ``route``, one instance per
    router input)."""
    return add_kernel_rtl(soc, "route", "route", rtl_dir)


def make_parser(board: Board):
    """litex-boards' parser (--build, --load, --toolchain, SoC and builder args) plus ours."""
    from litex.build.parser import LiteXArgumentParser

    p = LiteXArgumentParser(platform=board.platform, description=f"ParaNIC on {board.title}.")
    p.add_target_argument("--flash", action="store_true", help="Write the bitstream to the board's SPI flash.")
    p.add_target_argument("--sys-clk-freq", default=P.TARGET_CLK_HZ, type=float, help="System clock frequency.")
    p.add_target_argument("--links", default=",".join(board.default_links),
                          help=f"Link connectors: one kind for both links or one per link "
                               f"(this board: {', '.join(board.kinds)}; default "
                               f"{','.join(board.default_links)}).")
    p.add_target_argument("--node-id", default=None, type=int, help="Node id at reset (default: set by software).")
    p.add_target_argument("--n-ctx", default=P.DEFAULT_CONTEXTS, type=int, help="Hardware contexts.")
    p.add_target_argument("--collective", default="migen", choices=COLLECTIVE_CHOICES,
                          help="The collective unit's kernel: migen (the Migen implementation), vitis "
                               "(the HLS kernel's RTL: run `make hls` with Vitis first), none (no unit).")
    p.add_target_argument("--route", default="migen", choices=ROUTE_CHOICES,
                          help="The router's routing function (the route kernel, one per input): migen "
                               "(its Migen twin), vitis (the HLS kernel's RTL: run `make hls` with Vitis first).")
    p.set_defaults(output_dir=str(Path("build") / "boards" / board.name))
    return p


# Generation ----------------------------------------------------------------------------------------

def vivado_available() -> bool:
    """As LiteX's Vivado toolchain decides: `vivado` on PATH or LITEX_ENV_VIVADO set."""
    return shutil.which("vivado") is not None or bool(os.getenv("LITEX_ENV_VIVADO"))


@dataclass
class Generated:
    """What a generation wrote (paths are absolute)."""
    gateware_dir: Path
    build_name: str
    verilog: Path
    tcl: Path
    xdc: Path
    script: Path
    manifest: Path

    @property
    def bitstream(self) -> Path:
        return self.gateware_dir / f"{self.build_name}.bit"


def _instances(fragment) -> dict[str, dict]:
    """Every Migen Instance of the design: module -> ports (direction, width), parameters.
    The lint and the resource report make black-box stubs of the ones no source defines."""
    from migen.fhdl.specials import Instance

    out: dict[str, dict] = {}
    for sp in fragment.specials:
        if not isinstance(sp, Instance):
            continue
        m = out.setdefault(sp.of, {"ports": {}, "params": []})
        for it in sp.items:
            if isinstance(it, Instance.Parameter):
                if it.name not in m["params"]:
                    m["params"].append(it.name)
                continue
            d = {Instance.Input: "input", Instance.Output: "output", Instance.InOut: "inout"}[type(it)]
            w = len(it.expr)
            old = m["ports"].get(it.name)
            m["ports"][it.name] = [d, max(w, old[1]) if old else w]
    return out


def generate(board: Board, soc, output_dir: Path, *, compile_software: bool = False,
             run_vivado: bool | None = None, **builder_kwargs) -> Generated:
    """Write the gateware (Verilog, Vivado project tcl, xdc, build script) and a manifest
    (paranic_board.json: part, sources, instances) into ``output_dir``/gateware; run Vivado
    only if ``run_vivado`` (default: when it is installed).

    Nothing half-written: a previous ``output_dir`` is set aside first and put back if
    generation fails; a failed first generation leaves no directory.
    """
    from litex.soc.integration.builder import Builder

    if compile_software:
        # LiteX's BIOS build runs meson and ninja; the venv this runs in has them.
        venv_bin = str(Path(sys.executable).parent)
        if venv_bin not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = venv_bin + os.pathsep + os.environ.get("PATH", "")
    output_dir = Path(output_dir).resolve()
    backup = output_dir.with_name(f".{output_dir.name}.previous")
    if backup.exists():
        shutil.rmtree(backup)
    if output_dir.exists():
        output_dir.rename(backup)
    cwd = os.getcwd()
    try:
        builder = Builder(soc, output_dir=str(output_dir), compile_software=compile_software,
                          compile_gateware=False, **builder_kwargs)
        build_name = board.name
        builder.build(build_name=build_name, run=False)
        gw = Path(builder.gateware_dir)
        gen = Generated(gw, build_name, gw / f"{build_name}.v", gw / f"{build_name}.tcl",
                        gw / f"{build_name}.xdc", gw / f"build_{build_name}.sh",
                        gw / "paranic_board.json")
        for f in (gen.verilog, gen.tcl, gen.xdc, gen.script):
            if not f.is_file():
                raise BoardError(f"generation wrote no {f.name}")
        manifest = {
            "board": board.name, "title": board.title, "part": board.part.name,
            "device": soc.platform.device, "top": build_name, "verilog": str(gen.verilog),
            "sources": [[s[0], s[1]] for s in soc.platform.sources],
            "instances": _instances(soc.platform.toolchain.fragment),
            "links": [[lp.kind, lp.connector] for lp in getattr(soc, "link_ports", [])],
        }
        gen.manifest.write_text(json.dumps(manifest, indent=1))
        # The NicCore's CSR map as built (BAR0's CSR region), for the driver of this
        # gateware: make driver CSR_JSON=<output_dir>/nic_csr.json.
        from paranic.hw.standalone import write_csr_json

        write_csr_json(soc.nic.csr_map(), output_dir / "nic_csr.json")
    except BaseException:
        os.chdir(cwd)
        shutil.rmtree(output_dir, ignore_errors=True)
        if backup.exists():
            backup.rename(output_dir)
        raise
    os.chdir(cwd)
    if backup.exists():
        shutil.rmtree(backup)
    if run_vivado is None:
        run_vivado = vivado_available()
    if run_vivado:
        r = subprocess.run(["bash", gen.script.name], cwd=gw)
        if r.returncode != 0:
            raise BoardError(f"Vivado failed (exit status {r.returncode}) running {gen.script} "
                             f"in {gw}; see its log there")
    return gen


def summary_line(gen: Generated, ran_vivado: bool) -> str:
    """The one line --build prints."""
    rel = os.path.relpath(gen.gateware_dir)
    files = f"{gen.verilog.name}, {gen.tcl.name}, {gen.xdc.name}"
    if ran_vivado:
        return f"{gen.build_name}: generated {files} in {rel} and Vivado wrote {gen.bitstream.name}"
    return (f"{gen.build_name}: generated {files} in {rel}; vivado is not on PATH, so no bitstream: "
            f"where Vivado is installed run `cd {rel} && vivado -mode batch -source {gen.tcl.name}` "
            f"(or bash {gen.script.name})")


# Programming -------------------------------------------------------------------------------------

OFL = "openFPGALoader"


def _ofl_summary(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    low = text.lower()
    if "unable to open ftdi device" in low or "jtag init failed" in low or "no device found" in low:
        return ("no board found on the JTAG cable (is it connected and powered, and may this user "
                "open the USB device? see docs/boards.md)")
    if "cannot find board" in low:
        return "this openFPGALoader does not know the board (" + lines[-1] + ")"
    return lines[-1] if lines else "no message"


def ofl_command(board: Board, bitstream: Path, flash: bool) -> list[str]:
    if board.ofl_args is None:
        raise BoardError(f"{board.title}: openFPGALoader cannot program it: {board.ofl_note}")
    exe = shutil.which(OFL)
    if exe is None:
        raise BoardError(f"{OFL} is not on PATH: install Debian's openfpgaloader "
                         f"(apt-get install openfpgaloader)")
    return [exe, *board.ofl_args, *(["--write-flash"] if flash else []), str(bitstream)]


def program(board: Board, bitstream: Path, flash: bool = False) -> str:
    """Load (SRAM) or flash ``bitstream`` with openFPGALoader; its failure is a BoardError
    carrying its exit status and message, summarised."""
    cmd = ofl_command(board, bitstream, flash)
    if not Path(bitstream).is_file():
        raise BoardError(f"no bitstream at {bitstream}: build one with --build on a machine with "
                         f"Vivado (without it, --build only generates the project)")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BoardError(f"{OFL} {'--write-flash' if flash else '(load)'} failed with exit status "
                         f"{r.returncode}: {_ofl_summary(r.stdout + chr(10) + r.stderr)}")
    return f"{board.name}: {'flashed' if flash else 'loaded'} {bitstream} with {OFL}"


# main() ------------------------------------------------------------------------------------------

def run(board: Board, target_cls, argv: Sequence[str] | None = None) -> int:
    """A board's main(): parse, elaborate, --build, --load / --flash."""
    parser = make_parser(board)
    args = parser.parse_args(argv)
    try:
        board.resolve_links(args.links)          # fail before elaborating
        bk = parser.builder_argdict
        out = Path(bk.pop("output_dir"))
        if args.build or not (args.load or args.flash):
            soc_kwargs = parser.soc_argdict
            coll = None if args.collective == "none" else args.collective
            soc = target_cls(sys_clk_freq=args.sys_clk_freq, links=args.links,
                             node_id=args.node_id, n_ctx=args.n_ctx, collective=coll,
                             route_fn=args.route, **soc_kwargs)
            if coll == "vitis":
                add_collective_rtl(soc)
            if args.route == "vitis":
                add_route_rtl(soc)
            if args.build:
                ran = vivado_available()
                gen = generate(board, soc, out, compile_software=bk.pop("compile_software", False),
                               run_vivado=ran,
                               **{k: v for k, v in bk.items() if k in _BUILDER_PASS})
                print(summary_line(gen, ran))
            else:
                print(f"{board.name}: elaborated ({len(soc.link_ports)} links: "
                      f"{', '.join(lp.connector for lp in soc.link_ports)}); give --build to generate")
        if args.load or args.flash:
            bit = out / "gateware" / f"{board.name}.bit"
            print(program(board, bit, flash=args.flash))
    except BoardError as e:
        print(f"{board.name}: error: {e}", file=sys.stderr)
        return 2
    return 0


#: LiteX builder arguments generate() passes on (the others it sets itself)
_BUILDER_PASS = {"csr_csv", "csr_json", "csr_svd", "memory_x", "doc", "bios_lto", "bios_format",
                 "gateware_dir", "software_dir", "include_dir", "generated_dir"}
