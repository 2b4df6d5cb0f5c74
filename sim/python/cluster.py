"""A simulated ParaNIC cluster: N NicCores cabled as a ring or torus through simulated cables.

Each node's host side (Wishbone slave, two DMA master ports, MSI lines) becomes a
set of top-level ports named ``n<i>_<name>``, so one Verilog model serves a cocotb
bench with one Python host model per node and the C++ cluster harness.

:class:`NicCluster` builds its nodes as NicCores; :class:`SocCluster` instantiates a
whole SoC node module (:class:`paranic.hw.socnode.ParaNicSocNode`, built once by
:func:`paranic.sim.socbuild.build_node`) N times, with the same host-side ports (the
host's bus enters each SoC through its Bar0Window), the identity inputs ``n<i>_dna`` and
``n<i>_cfg_node``, and the same cables (the cable loop is NicCluster's).
"""

from __future__ import annotations

from functools import reduce
from operator import or_
from pathlib import Path

from types import SimpleNamespace

from migen import ClockSignal, Instance, Mux, ResetSignal, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.hw.collective import CollectiveExternal
from paranic.hw.phy import phy_layout
from paranic.hw.socnode import endpoint_signals

from paranic.hw.standalone import NicCoreStandalone, write_csr_json
from paranic.spec import kernels as K
from paranic.spec import protocol as P
from paranic.spec.sim import ber_to_threshold, sim_dna
from paranic.spec.topo import Topology

from .cable import SimPhy


class _Ports:
    """Top-level ports created with explicit names, plus the statements joining them."""

    def __init__(self) -> None:
        self.ios: list[Signal] = []
        self.comb: list = []

    def out(self, sig, name: str) -> Signal:
        top = Signal(len(sig), name=name)
        self.comb.append(top.eq(sig))
        self.ios.append(top)
        return top

    def inp(self, sig, name: str) -> Signal:
        top = Signal(len(sig), name=name, reset=getattr(sig, "reset", 0))
        self.comb.append(sig.eq(top))
        self.ios.append(top)
        return top

    def endpoint(self, ep, name: str, master: bool) -> None:
        """``master``: the NIC drives valid/payload (a request leaving the NIC)."""
        drive, take = (self.out, self.inp) if master else (self.inp, self.out)
        drive(ep.valid, f"{name}_valid")
        take(ep.ready, f"{name}_ready")
        drive(ep.first, f"{name}_first")
        drive(ep.last, f"{name}_last")
        for f in ep.payload.layout:
            fname = f[0]
            drive(getattr(ep, fname), f"{name}_payload_{fname}")

    def collective(self, nic, prefix: str) -> None:
        """The collective kernel's streams and inputs, when the NIC's core is driven from
        outside (``collective="sim"``): ``<prefix>coll_<stream>_*`` and
        ``<prefix>coll_node``/``coll_radix_log2``, for the harness that runs the kernel's C++."""
        core = nic.coll.core
        if not isinstance(core, CollectiveExternal):
            return
        for name, d, _doc in K.COLL_STREAMS:
            # The kernel's inputs are driven by the NIC (master), its outputs by the harness.
            self.endpoint(getattr(core, name), f"{prefix}coll_{name}", master=d == "i")
        self.out(core.node, f"{prefix}coll_node")
        self.out(core.radix_log2, f"{prefix}coll_radix_log2")
        self.out(core.rst, f"{prefix}coll_rst")

    def wishbone_slave(self, bus, name: str) -> None:
        for s in ("adr", "dat_w", "sel", "cyc", "stb", "we"):
            self.inp(getattr(bus, s), f"{name}_{s}")
        for s in ("dat_r", "ack"):
            self.out(getattr(bus, s), f"{name}_{s}")


