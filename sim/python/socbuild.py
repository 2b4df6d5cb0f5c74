"""Building the SoC node of the SoC cluster (:class:`paranic.hw.socnode.ParaNicSocNode`) with
LiteX's Builder: the node's Verilog module, LiteX's generated headers and linker regions
(``include/generated``: csr.h, soc.h, mem.h, regions.ld, variables.mak) and LiteX's
software libraries (libc, libcompiler_rt, libbase) compiled for the VexRiscv, which the
firmware (firmware/Makefile) is built against.

The ROM gets a placeholder init file; the Verilog is changed so that the simulator loads
the ROM from the file named by the plusarg ``+paranic_rom=PATH`` (default: the
placeholder), so new firmware needs no Verilator rebuild. The build is cached under
``build/socnode/<key>/`` (key: the gateware sources and parameters).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import paranic.hw
import paranic.spec
from paranic.spec import cgen
from paranic.spec import protocol as P

from .hdl import constant_comb_for_verilator
from .paths import BUILD_ROOT, build_lock

#: The node's Verilog module name.
NODE_MODULE = "paranic_socnode"
#: LiteX's software packages the firmware needs (the BIOS and the other cores' libs are not built).
SOFTWARE_PACKAGES = ("libc", "libcompiler_rt", "libbase")
#: The plusarg naming the ROM image (hex words, one per line: ``firmware.init``).
ROM_PLUSARG = "paranic_rom"


@dataclass(frozen=True)
class SocNodeBuild:
    """What :func:`build_node` produced (absolute paths)."""
    dir: Path
    verilog: Path          # the node module
    sources: tuple[Path, ...]   # every Verilog file of the node (the CPU's too)
    ports: list            # [(name, width, "in"/"out")]
    nic_csr_json: Path     # NicCore's CSR map (pn_csr.h's source)
    soc_csr_json: Path     # LiteX's csr.json of the SoC (its CSR region, regions, constants)
    include_dir: Path      # generated/ (csr.h, soc.h, mem.h, regions.ld, variables.mak) + pn_csr.h
    software_dir: Path     # libc/ libcompiler_rt/ libbase/ (the compiled libraries)
    rom_placeholder: Path
    n_links: int

    @property
    def rom_bytes(self) -> int:
        return json.loads(self.soc_csr_json.read_text())["memories"]["rom"]["size"]


#: Bump when the node's generation here changes (the key hashes the gateware sources).
GENERATION = 2


def _sources_key(n_links: int, n_ctx: int, mtu: int, table_nodes: int) -> str:
    import hashlib
    import litex

    h = hashlib.sha256(f"{GENERATION} {n_links} {n_ctx} {mtu} {table_nodes} {litex.__file__}".encode())
    for pkg in (paranic.hw, paranic.spec):
        for f in sorted(Path(pkg.__file__).parent.rglob("*.py")):
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _plusarg_rom(text: str, rom_init: str, default: Path) -> str:
    """``$readmemh("<rom_init>", mem)`` -> load the file of ``+paranic_rom=`` (or ``default``)."""
    pat = re.compile(r'\$readmemh\("' + re.escape(rom_init) + r'", (\w+)\);')
    if len(pat.findall(text)) != 1:
        raise RuntimeError(f"socnode: expected one $readmemh of {rom_init} in the node's Verilog")

    def repl(m: re.Match) -> str:
        return (f'begin : paranic_rom_load\n\t\tstring f;\n'
                f'\t\tif (!$value$plusargs("{ROM_PLUSARG}=%s", f)) f = "{default}";\n'
                f'\t\t$readmemh(f, {m.group(1)});\n\tend')
    return pat.sub(repl, text)


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        print(f"paranic-sim build socnode: {msg}", file=sys.stderr, flush=True)


def build_node(n_links: int = 2, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
               table_nodes: int = 16, quiet: bool = False) -> SocNodeBuild:
    """Build (or reuse) the SoC node: LiteX's Builder with the software libraries."""
    key = _sources_key(n_links, n_ctx, mtu, table_nodes)
    # One directory per parameter set (stable paths: the Verilog names its init files by
    # absolute path, and an unchanged Verilog must not rebuild the Verilated cluster).
    out = BUILD_ROOT / "socnode" / f"l{n_links}-c{n_ctx}-m{mtu}-t{table_nodes}"
    out.parent.mkdir(parents=True, exist_ok=True)
    manifest = out / "node.json"
    stamp = out / ".srckey"
    with open(out.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (manifest.exists() and stamp.exists() and stamp.read_text() == key):
            _generate(out, n_links, n_ctx, mtu, table_nodes, quiet)
            stamp.write_text(key)
        m = json.loads(manifest.read_text())
    return SocNodeBuild(dir=out, verilog=Path(m["verilog"]), sources=tuple(Path(s) for s in m["sources"]),
                        ports=[tuple(p) for p in m["ports"]], nic_csr_json=Path(m["nic_csr_json"]),
                        soc_csr_json=Path(m["soc_csr_json"]), include_dir=Path(m["include_dir"]),
                        software_dir=Path(m["software_dir"]), rom_placeholder=Path(m["rom_placeholder"]),
                        n_links=n_links)


def _generate(out: Path, n_links: int, n_ctx: int, mtu: int, table_nodes: int, quiet: bool) -> None:
    import shutil

    from litex.soc.integration.builder import Builder

    from paranic.hw.socnode import ParaNicSocNode, SocNodePlatform
    from paranic.hw.standalone import write_csr_json

    if out.exists():
        shutil.rmtree(out)
    t0 = time.time()
    _log(f"LiteX Builder -> {out} (Verilog, headers, libc/libcompiler_rt/libbase for the VexRiscv)", quiet)
    # LiteX's software build runs meson and ninja: the venv has them.
    venv_bin = str(Path(sys.executable).parent)
    env_path = os.environ.get("PATH", "")
    if venv_bin not in env_path.split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + env_path
    platform = SocNodePlatform(NODE_MODULE)
    soc = ParaNicSocNode(platform, n_links=n_links, n_ctx=n_ctx, mtu=mtu, table_nodes=table_nodes)
    builder = Builder(soc, output_dir=str(out), compile_software=True, compile_gateware=False,
                      csr_json=str(out / "csr.json"))
    builder.software_packages = [(n, d) for n, d in builder.software_packages if n in SOFTWARE_PACKAGES]
    cwd = os.getcwd()
    log = out / "software.log"
    out.mkdir(parents=True, exist_ok=True)
    # The libraries' make output is long: into a log (fd level, make is a child process).
    saved = os.dup(1)
    try:
        with open(log, "w") as lf:
            os.dup2(lf.fileno(), 1)
            builder.build(build_name=NODE_MODULE, run=False)
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.chdir(cwd)
    gw = Path(builder.gateware_dir)
    v = gw / f"{NODE_MODULE}.v"
    rom_inits = [p for p in gw.glob(f"{NODE_MODULE}_rom*.init")]
    if len(rom_inits) != 1:
        raise RuntimeError(f"socnode: expected one ROM init file in {gw}, found {rom_inits}")
    placeholder = rom_inits[0].resolve()
    # LiteX stamps the generation time into the Verilog: drop it, so that an unchanged
    # design gives the same file and no new Verilator build.
    text = re.sub(r"(// Date +: |Auto-Generated by LiteX on )[0-9: -]+", r"\1-", v.read_text())
    text = constant_comb_for_verilator(text)
    v.write_text(_plusarg_rom(text, placeholder.name, placeholder))
    # Other memories' init files are read relative to the simulator's working directory:
    # make their paths absolute.
    text = v.read_text()
    text = re.sub(r'\$readmemh\("([^"/]+\.init)"', lambda m: f'$readmemh("{gw / m.group(1)}"', text)
    v.write_text(text)
    nic_csr = out / "nic_csr.json"
    write_csr_json(soc.nic.csr_map(), nic_csr)
    inc = Path(builder.include_dir)
    regs = json.loads(nic_csr.read_text())
    (inc / "generated" / "pn_csr.h").write_text(cgen.csr_header(regs))
    cpu_sources = [Path(s[0]) for s in platform.sources if str(s[0]).endswith(".v")
                   and Path(s[0]).name != v.name]
    srcs = [str(v.resolve())] + [str(Path(s).resolve()) for s in cpu_sources]
    (out / "node.json").write_text(json.dumps({
        "verilog": str(v.resolve()), "sources": srcs, "ports": soc.node_ports,
        "nic_csr_json": str(nic_csr.resolve()), "soc_csr_json": str((out / "csr.json").resolve()),
        "include_dir": str(inc.resolve()), "software_dir": str(Path(builder.software_dir).resolve()),
        "rom_placeholder": str(placeholder), "n_links": n_links, "n_ctx": n_ctx, "mtu": mtu,
    }, indent=1))
    _log(f"node built in {time.time() - t0:.0f} s: {v}", quiet)


__all__ = ["build_node", "SocNodeBuild", "NODE_MODULE", "ROM_PLUSARG", "SOFTWARE_PACKAGES"]


def probe_header(topo_spec: str) -> str:
    """``probe_gen.h`` of the bring-up probe (firmware/probe/): the topology's routing
    tables from :mod:`paranic.spec.topo` (one definition; the real firmware computes its
    own with spec/c/pn_route.c) and a fingerprint of the topology."""
    import zlib

    from paranic.spec.topo import Topology

    from .build import table_nodes_of

    t = Topology.parse(topo_spec)
    tn = table_nodes_of(t)
    L = ["/* GENERATED by paranic.sim.socbuild.probe_header: do not edit. */", "#pragma once",
         "#include <stdint.h>", "", f'#define PROBE_TOPO "{t}"', f"#define PROBE_NODES {t.nodes}",
         f"#define PROBE_TABLE_NODES {tn}",
         f"#define PROBE_FINGERPRINT 0x{zlib.crc32(str(t).encode()):08x}u", "",
         "/* PROBE_ROUTES[node][dst] = link port (0: local) */",
         "static const uint8_t PROBE_ROUTES[PROBE_NODES][PROBE_TABLE_NODES] = {"]
    L += ["\t{" + ", ".join(str(int(p)) for p in t.table(n, tn)) + "}," for n in range(t.nodes)]
    return "\n".join(L + ["};", ""])


def main(argv: list[str] | None = None) -> int:
    """``python -m paranic.sim.socbuild dir [--links N]``: build (cached) the SoC node and
    print its directory (firmware/Makefile's SOCNODE); ``probe-header TOPO OUT``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m paranic.sim.socbuild")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dir", help="build (or find) the SoC node, print its build directory")
    d.add_argument("--links", type=int, default=2, help="link ports per node (ring: 2, torus: 4)")
    d.add_argument("--mtu", type=int, default=P.DEFAULT_MTU)
    d.add_argument("--contexts", type=int, default=P.DEFAULT_CONTEXTS)
    d.add_argument("--table-nodes", type=int, default=16)
    h = sub.add_parser("probe-header", help="write the bring-up probe's probe_gen.h")
    h.add_argument("topo")
    h.add_argument("out")
    a = ap.parse_args(argv)
    if a.cmd == "dir":
        if a.links not in (2, 4):
            ap.error("--links: 2 (ring) or 4 (torus)")
        print(build_node(a.links, a.contexts, a.mtu, a.table_nodes, quiet=True).dir)
        return 0
    try:
        text = probe_header(a.topo)
    except ValueError as e:
        ap.error(str(e))
    out = Path(a.out)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def make_firmware(n_links: int = 2, probe_topo: str | None = None, quiet: bool = False) -> Path:
    """Build (make, incremental) the firmware -- or, with ``probe_topo``, the bring-up
    probe for that topology -- against the SoC node of ``n_links`` link ports; returns
    its ROM image (``.init``) for ``paranic-sim --firmware``."""
    import subprocess

    from .paths import TREE

    node = build_node(n_links, quiet=quiet)
    out = BUILD_ROOT / "firmware" / node.dir.name
    cmd = ["make", "-C", str(TREE / "firmware"), f"SOCNODE={node.dir}", f"OUT={out}",
           f"PY={sys.executable}"]
    if probe_topo is not None:
        from paranic.spec.topo import Topology

        t = Topology.parse(probe_topo)
        cmd += ["probe", f"TOPO={t}"]
        image = out / f"probe-{str(t).replace(':', '')}" / "probe.init"
    else:
        cmd += ["firmware"]
        image = out / "firmware.init"
    with build_lock(f"firmware-{node.dir.name}"):
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"building the firmware failed ({' '.join(cmd)}):\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return image
