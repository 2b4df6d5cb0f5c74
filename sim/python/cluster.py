"""A simulated ParaNIC cluster: N NicCores cabled as a ring or torus through simulated cables.

Each node's host side (Wishbone slave, two DMA master ports, MSI lines) becomes a
set of top-level ports named ``n<i>_<name>``, so one Verilog model serves a cocotb
bench with one Python host model per node and the C++ cluster harness.
"""

from __future__ import annotations

from pathlib import Path

from migen import Signal
from litex.gen import LiteXModule

from paranic.hw.standalone import NicCoreStandalone, write_csr_json
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

    def wishbone_slave(self, bus, name: str) -> None:
        for s in ("adr", "dat_w", "sel", "cyc", "stb", "we"):
            self.inp(getattr(bus, s), f"{name}_{s}")
        for s in ("dat_r", "ack"):
            self.out(getattr(bus, s), f"{name}_{s}")


class NicCluster(LiteXModule):
    """``topo.nodes`` NicCores; ``phy_delay`` cycles per cable; ``ber`` the initial bit-error
    rate (also settable at run time through the ``ber_threshold`` port)."""

    def __init__(self, topo: Topology, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 phy_delay: int = 8, ber: float = 0.0, table_nodes: int | None = None,
                 **nic_kwargs) -> None:
        self.topo = topo
        ports = _Ports()
        table_nodes = table_nodes or max(16, 1 << (topo.nodes - 1).bit_length())
        self.nodes: list[NicCoreStandalone] = []
        for i in range(topo.nodes):
            node = NicCoreStandalone(n_links=topo.link_ports, n_ctx=n_ctx, mtu=mtu,
                                     table_nodes=table_nodes, **nic_kwargs)
            setattr(self, f"node{i}", node)
            self.nodes.append(node)
            p = f"n{i}_"
            ports.wishbone_slave(node.bus, p + "bus")
            ports.endpoint(node.nic.dma_rd.source, p + "dma_rd_source", master=True)
            ports.endpoint(node.nic.dma_rd.sink, p + "dma_rd_sink", master=False)
            ports.endpoint(node.nic.dma_wr.source, p + "dma_wr_source", master=True)
            ports.endpoint(node.nic.dma_wr.sink, p + "dma_wr_sink", master=False)
            ports.out(node.nic.irq, p + "irq")
            # Identity: a per-node device id, no configured node id (the harness writes ids).
            self.comb += [node.nic.dna.eq(sim_dna(i)), node.nic.cfg_node.eq(0)]

        self.ber_threshold = Signal(32, name="ber_threshold", reset=ber_to_threshold(ber))
        ports.ios.append(self.ber_threshold)
        self.phys = []
        for k, (n, pn, m, pm) in enumerate(topo.links()):
            phy = SimPhy(delay=phy_delay, seed=k + 1)
            setattr(self, f"phy{k}", phy)
            self.phys.append(phy)
            tx, _ = self.nodes[n].nic.phys[pn - 1]
            _, rx = self.nodes[m].nic.phys[pm - 1]
            self.comb += [tx.connect(phy.sink), phy.source.connect(rx),
                          phy.ber_threshold.eq(self.ber_threshold)]
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


def cluster_verilog(topo: Topology, out_dir: Path, name: str | None = None, **kwargs):
    """Write the cluster's Verilog and its CSR map; return (verilog path, toplevel, csr json)."""
    from .hdl import write_verilog


    name = name or f"cluster_{str(topo).replace(':', '_')}"
    top = NicCluster(topo, **kwargs)
    v = write_verilog(top, top.ios, name, out_dir)
    csr_json = out_dir / f"{name}.csr.json"
    write_csr_json(top.nodes[0].csr_map(), csr_json)
    return v, name, csr_json