class NicCluster(LiteXModule):
    """``topo.nodes`` NicCores; ``phy_delay`` cycles per cable; ``ber`` the initial bit-error
    rate (also settable at run time through the ``ber_threshold`` port).

    Per cable ``k`` (numbered as :meth:`Topology.cables`), the inputs ``cable<k>_cut``
    (1: both directions carry nothing) and ``cable<k>_ber`` (32-bit threshold, both
    directions). A cable's threshold is the larger of ``ber_threshold`` and its own, so
    ``ber_threshold`` alone still sets every cable (the harness drives it 0 and each
    cable's own).

    ``bus_width``: each node's Wishbone slave (``n<i>_bus_*``), 32 (the cocotb benches'
    host model) or 64 (the C++ harness: a 64-bit store is one beat,
    :class:`~paranic.hw.standalone.NicCoreStandalone`)."""

    def __init__(self, topo: Topology, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 phy_delay: int = 8, ber: float = 0.0, table_nodes: int | None = None,
                 bus_width: int = 32, **nic_kwargs) -> None:
        self.topo = topo
        self.bus_width = bus_width
        ports = _Ports()
        table_nodes = table_nodes or max(16, 1 << (topo.nodes - 1).bit_length())
        # The route kernels' topology after reset (NicCore ``dims``): this cluster's.
        nic_kwargs.setdefault("dims", (topo.x, topo.y))
        self.nodes: list = []
        for i in range(topo.nodes):
            node = self.add_node(i, ports, n_ctx=n_ctx, mtu=mtu, table_nodes=table_nodes, **nic_kwargs)
            setattr(self, f"node{i}", node)
            self.nodes.append(node)

        self.ber_threshold = Signal(32, name="ber_threshold", reset=ber_to_threshold(ber))
        ports.ios.append(self.ber_threshold)
        # Cables: a cut and a threshold each, for both of its directions.
        cable_at = {}
        self.cable_cut, self.cable_ber = [], []
        for c, (n, pn, m, pm) in enumerate(topo.cables()):
            cable_at[(n, pn)] = cable_at[(m, pm)] = c
            cut = Signal(name=f"cable{c}_cut")
            ber_c = Signal(32, name=f"cable{c}_ber")
            thr = Signal(32, name=f"cable{c}_threshold")
            self.comb += thr.eq(Mux(ber_c > self.ber_threshold, ber_c, self.ber_threshold))
            ports.ios += [cut, ber_c]
            self.cable_cut.append(cut)
            self.cable_ber.append((ber_c, thr))
        self.phys = []
        for k, (n, pn, m, pm) in enumerate(topo.links()):
            phy = SimPhy(delay=phy_delay, seed=k + 1)
            setattr(self, f"phy{k}", phy)
            self.phys.append(phy)
            tx, _ = self.nodes[n].nic.phys[pn - 1]
            _, rx = self.nodes[m].nic.phys[pm - 1]
            c = cable_at[(n, pn)]
            self.comb += [tx.connect(phy.sink), phy.source.connect(rx),
                          phy.ber_threshold.eq(self.cable_ber[c][1]),
                          phy.cut.eq(self.cable_cut[c])]
        # Link work on any cable (frames, replays, training: SimPhy.active): the harness
        # keeps the clock at full speed while it goes on (docs/simulator.md, "The clock").
        self.links_busy = Signal(name="links_busy")
        self.comb += self.links_busy.eq(reduce(or_, [p.active for p in self.phys], 0))
        ports.ios.append(self.links_busy)
        # Total bits flipped on all cables, for tests to see that errors were injected.
        self.errors_injected = Signal(32, name="errors_injected")
        self.comb += self.errors_injected.eq(sum(p.errors_injected for p in self.phys))
        ports.ios.append(self.errors_injected)
        # A free-running cycle counter (the harness's and the benches' time base).
        self.cycle = Signal(64, name="cycle")
        self.sync += self.cycle.eq(self.cycle + 1)
        ports.ios.append(self.cycle)

        self.comb += ports.comb
        self.ios = set(ports.ios)

    def add_node(self, i: int, ports: _Ports, *, n_ctx: int, mtu: int, table_nodes: int,
                 **nic_kwargs):
        """Node ``i`` and its host-side top-level ports ``n<i>_*``; returns an object whose
        ``nic.phys[p]`` is link port ``p``'s (tx, rx) ``phy_layout`` endpoint pair (what the
        cable loop wires). :class:`SocCluster` overrides it."""
        node = NicCoreStandalone(n_links=self.topo.link_ports, n_ctx=n_ctx, mtu=mtu,
                                 table_nodes=table_nodes, bus_width=self.bus_width, **nic_kwargs)
        p = f"n{i}_"
        ports.wishbone_slave(node.bus, p + "bus")
        ports.endpoint(node.nic.dma_rd.source, p + "dma_rd_source", master=True)
        ports.endpoint(node.nic.dma_rd.sink, p + "dma_rd_sink", master=False)
        ports.endpoint(node.nic.dma_wr.source, p + "dma_wr_source", master=True)
        ports.endpoint(node.nic.dma_wr.sink, p + "dma_wr_sink", master=False)
        ports.out(node.nic.irq, p + "irq")
        ports.collective(node.nic, p)
        # Identity: a per-node device id, no configured node id (the harness writes ids).
        self.comb += [node.nic.dna.eq(sim_dna(i)), node.nic.cfg_node.eq(0)]
        return node


