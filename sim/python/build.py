"""The Verilator cluster simulator's build: Verilog, Verilated model, harness (cached).

``paranic-sim`` is N NicCores (:mod:`paranic.sim.cluster`) Verilated into a C++ model
and linked with the harness in ``sim/harness`` (each node's host: MMIO master, DMA
servers with PCIe latencies, a UNIX socket where processes using libparanic's ``sim``
backend attach). See ``docs/simulator.md``.

:func:`build` writes the cluster's Verilog (skipped when the gateware sources did not
change), Verilates it into ``build/sim/cluster-<topo>-<hash>/`` (``hash`` of the
Verilog, the CSR map and the Verilator flags; skipped when that directory holds a
finished model) and compiles the harness against it with the build's generated
headers (``pn_csr.h`` from its CSR map, ``cluster_gen.h`` with its topology and
routing tables), again only when the harness sources changed. It returns the binary.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

from paranic.spec import cgen
from paranic.spec import kernels as K
from paranic.spec import protocol as P
from paranic.spec import sim as S
from paranic.spec.topo import Topology

from .hdl import gateware_key, setup_verilator_env, verilator_root
from .hlsenv import COMMON_HEADERS as KERNEL_COMMON_HEADERS, CXXFLAGS as KERNEL_CXXFLAGS, HLS_DIR, \
    include_dirs as kernel_include_dirs
from .paths import BUILD_ROOT, HARNESS_DIR, TREE, generate_unless_current, source_key

#: Name of the Verilated model class (``--prefix``).
MODEL = "Vcluster"
#: Verilator flags: the warning set of :func:`paranic.sim.hdl.build_verilator`, no X.
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
                   "--x-assign", "0", "--x-initial", "0", "-O3")
#: C++ optimisation of the Verilated model (OPT_FAST: the per-cycle code).
MODEL_MAKE_VARS = ("OPT_FAST=-O2", "OPT_SLOW=-O1", "OPT_GLOBAL=-O2")
HARNESS_CXXFLAGS = ("-std=c++17", "-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter")
#: libparanic's C sources the harness links (the context sequences, pn_ctxseq.h), compiled with gcc.
HARNESS_C_SOURCES = (TREE / "userlib/src/ctxseq.c", TREE / "userlib/src/sim_proto.c")
HARNESS_CFLAGS = ("-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror")
#: Default cable delay of the simulated PHYs, in cycles (``NicCluster(phy_delay=)``): the
#: default latency model's transceivers, clock crossings and cable (paranic.spec.sim).
DEFAULT_PHY_DELAY = S.cable_cycles(S.DEFAULT_MODEL)
#: Headers from the spec the harness includes (generated into the tree), and where they are.
SPEC_HEADERS = (TREE / "userlib/src/pn_sim_shm.h", TREE / "userlib/include/paranic/pn_protocol.h")
#: libparanic's headers of HARNESS_C_SOURCES.
USERLIB_HEADERS = (TREE / "userlib/include/paranic/pn_ctxseq.h", TREE / "userlib/src/pn_sim_proto.h")
HARNESS_INCLUDES = (TREE / "userlib/src", TREE / "userlib/include")
#: The HLS collective kernel's C++, compiled into the harness (coll.cpp runs it for every
#: node) with the kernels' own flags (paranic.sim.hlsenv), and the headers it includes.
#: The route kernel's C++ too: every router input of a NicCore cluster instantiates
#: ROUTE_DPI_SV, which calls route() through DPI-C (sim/harness/route_dpi.cpp).
KERNEL_SOURCES = (HLS_DIR / "collective" / "collective.cpp", HLS_DIR / "route" / "route.cpp")
KERNEL_HEADERS = (HLS_DIR / "collective" / "collective.h", HLS_DIR / "route" / "route.h", *KERNEL_COMMON_HEADERS)


_TAG = threading.local()  # the topology being built by this thread (log prefix)


def _log(msg: str, quiet: bool) -> None:
    if not quiet:
        tag = getattr(_TAG, "value", "")
        print(f"paranic-sim build{' ' + tag if tag else ''}: {msg}", file=sys.stderr, flush=True)


def topo_tag(topo: Topology, soc: bool = False) -> str:
    """``ring4``, ``torus4x4`` (``soc-ring4`` for a SoC cluster): the topology part of
    build directory names."""
    t = f"torus{topo.x}x{topo.y}" if topo.is_torus else f"ring{topo.x}"
    return f"soc-{t}" if soc else t


def table_nodes_of(topo: Topology) -> int:
    """Routing-table entries of a cluster's NicCores (NicCluster's default)."""
    return max(16, 1 << (topo.nodes - 1).bit_length())


def harness_sources() -> list[Path]:
    """Every file the harness binary is compiled from (besides the generated glue)."""
    return (sorted(HARNESS_DIR.glob("*.cpp")) + sorted(HARNESS_DIR.glob("*.h")) + list(SPEC_HEADERS)
            + list(HARNESS_C_SOURCES) + list(USERLIB_HEADERS) + list(KERNEL_SOURCES) + list(KERNEL_HEADERS))


#: The NicCore clusters' collective kernel: driven from outside, by the harness running the
#: kernel's C++ (sim/harness/coll.cpp; a SoC cluster's nodes have no collective kernel).
COLLECTIVE = "sim"

#: The NicCore clusters' route kernel (the router's build option ``route_fn``): the DPI-C
#: shell ``route_dpi`` (ROUTE_DPI_SV), so every simulated packet is routed by the kernel's C++.
ROUTE_FN = "sim"
ROUTE_DPI_SV = HARNESS_DIR / "route_dpi.sv"
#: The shell's port list, generated from ``kernels.ROUTE_PORTS`` (:func:`route_dpi_sources`).
ROUTE_DPI_PORTS_SVH = BUILD_ROOT / "verilog" / "route_dpi" / "route_dpi_ports.svh"


def route_dpi_sources() -> list[Path]:
    """The route kernel's DPI-C shell and its port list, written from the spec when it
    differs (a ``.svh`` among a model's sources is an include, not a compiled file)."""
    text = cgen.route_ports_svh()
    if not ROUTE_DPI_PORTS_SVH.exists() or ROUTE_DPI_PORTS_SVH.read_text() != text:
        ROUTE_DPI_PORTS_SVH.parent.mkdir(parents=True, exist_ok=True)
        tmp = ROUTE_DPI_PORTS_SVH.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(ROUTE_DPI_PORTS_SVH)
    return [ROUTE_DPI_SV, ROUTE_DPI_PORTS_SVH]

#: Width of the NicCore cluster's host bus in bytes (the SoC cluster's Bar0Window is 32-bit):
#: the harness applies a 64-bit store as one beat (harness.h ``SIM_BUS_BYTES``).
SIM_BUS_BYTES = 8


def _soc_verilog(topo: Topology, mtu: int, n_ctx: int, phy_delay: int, quiet: bool):
    """The SoC cluster's Verilog sources (top first), NicCore CSR map, top name, node build."""
    from .cluster import soc_cluster_verilog
    from .socbuild import build_node

    node = build_node(n_links=topo.link_ports, n_ctx=n_ctx, mtu=mtu, table_nodes=table_nodes_of(topo),
                      quiet=quiet)
    name = "cluster_soc"
    out = BUILD_ROOT / "verilog" / f"sim-{topo_tag(topo, True)}-m{mtu}-c{n_ctx}-d{phy_delay}"
    v = out / f"{name}.v"

    def generate() -> None:
        _log(f"generating the SoC cluster's top for {topo}", quiet)
        soc_cluster_verilog(topo, node, out, name, n_ctx=n_ctx, mtu=mtu, phy_delay=phy_delay)

    generate_unless_current(out, gateware_key(topo, mtu, n_ctx, phy_delay, node.dir.as_posix()), [v], generate)
    return [v, *node.sources], node.nic_csr_json, name, node


def _verilog(topo: Topology, mtu: int, n_ctx: int, phy_delay: int, quiet: bool) -> tuple[Path, Path, str]:
    """The cluster's Verilog and CSR map (regenerated only when the gateware changed)."""
    from .cluster import cluster_verilog

    name = "cluster_sim"
    out = BUILD_ROOT / "verilog" / f"sim-{topo_tag(topo)}-m{mtu}-c{n_ctx}-d{phy_delay}"
    v, csr = out / f"{name}.v", out / f"{name}.csr.json"

    def generate() -> None:
        _log(f"generating Verilog for {topo} (MTU {mtu}, {n_ctx} contexts)", quiet)
        t0 = time.time()
        cluster_verilog(topo, out, name=name, n_ctx=n_ctx, mtu=mtu, phy_delay=phy_delay,
                        bus_width=8 * SIM_BUS_BYTES, collective=COLLECTIVE, route_fn=ROUTE_FN)
        _log(f"Verilog written in {time.time() - t0:.1f} s: {v} ({v.stat().st_size >> 10} KiB)", quiet)

    generate_unless_current(out, gateware_key(topo, mtu, n_ctx, phy_delay), [v, csr], generate)
    return v, csr, name


def _node_verilog(n_links: int, table_nodes: int, mtu: int, n_ctx: int, quiet: bool) -> tuple[Path, Path, str]:
    """One split-cluster node's Verilog and CSR map (:class:`paranic.sim.cluster.NicNode`),
    shared by every topology with as many link ports and routing-table entries."""
    from .cluster import node_verilog

    name = "pn_node"
    out = BUILD_ROOT / "verilog" / f"sim-node-l{n_links}-t{table_nodes}-m{mtu}-c{n_ctx}"
    v, csr = out / f"{name}.v", out / f"{name}.csr.json"

    def generate() -> None:
        _log(f"generating a split node's Verilog ({n_links} link ports, MTU {mtu}, {n_ctx} contexts)", quiet)
        node_verilog(n_links, out, name=name, n_ctx=n_ctx, mtu=mtu, table_nodes=table_nodes,
                     bus_width=8 * SIM_BUS_BYTES, collective=COLLECTIVE, route_fn=ROUTE_FN)

    generate_unless_current(out, gateware_key("node", n_links, table_nodes, mtu, n_ctx, SIM_BUS_BYTES), [v, csr],
                            generate)
    return v, csr, name


def _run_logged(cmd: Sequence[str], cwd: Path, log: Path, quiet: bool, progress=None,
                env: dict | None = None) -> None:
    """Run ``cmd``, output to ``log``; ``progress(line)`` may print a status line."""
    with open(log, "a") as lf:
        lf.write("$ " + " ".join(cmd) + "\n")
        lf.flush()
        p = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
        assert p.stdout is not None
        for line in p.stdout:
            lf.write(line)
            if progress:
                progress(line)
        rc = p.wait()
    if rc:
        tail = log.read_text().splitlines()[-30:]
        raise RuntimeError(f"{cmd[0]} failed (exit {rc}); see {log}:\n" + "\n".join(tail))


def _build_model(v: Path, top: str, obj: Path, vhash: str, jobs: int, quiet: bool,
                 extra_sources: Sequence[Path] = (), prefix: str = MODEL) -> None:
    stamp = obj / ".stamp"
    if stamp.exists() and stamp.read_text() == vhash and (obj / f"{prefix}__ALL.a").exists() \
            and (obj / "libverilated.a").exists():
        return
    if obj.exists():
        shutil.rmtree(obj)
    obj.mkdir(parents=True)
    setup_verilator_env()
    log = obj.parent / "build.log"
    t0 = time.time()
    _log(f"verilating {v.name} -> {obj} (log: {log})", quiet)
    srcs = [str(p) for p in extra_sources if p.suffix != ".svh"]
    incs = [f"-I{d}" for d in sorted({p.parent for p in extra_sources if p.suffix == ".svh"})]
    _run_logged(["verilator", "--cc", str(v), *srcs, *incs, "--top-module", top, "--prefix", prefix,
                 "--Mdir", str(obj), *VERILATOR_FLAGS], obj, log, quiet)
    cpps = sorted(p.name for p in obj.glob(f"{prefix}*.cpp"))
    _log(f"verilated in {time.time() - t0:.0f} s: {len(cpps)} C++ files; compiling with -j{jobs} "
         "(this takes minutes)", quiet)
    done = [0]
    n_total = len(cpps) + 4  # + the verilated runtime

    def progress(line: str) -> None:
        m = re.search(r"-c (?:\S*/)?([\w.]+\.cpp)", line)
        if m:
            done[0] += 1
            _log(f"[{done[0]}/~{n_total}] {m.group(1)} ({time.time() - t0:.0f} s)", quiet)

    _run_logged(["make", "-C", str(obj), "-f", f"{prefix}.mk", f"-j{jobs}", *MODEL_MAKE_VARS,
                 f"{prefix}__ALL.a", "libverilated.a"], obj, log, quiet, progress)
    stamp.write_text(vhash)
    _log(f"model built in {time.time() - t0:.0f} s", quiet)


def model_hash(v: Path, csr: Path, *extra: Path) -> str:
    """Key of a Verilated model: the Verilog, the CSR map, the flags, the Verilator."""
    return source_key(v.read_bytes(), csr.read_bytes(), *[p.read_bytes() for p in extra], " ".join(VERILATOR_FLAGS),
                " ".join(MODEL_MAKE_VARS), str(verilator_root()))[:12]


def _c_ident(s: str) -> str:
    return re.sub(r"\W", "_", s)


def default_dna(index: int) -> int:
    """The DNA of SoC node index ``index`` when ``--dna`` does not set one:
    ``paranic.spec.sim.sim_dna`` (the NicCore cluster's per-node device id)."""
    from paranic.spec import sim as S

    return S.sim_dna(index)


def _soc_glue(node, nodes: int) -> list[str]:
    """cluster_gen.h's lines of a SoC cluster: firmware mode, the ROM plusarg and its
    default image, the nodes' default DNAs."""
    from .socbuild import ROM_PLUSARG

    H = ["/* SoC cluster: the firmware brings the nodes up (paranic.hw.socnode) */",
         "#define SIM_SOC 1", f'#define SIM_ROM_PLUSARG "{ROM_PLUSARG}"',
         f'#define SIM_ROM_DEFAULT "{node.rom_placeholder}"', f"#define SIM_ROM_WORDS {node.rom_bytes // 4}",
         "/* default DNA of each node index (paranic.sim.build.default_dna) */",
         "static const uint64_t SIM_DNA_DEFAULT[SIM_NODES] = {"
         + ", ".join(f"0x{default_dna(i):016x}ull" for i in range(nodes)) + "};"]
    return H + [""]


#: The host-side ports of a node, as harness.h's NodePorts field and the Verilog port name.
_NODE_FIELDS = [("bus_adr", "bus_adr"), ("bus_dat_w", "bus_dat_w"), ("bus_dat_r", "bus_dat_r"),
                ("bus_sel", "bus_sel"), ("bus_cyc", "bus_cyc"), ("bus_stb", "bus_stb"),
                ("bus_we", "bus_we"), ("bus_ack", "bus_ack"),
                ("rd_valid", "dma_rd_source_valid"), ("rd_ready", "dma_rd_source_ready"),
                ("rd_we", "dma_rd_source_payload_we"), ("rd_adr", "dma_rd_source_payload_adr"),
                ("rd_len", "dma_rd_source_payload_len"),
                ("c_valid", "dma_rd_sink_valid"), ("c_ready", "dma_rd_sink_ready"),
                ("c_first", "dma_rd_sink_first"), ("c_last", "dma_rd_sink_last"),
                ("c_dat", "dma_rd_sink_payload_dat"), ("c_len", "dma_rd_sink_payload_len"),
                ("c_end", "dma_rd_sink_payload_end"), ("c_err", "dma_rd_sink_payload_err"),
                ("c_adr", "dma_rd_sink_payload_adr"),
                ("w_valid", "dma_wr_source_valid"), ("w_ready", "dma_wr_source_ready"),
                ("w_first", "dma_wr_source_first"), ("w_last", "dma_wr_source_last"),
                ("w_we", "dma_wr_source_payload_we"), ("w_adr", "dma_wr_source_payload_adr"),
                ("w_len", "dma_wr_source_payload_len"), ("w_dat", "dma_wr_source_payload_dat")]
#: The collective kernel's streams (NicCore clusters; harness.h ``CollPorts``): per stream
#: valid, ready, data; then the kernel's node and radix_log2 inputs.
_COLL_FIELDS = [(f"k.{s}_{sig}", f"coll_{s}_{port}") for s, _d, _doc in K.COLL_STREAMS
                for sig, port in (("valid", "valid"), ("ready", "ready"), ("data", "payload_data"))] + \
               [("k.node", "coll_node"), ("k.radix_log2", "coll_radix_log2"), ("k.rst", "coll_rst")]


def gen_glue(topo: Topology, csr_json: Path, mtu: int, n_ctx: int, out: Path, node=None,
             phy_delay: int = DEFAULT_PHY_DELAY, split: bool = False) -> list[Path]:
    """The per-build C++ glue: ``pn_csr.h`` (the build's CSR map, the same generator as
    the driver's), ``cluster_gen.h`` (cluster constants and routing tables) and
    ``cluster_gen.cpp`` (binding each node's ports of the Verilated model). ``node``: the
    SoC node build of a SoC cluster (adds its identity ports and firmware-mode facts)."""
    regs = json.loads(Path(csr_json).read_text())
    table_nodes = 1 << regs["router_route_adr"]["size"]
    out.mkdir(parents=True, exist_ok=True)
    H: list[str] = ["/* GENERATED by paranic.sim.build.gen_glue: do not edit. */",
                    "#pragma once", "#include <cstdint>", "",
                    f"#define SIM_NODES {topo.nodes}", f"#define SIM_TOPO_X {topo.x}",
                    f"#define SIM_TOPO_Y {topo.y}", f'#define SIM_TOPO "{topo}"',
                    f"#define SIM_N_CTX {n_ctx}", f"#define SIM_MTU {mtu}",
                    f"#define SIM_TABLE_NODES {table_nodes}",
                    "/* host bus width in bytes: 8, a 64-bit store is one beat; 4 (SoC node's BAR0 window) */",
                    f"#define SIM_BUS_BYTES {4 if node is not None else SIM_BUS_BYTES}",
                    f"#define SIM_PHY_DELAY {phy_delay}  /* cycles per cable (NicCluster(phy_delay=)) */", ""]
    H += ["/* routing tables: SIM_ROUTES[node][dst] = port (paranic.spec.topo) */",
          "static const uint8_t SIM_ROUTES[SIM_NODES][SIM_TABLE_NODES] = {"]
    for n in range(topo.nodes):
        H.append("\t{" + ", ".join(str(int(p)) for p in topo.table(n, table_nodes)) + "},")
    H += ["};", ""]
    cables = topo.cables()
    H += ["/* cables (paranic.spec.topo.Topology.cables()): node, port, far node, far port */",
          f"#define SIM_CABLES {len(cables)}",
          "static const uint8_t SIM_CABLE_ENDS[SIM_CABLES][4] = {"]
    H += ["\t{" + ", ".join(str(int(x)) for x in c) + "}," for c in cables]
    H += ["};", ""]
    if node is not None:
        H += _soc_glue(node, topo.nodes)
    H += ["/* 1: each node's collective kernel is the harness's (coll.cpp) */",
          f"#define SIM_COLL {0 if node is not None else 1}", ""]
    H += ["struct NodePorts;", "class " + MODEL + ";",
          f"void sim_bind_ports({MODEL} *m, NodePorts *p);",
          "/* each cable's cut (1 bit) and bit-error threshold (32 bits) inputs */",
          f"void sim_bind_cables({MODEL} *m, uint8_t **cut, uint32_t **ber);", ""]
    csr_h = out / "pn_csr.h"
    hdr = out / "cluster_gen.h"
    if split:
        return _split_glue(topo, phy_delay, regs, H, out)
    C = ["/* GENERATED by paranic.sim.build.gen_glue: do not edit. */",
         f'#include "{MODEL}.h"', '#include "harness.h"', "",
         f"void sim_bind_ports({MODEL} *m, NodePorts *p)", "{"]
    fields = list(_NODE_FIELDS)
    if node is not None:
        fields += [("dna", "dna"), ("cfg_node", "cfg_node")]
    else:
        fields += _COLL_FIELDS
    for n in range(topo.nodes):
        for f, port in fields:
            C.append(f"\tp[{n}].{f} = &m->n{n}_{port};")
    C += ["}", "", f"void sim_bind_cables({MODEL} *m, uint8_t **cut, uint32_t **ber)", "{"]
    for k in range(len(cables)):
        C += [f"\tcut[{k}] = &m->cable{k}_cut;", f"\tber[{k}] = &m->cable{k}_ber;"]
    C += ["}", ""]
    src = out / "cluster_gen.cpp"
    for path, text in ((csr_h, cgen.csr_header(regs)), (hdr, "\n".join(H) + "\n"),
                       (src, "\n".join(C) + "\n")):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return [hdr, src, csr_h]


#: Verilated model class of one node of a split cluster (:class:`paranic.sim.cluster.NicNode`).
NODE_MODEL = "Vnode"

#: The split cluster's model (the harness's ``Vcluster``): N node models and the cables'
#: delay queues between them. Filled in by :func:`_split_glue`.
_SPLIT_H = r"""/* GENERATED by paranic.sim.build: do not edit. */
/* A split cluster (docs/simulator.md, "Split build"): one Verilated model per node
 * (NicNode: a NicCore and the heads of its outgoing cables, every node the same model
 * class), presented to the harness as the one-model cluster's Vcluster. Per link
 * direction a queue of SIM_PHY_DELAY words carries what the near node's cable head
 * drove to the far node's receiver; a cut cable delivers nothing at its exit. */
#pragma once
#include <cstdint>
#include <verilated.h>
#include "Vnode.h"
#include "cluster_gen.h"

#define SIM_SPLIT 1
#define SIM_LINKS @LINKS@
#define SIM_PHY_DELAY @DELAY@

struct SimLine {
	uint64_t data;
	uint8_t valid, ctrl;
};

/* One link direction: the near node's cable head and the far node's receiver. */
struct SimLinkPorts {
	CData *tx_valid, *tx_ctrl, *cut, *seed_load, *active, *rx_valid, *rx_ctrl;
	QData *tx_data, *seed_value, *rx_data;
	IData *ber, *errors;
	int cable;
	uint64_t seed;
};

class Vcluster {
public:
	explicit Vcluster(VerilatedContext *ctx);
	~Vcluster();
	/* sys_clk 0: drive every node's cable inputs for this cycle, evaluate; sys_clk 1:
	 * the rising edge of every node, then the words its cable heads drive go into the
	 * queues. */
	void eval();
	void final();
	CData sys_clk = 0, sys_rst = 0, links_busy = 0;
	IData ber_threshold = 0, errors_injected = 0;
	CData cable_cut[SIM_CABLES] = {};
	IData cable_ber[SIM_CABLES] = {};
	Vnode *node[SIM_NODES];

	/* Lock-step windows (docs/simulator.md, "Windows"): node n's half cycles on their own,
	 * edge e being the cycle's rising-edge count (edges() at the window's start plus the
	 * cycles run in it). node_fall drives n's receivers from the queues and evaluates
	 * the falling edge; node_rise evaluates the rising edge, puts n's cable heads' words
	 * into the queues and returns whether any of n's links is active. A window of at most
	 * SIM_PHY_DELAY cycles reads only words written before it and writes only slots no
	 * node reads in it, so the nodes of a window may run in any order or side by side. */
	void node_fall(int n, uint64_t e);
	uint8_t node_rise(int n, uint64_t e);
	uint64_t edges() const { return edge_count; }
	/* Every word every cable head drove, in every cycle, folded per link direction
	 * (the exactness tests compare runs by it: docs/simulator.md, "Windows"). */
	uint64_t fingerprint() const;
	void advance(uint64_t cycles);   /* after a window: the edges the nodes ran */

private:
	void eval_nodes();
	void drive_in(const SimLinkPorts &L, uint64_t e);
	SimLinkPorts lk[SIM_LINKS];
	int in_of[SIM_NODES][4], out_of[SIM_NODES][4];   /* link directions into / out of a node (-1: none) */
	/* 2 * SIM_PHY_DELAY slots: the word written at rising edge e goes into slot
	 * e % (2 * SIM_PHY_DELAY) and is read at the falling edge of edge e + SIM_PHY_DELAY;
	 * within a window the slots written and the slots still to be read are disjoint. */
	/* Each link direction's slots and fingerprint on cache lines of their own: in a window
	 * the near node's thread writes them every cycle. */
	struct alignas(64) Queue {
		SimLine w[2 * SIM_PHY_DELAY];
		uint64_t hash;
	};
	Queue q[SIM_LINKS] = {};
	uint64_t edge_count = 0;   /* rising edges so far */
	static uint64_t fold(uint64_t h, const SimLine &w)
	{
		return (h ^ w.data ^ ((uint64_t)w.valid << 61) ^ ((uint64_t)w.ctrl << 62)) * 0x100000001b3ull + 1;
	}
};
"""

_SPLIT_CPP = r"""/* GENERATED by paranic.sim.build: do not edit. */
#include "Vcluster.h"
#include "evalpool.h"
#include "harness.h"

/* Per link direction (paranic.spec.topo.Topology.links()): near node, its port (0-based),
 * far node, its port, the cable, the generator state of its seed (paranic.sim.cable.seed_state). */
static const struct { int n, pn, m, pm, cable; uint64_t seed; } LINKS[SIM_LINKS] = {
@LINKTAB@
};
static const uint64_t NODE_DNA[SIM_NODES] = {@DNA@};

#define LINK_PORTS(v, p, f) \
	((p) == 0 ? &(v)->l0_##f : (p) == 1 ? &(v)->l1_##f : (p) == 2 ? &(v)->l2_##f : &(v)->l3_##f)

Vcluster::Vcluster(VerilatedContext *ctx)
{
	for (int n = 0; n < SIM_NODES; n++) {
		node[n] = new Vnode{ctx, ("node" + std::to_string(n)).c_str()};
		node[n]->dna = NODE_DNA[n];
	}
	for (int k = 0; k < SIM_LINKS; k++) {
		Vnode *a = node[LINKS[k].n], *b = node[LINKS[k].m];
		int p = LINKS[k].pn, r = LINKS[k].pm;
		SimLinkPorts &L = lk[k];
@PTRS@
		L.cable = LINKS[k].cable;
		L.seed = LINKS[k].seed;
	}
	for (int n = 0; n < SIM_NODES; n++)
		for (int i = 0; i < 4; i++)
			in_of[n][i] = out_of[n][i] = -1;
	for (int k = 0; k < SIM_LINKS; k++) {
		int *o = out_of[LINKS[k].n], *r = in_of[LINKS[k].m];
		while (*o >= 0)
			o++;
		*o = k;
		while (*r >= 0)
			r++;
		*r = k;
	}
}

Vcluster::~Vcluster()
{
	for (Vnode *v : node)
		delete v;
}

void Vcluster::final()
{
	for (Vnode *v : node)
		v->final();
}

/* Every node's model, on the worker threads when there are some: the nodes share nothing
 * but the queues above, which only this thread touches between evaluations. */
static void eval_node(void *arg, int n)
{
	static_cast<Vcluster *>(arg)->node[n]->eval();
}

void Vcluster::eval_nodes()
{
	if (sim_eval_pool)
		sim_eval_pool->run(SIM_NODES, eval_node, this);
	else
		for (Vnode *v : node)
			v->eval();
}

#define QSLOTS (2 * SIM_PHY_DELAY)

/* A link direction's receiver (far node) and cable head inputs (near node) at the falling
 * edge of rising edge e: the word that entered SIM_PHY_DELAY edges earlier. */
void Vcluster::drive_in(const SimLinkPorts &L, uint64_t e)
{
	const SimLine &w = q[&L - lk].w[(e + SIM_PHY_DELAY) % QSLOTS];
	uint8_t cut = cable_cut[L.cable];
	*L.rx_valid = w.valid & !cut;
	*L.rx_data = w.data;
	*L.rx_ctrl = w.ctrl;
	*L.cut = cut;
	uint32_t b = cable_ber[L.cable];
	*L.ber = b > ber_threshold ? b : ber_threshold;
	*L.seed_load = sys_rst;
	*L.seed_value = L.seed;
}

void Vcluster::eval()
{
	uint64_t e = edge_count;
	if (!sys_clk) {
		for (SimLinkPorts &L : lk)
			drive_in(L, e);
		for (Vnode *v : node) {
			v->sys_rst = sys_rst;
			v->sys_clk = 0;
		}
		eval_nodes();
		return;
	}
	for (Vnode *v : node)
		v->sys_clk = 1;
	eval_nodes();
	uint8_t busy = 0;
	uint32_t errs = 0;
	for (SimLinkPorts &L : lk) {
		Queue &Q = q[&L - lk];
		SimLine &w = Q.w[e % QSLOTS];
		w = SimLine{*L.tx_data, *L.tx_valid, *L.tx_ctrl};
		Q.hash = fold(Q.hash, w);
		busy |= *L.active;
		errs += *L.errors;
	}
	links_busy = busy;
	errors_injected = errs;
	edge_count++;
}

/* Node n's inputs: its receivers (links into it) and its cable heads' cut, ber and seed
 * (links out of it), as eval() drives them. */
void Vcluster::node_fall(int n, uint64_t e)
{
	for (int i = 0; i < 4; i++) {
		if (in_of[n][i] >= 0) {
			const SimLinkPorts &L = lk[in_of[n][i]];
			const SimLine &w = q[in_of[n][i]].w[(e + SIM_PHY_DELAY) % QSLOTS];
			uint8_t cut = cable_cut[L.cable];
			*L.rx_valid = w.valid & !cut;
			*L.rx_data = w.data;
			*L.rx_ctrl = w.ctrl;
		}
		if (out_of[n][i] >= 0) {
			const SimLinkPorts &L = lk[out_of[n][i]];
			*L.cut = cable_cut[L.cable];
			uint32_t b = cable_ber[L.cable];
			*L.ber = b > ber_threshold ? b : ber_threshold;
			*L.seed_load = sys_rst;
			*L.seed_value = L.seed;
		}
	}
	node[n]->sys_rst = sys_rst;
	node[n]->sys_clk = 0;
	node[n]->eval();
}

uint8_t Vcluster::node_rise(int n, uint64_t e)
{
	node[n]->sys_clk = 1;
	node[n]->eval();
	uint8_t busy = 0;
	for (int i = 0; i < 4 && out_of[n][i] >= 0; i++) {
		const SimLinkPorts &L = lk[out_of[n][i]];
		Queue &Q = q[out_of[n][i]];
		SimLine &w = Q.w[e % QSLOTS];
		w = SimLine{*L.tx_data, *L.tx_valid, *L.tx_ctrl};
		Q.hash = fold(Q.hash, w);
		busy |= *L.active;
	}
	return busy;
}

uint64_t Vcluster::fingerprint() const
{
	uint64_t h = 0;
	for (const Queue &Q : q)
		h = (h ^ Q.hash) * 0x100000001b3ull;
	return h;
}

void Vcluster::advance(uint64_t cycles)
{
	edge_count += cycles;
	uint32_t errs = 0;
	for (SimLinkPorts &L : lk)
		errs += *L.errors;
	errors_injected = errs;
}

void sim_bind_ports(Vcluster *m, NodePorts *p)
{
	for (int n = 0; n < SIM_NODES; n++) {
		Vnode *v = m->node[n];
@BIND@
		p[n].dna = nullptr;
		p[n].cfg_node = nullptr;
	}
}

void sim_bind_cables(Vcluster *m, uint8_t **cut, uint32_t **ber)
{
	for (int k = 0; k < SIM_CABLES; k++) {
		cut[k] = &m->cable_cut[k];
		ber[k] = &m->cable_ber[k];
	}
}
"""


def _split_glue(topo: Topology, delay: int, regs: dict, H: list[str], out: Path) -> list[Path]:
    """The split cluster's glue: cluster_gen.h (as the one-model cluster's), Vcluster.h
    (the facade), cluster_gen.cpp (its code and the port bindings), pn_csr.h."""
    from paranic.spec.sim import sim_dna
    from .cable import seed_state

    if topo.link_ports > 4:
        raise ValueError(f"{topo}: a split node has at most 4 link ports")
    cable_at = {}
    for c, (n, pn, m, pm) in enumerate(topo.cables()):
        cable_at[(n, pn)] = cable_at[(m, pm)] = c
    links = topo.links()
    # Seeds as NicCluster gives them: link direction k gets seed k + 1.
    tab = [f"\t{{{n}, {pn - 1}, {m}, {pm - 1}, {cable_at[(n, pn)]}, 0x{seed_state(k + 1):016x}ull}},"
           for k, (n, pn, m, pm) in enumerate(links)]
    ptrs = []
    for f in ("tx_valid", "tx_ctrl", "cut", "seed_load", "active", "tx_data", "seed_value", "ber", "errors"):
        ptrs.append(f"\t\tL.{f} = LINK_PORTS(a, p, {f});")
    for f in ("rx_valid", "rx_ctrl", "rx_data"):
        ptrs.append(f"\t\tL.{f} = LINK_PORTS(b, r, {f});")
    # Ports a node does not have (fewer than 4 links) must not be named: emit only those it has.
    lp = topo.link_ports
    macro = " : ".join(f"(p) == {i} ? &(v)->l{i}_##f" for i in range(lp - 1)) + \
        (" : " if lp > 1 else "") + f"&(v)->l{lp - 1}_##f"
    cpp = (_SPLIT_CPP.replace("@LINKTAB@", "\n".join(tab))
           .replace("@DNA@", ", ".join(f"0x{sim_dna(i):016x}ull" for i in range(topo.nodes)))
           .replace("@PTRS@", "\n".join(ptrs))
           .replace("@BIND@", "\n".join(f"\t\tp[n].{f} = &v->{port};" for f, port in _NODE_FIELDS + _COLL_FIELDS))
           .replace("((p) == 0 ? &(v)->l0_##f : (p) == 1 ? &(v)->l1_##f : (p) == 2 ? &(v)->l2_##f : &(v)->l3_##f)",
                    f"({macro})"))
    H = H + ["struct NodePorts;", "class Vcluster;", "void sim_bind_ports(Vcluster *m, NodePorts *p);",
             "void sim_bind_cables(Vcluster *m, uint8_t **cut, uint32_t **ber);", ""]
    facade = _SPLIT_H.replace("@LINKS@", str(len(links))).replace("@DELAY@", str(delay))
    files = {out / "cluster_gen.h": "\n".join(H) + "\n", out / "cluster_gen.cpp": cpp,
             out / "Vcluster.h": facade, out / "pn_csr.h": cgen.csr_header(regs)}
    for path, text in files.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    return [out / "cluster_gen.h", out / "cluster_gen.cpp", out / "pn_csr.h", out / "Vcluster.h"]


def _build_harness(bdir: Path, obj: Path, gen: list[Path], vhash: str, quiet: bool,
                   prefix: str = MODEL) -> Path:
    setup_verilator_env()
    vroot = Path(os.environ["VERILATOR_ROOT"])
    exe = bdir / "paranic-sim"
    srcs = sorted(HARNESS_DIR.glob("*.cpp"))
    deps = harness_sources() + gen
    key = source_key(vhash, " ".join(HARNESS_CXXFLAGS), " ".join(HARNESS_CFLAGS), " ".join(KERNEL_CXXFLAGS),
               " ".join(kernel_include_dirs()), *[p.read_bytes() for p in deps])[:20]
    stamp = bdir / ".harness"
    if exe.exists() and stamp.exists() and stamp.read_text() == key:
        return exe
    t0 = time.time()
    _log(f"compiling the harness ({', '.join(s.name for s in srcs + list(HARNESS_C_SOURCES))})", quiet)
    kinc = kernel_include_dirs() + ["-I", str(HLS_DIR / "collective"), "-I", str(HLS_DIR / "route")]
    inc = [f"-I{obj}", f"-I{vroot / 'include'}", f"-I{vroot / 'include' / 'vltstd'}",
           f"-I{gen[0].parent}", f"-I{HARNESS_DIR}"] + [f"-I{d}" for d in HARNESS_INCLUDES] + kinc
    objs = []
    hobj = bdir / "hobj"
    hobj.mkdir(exist_ok=True)
    log = bdir / "build.log"
    for s in srcs + [gen[1]]:
        o = hobj / (s.stem + ".o")
        _run_logged(["g++", *HARNESS_CXXFLAGS, *inc, "-c", str(s), "-o", str(o)], bdir, log, quiet)
        objs.append(str(o))
    for s in KERNEL_SOURCES:
        o = hobj / (s.stem + ".kernel.o")
        _run_logged(["g++", *KERNEL_CXXFLAGS, *kinc, "-c", str(s), "-o", str(o)], bdir, log, quiet)
        objs.append(str(o))
    for s in HARNESS_C_SOURCES:
        o = hobj / (s.stem + ".c.o")
        _run_logged(["gcc", *HARNESS_CFLAGS, *[f"-I{d}" for d in HARNESS_INCLUDES], "-c", str(s), "-o", str(o)],
                    bdir, log, quiet)
        objs.append(str(o))
    tmp = exe.with_suffix(".tmp")
    _run_logged(["g++", "-o", str(tmp), *objs, str(obj / f"{prefix}__ALL.a"),
                 str(obj / "libverilated.a"), "-lpthread", "-latomic"], bdir, log, quiet)
    tmp.replace(exe)
    stamp.write_text(key)
    _log(f"harness built in {time.time() - t0:.0f} s: {exe}", quiet)
    return exe


def _prune(simroot: Path, tag: str, keep: Path, quiet: bool, older_to_keep: int = 1) -> None:
    """Remove superseded builds of a topology (each is ~200 MB): all but the newest
    ``older_to_keep`` besides ``keep``."""
    others = [d for d in simroot.glob(f"cluster-{tag}-*") if d.is_dir() and d != keep]
    others.sort(key=lambda d: d.stat().st_mtime, reverse=True)
    for d in others[older_to_keep:]:
        _log(f"removing superseded build {d.name}", quiet)
        shutil.rmtree(d, ignore_errors=True)


#: Largest NicCore cluster built as one model by default; larger ones are split. Migen's
#: Verilog generation of one cluster grows faster than its node count (ring:2 5 s and
#: 0.2 GB, ring:8 91 s and 1.7 GB; torus:4x4 had not finished after 15 minutes and 13 GB),
#: while a split build generates one node, shared by every topology with as many link
#: ports: ring:8 needs no model of its own beside ring:4's split node, and runs twice as
#: fast per CPU second as its one model (docs/simulator.md, "Split build"). Four nodes and
#: fewer stay one model: the QEMU guest's device and the cocotb cluster use ring:4's.
ONE_MODEL_MAX_NODES = 4


def default_split(t: Topology, soc: bool = False) -> bool:
    """Whether :func:`build` splits ``t`` when not told: a NicCore cluster of more than
    :data:`ONE_MODEL_MAX_NODES` nodes (SoC clusters have no split build)."""
    return not soc and t.nodes > ONE_MODEL_MAX_NODES


def build(topo: str | Topology = "ring:4", mtu: int = P.DEFAULT_MTU, n_ctx: int = P.DEFAULT_CONTEXTS,
          phy_delay: int = DEFAULT_PHY_DELAY, jobs: int | None = None, quiet: bool = False,
          soc: bool = False, split: bool | None = None) -> Path:
    """Build (or reuse) the simulator of ``topo``; returns the ``paranic-sim`` binary.
    ``soc``: a cluster of whole SoCs booting firmware (:class:`paranic.sim.cluster.SocCluster`)
    instead of NicCores the harness configures. ``split``: one Verilated model per node
    (:class:`paranic.sim.cluster.NicNode`; docs/simulator.md, "Split build"); ``None``
    (default): split above :data:`ONE_MODEL_MAX_NODES` nodes, except SoC clusters. Both
    builds take the same cycles.

    Progress goes to stderr (``quiet`` silences it). ``jobs``: parallel compiler jobs
    for the model (default ``$PARANIC_SIM_JOBS``, else one per CPU: builds run while
    nothing else does, in make test and make demo alike).
    Concurrent calls for the same topology wait for each other (a lock file).
    """
    t = topo if isinstance(topo, Topology) else Topology.parse(topo)
    if t.nodes > 16 or (t.is_torus and (t.x > 4 or t.y > 4)):
        raise ValueError(f"{t}: the simulator supports rings up to 16 nodes and tori up to 4x4")
    jobs = jobs or int(os.environ.get("PARANIC_SIM_JOBS", "0")) or os.cpu_count() or 1
    if split is None:
        split = default_split(t, soc)
    if split and soc:
        raise ValueError("a SoC cluster has no split build")
    tag = ("split-" if split else "") + topo_tag(t, soc)
    _TAG.value = tag
    simroot = BUILD_ROOT / "sim"
    simroot.mkdir(parents=True, exist_ok=True)
    lock = open(simroot / f"cluster-{tag}.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        node, extra = None, []
        if split:
            return _build_split(t, tag, simroot, mtu, n_ctx, phy_delay, jobs, quiet)
        if soc:
            srcs, csr, top, node = _soc_verilog(t, mtu, n_ctx, phy_delay, quiet)
            v, extra = srcs[0], srcs[1:]
        else:
            v, csr, top, extra = _nic_cluster_sources(t, mtu, n_ctx, phy_delay, quiet)
        vhash = model_hash(v, csr, *extra)
        bdir = simroot / f"cluster-{tag}-{vhash}"
        bdir.mkdir(exist_ok=True)
        obj = bdir / "obj"
        _build_model(v, top, obj, vhash, jobs, quiet, extra)
        gen = gen_glue(t, csr, mtu, n_ctx, bdir / "gen", node, phy_delay=phy_delay)
        shutil.copyfile(csr, bdir / "csr.json")
        exe = _build_harness(bdir, obj, gen, vhash, quiet)
        (bdir / "info.json").write_text(json.dumps(
            {"topo": str(t), "nodes": t.nodes, "mtu": mtu, "n_ctx": n_ctx, "phy_delay": phy_delay,
             "verilog": str(v), "binary": str(exe), "soc": soc,
             "socnode": str(node.dir) if node else None}, indent=1))
        _prune(simroot, tag, bdir, quiet)
        return exe
    finally:
        lock.close()


def _nic_cluster_sources(t: Topology, mtu: int, n_ctx: int, phy_delay: int,
                         quiet: bool) -> tuple[Path, Path, str, list[Path]]:
    """A NicCore cluster's Verilog, CSR map, top and the other sources of its model (the
    route kernel's DPI-C shell)."""
    v, csr, top = _verilog(t, mtu, n_ctx, phy_delay, quiet)
    return v, csr, top, route_dpi_sources()


def cluster_build_dir(topo: str | Topology = "ring:4", mtu: int = P.DEFAULT_MTU,
                      n_ctx: int = P.DEFAULT_CONTEXTS, phy_delay: int = DEFAULT_PHY_DELAY) -> Path:
    """The folder :func:`build` uses for a NicCore cluster (one model, no SoC), whether or
    not it is built yet (the Verilog step runs, or is found cached)."""
    t = Topology.parse(topo) if isinstance(topo, str) else topo
    v, csr, _top, extra = _nic_cluster_sources(t, mtu, n_ctx, phy_delay, True)
    return BUILD_ROOT / "sim" / f"cluster-{topo_tag(t)}-{model_hash(v, csr, *extra)}"


def _build_split(t: Topology, tag: str, simroot: Path, mtu: int, n_ctx: int, phy_delay: int, jobs: int,
                 quiet: bool) -> Path:
    """build(split=True): the node model (shared by topologies with the same node), the
    topology's glue and harness."""
    v, csr, top = _node_verilog(t.link_ports, table_nodes_of(t), mtu, n_ctx, quiet)
    dpi = route_dpi_sources()
    vhash = model_hash(v, csr, *dpi)
    obj = simroot / f"node-{vhash}" / "obj"
    obj.parent.mkdir(exist_ok=True)
    with open(simroot / f"node-{vhash}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _build_model(v, top, obj, vhash, jobs, quiet, dpi, prefix=NODE_MODEL)
    bdir = simroot / f"cluster-{tag}-d{phy_delay}-{vhash}"
    bdir.mkdir(exist_ok=True)
    gen = gen_glue(t, csr, mtu, n_ctx, bdir / "gen", phy_delay=phy_delay, split=True)
    shutil.copyfile(csr, bdir / "csr.json")
    exe = _build_harness(bdir, obj, gen, vhash, quiet, prefix=NODE_MODEL)
    (bdir / "info.json").write_text(json.dumps(
        {"topo": str(t), "nodes": t.nodes, "mtu": mtu, "n_ctx": n_ctx, "phy_delay": phy_delay,
         "verilog": str(v), "binary": str(exe), "soc": False, "split": True, "socnode": None}, indent=1))
    _prune(simroot, tag, bdir, quiet)
    return exe