class NicNode(LiteXModule):
    """One node of a split cluster (docs/simulator.md, "Split build"): a NicCore and the
    head of each of its outgoing cables, as one Verilog module that every node of the
    cluster instantiates (one Verilated model class, N instances).

    Host-side ports as :class:`NicCluster`'s ``n<i>_*`` without the prefix, plus ``dna``
    (the node's device id). Per link port ``p`` (0-based):

    * ``l<p>_tx_valid/data/ctrl`` (out): the word the cable carries in this cycle, after
      one register stage of a :class:`SimPhy` (its bit errors and its ``cut`` at the
      entry; ``l<p>_ber`` is its threshold, ``l<p>_seed_value``/``l<p>_seed_load`` its
      generator's seed); the harness holds the word ``phy_delay - 1`` cycles more and
      drops it at the exit while the cable is cut;
    * ``l<p>_rx_valid/data/ctrl`` (in): the word arriving from the far end;
    * ``l<p>_active`` (out): ``SimPhy.active``; ``l<p>_errors`` (out): bits it flipped.
    """

    def __init__(self, n_links: int, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 table_nodes: int = 16, **nic_kwargs) -> None:
        ports = _Ports()
        self.core = node = NicCoreStandalone(n_links=n_links, n_ctx=n_ctx, mtu=mtu,
                                             table_nodes=table_nodes, **nic_kwargs)
        ports.wishbone_slave(node.bus, "bus")
        ports.endpoint(node.nic.dma_rd.source, "dma_rd_source", master=True)
        ports.endpoint(node.nic.dma_rd.sink, "dma_rd_sink", master=False)
        ports.endpoint(node.nic.dma_wr.source, "dma_wr_source", master=True)
        ports.endpoint(node.nic.dma_wr.sink, "dma_wr_sink", master=False)
        ports.out(node.nic.irq, "irq")
        ports.collective(node.nic, "")
        ports.inp(node.nic.dna, "dna")
        self.comb += node.nic.cfg_node.eq(0)
        for p in range(n_links):
            tx, rx = node.nic.phys[p]
            phy = SimPhy(delay=1, runtime_seed=True)
            setattr(self, f"phy{p}", phy)
            self.comb += tx.connect(phy.sink)
            ports.out(phy.source.valid, f"l{p}_tx_valid")
            ports.out(phy.source.data, f"l{p}_tx_data")
            ports.out(phy.source.ctrl, f"l{p}_tx_ctrl")
            ports.inp(rx.valid, f"l{p}_rx_valid")
            ports.inp(rx.data, f"l{p}_rx_data")
            ports.inp(rx.ctrl, f"l{p}_rx_ctrl")
            ports.inp(phy.cut, f"l{p}_cut")
            ports.inp(phy.ber_threshold, f"l{p}_ber")
            ports.inp(phy.seed_value, f"l{p}_seed_value")
            ports.inp(phy.seed_load, f"l{p}_seed_load")
            ports.out(phy.active, f"l{p}_active")
            ports.out(phy.errors_injected, f"l{p}_errors")
        self.comb += ports.comb
        self.ios = set(ports.ios)

    def csr_map(self):
        return self.core.csr_map()


def node_verilog(n_links: int, out_dir: Path, name: str = "pn_node", **kwargs):
    """Write one split-cluster node's Verilog and its CSR map; return (verilog, toplevel, csr json)."""
    from .hdl import write_verilog

    top = NicNode(n_links, **kwargs)
    v = write_verilog(top, top.ios, name, out_dir)
    csr_json = out_dir / f"{name}.csr.json"
    write_csr_json(top.csr_map(), csr_json)
    return v, name, csr_json


class SocCluster(NicCluster):
    """``topo.nodes`` instances of the SoC node module of ``node`` (a
    :class:`~paranic.sim.socbuild.SocNodeBuild`), cabled as NicCluster cables its NicCores."""

    def __init__(self, topo: Topology, node, phy_delay: int = 8, ber: float = 0.0,
                 n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 table_nodes: int | None = None) -> None:
        if node.n_links != topo.link_ports:
            raise ValueError(f"{topo} needs {topo.link_ports} link ports per node, the SoC node "
                             f"has {node.n_links}")
        self.node_build = node
        super().__init__(topo, n_ctx=n_ctx, mtu=mtu, phy_delay=phy_delay, ber=ber,
                         table_nodes=table_nodes)

    def add_node(self, i: int, ports: _Ports, **_kwargs):
        from .socbuild import NODE_MODULE

        links = [(stream.Endpoint(phy_layout()), stream.Endpoint(phy_layout()))
                 for _ in range(self.node_build.n_links)]
        link_sigs = {f"link{p}_{d}_{suffix}": sig
                     for p, (tx, rx) in enumerate(links) for d, ep in (("tx", tx), ("rx", rx))
                     for suffix, sig, _ in endpoint_signals(ep)}
        conns: dict = {"i_sys_clk": ClockSignal(), "i_sys_rst": ResetSignal()}
        for name, width, direction in self.node_build.ports:
            if name in ("sys_clk", "sys_rst"):
                continue
            sig = link_sigs.get(name)
            if sig is None:          # a host-side or identity port: top level, n<i>_<name>
                sig = Signal(width, name=f"n{i}_{name}")
                ports.ios.append(sig)
            elif len(sig) != width:
                raise ValueError(f"SoC node port {name}: {width} bits, the cable's {len(sig)}")
            conns[f"{'i' if direction == 'in' else 'o'}_{name}"] = sig
        self.specials += Instance(NODE_MODULE, name=f"soc{i}", **conns)
        return SimpleNamespace(nic=SimpleNamespace(phys=links))


def cluster_verilog(topo: Topology, out_dir: Path, name: str | None = None, **kwargs):
    """Write the cluster's Verilog and its CSR map; return (verilog path, toplevel, csr json)."""
    from .hdl import write_verilog


    name = name or f"cluster_{str(topo).replace(':', '_')}"
    top = NicCluster(topo, **kwargs)
    v = write_verilog(top, top.ios, name, out_dir)
    csr_json = out_dir / f"{name}.csr.json"
    write_csr_json(top.nodes[0].csr_map(), csr_json)
    return v, name, csr_json


def cached_cluster_verilog(topo: Topology, out_dir: Path, name: str, **kwargs):
    """:func:`cluster_verilog`, generated again only when the gateware or the parameters
    changed (benches that run several cases on one cluster generate it once)."""
    from .hdl import gateware_key
    from .paths import build_lock, generate_unless_current

    v, csr = out_dir / f"{name}.v", out_dir / f"{name}.csr.json"
    key = gateware_key(topo, name, *sorted(kwargs.items()))
    with build_lock(f"verilog-{name}"):
        generate_unless_current(out_dir, key, [v, csr], lambda: cluster_verilog(topo, out_dir, name, **kwargs))
    return v, name, csr


def soc_cluster_verilog(topo: Topology, node, out_dir: Path, name: str, **kwargs):
    """The SoC cluster's top (instantiating ``node``'s module); returns (verilog path,
    toplevel, NicCore csr json, every Verilog source)."""
    from .hdl import write_verilog

    top = SocCluster(topo, node, **kwargs)
    v = write_verilog(top, top.ios, name, out_dir)
    return v, name, node.nic_csr_json, [v, *node.sources]
