"""cocotb bench of a one-hop DMA stream through two whole NicCores (the stream target).

Node 0 streams DMA messages to node 1 of a 2-node ring (``NicCluster``, MTU 1 KiB,
link layers, 8-cycle ``sim`` cables), each node driven by the Python host model
(``tests/model/pcie.py``, DMA read latency 63 cycles as in the cluster simulator).
The Verilog top (:class:`StreamTop`) adds free-running event counters ("probes") on
the stream endpoints along the path, so the bench sees where cycles go without
reading signals every cycle. ``tb_stream.py`` asserts that the stream runs at the
link's frame rate and that no stage in between waits (see its docstring).
"""

from __future__ import annotations

from pathlib import Path

from migen import Module, Signal

from paranic.spec import protocol as P
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.sim.cluster import NicCluster
from paranic.spec.link import CTL, CtlKind
from paranic.hw.standalone import write_csr_json
from paranic.spec.topo import Topology

HERE = Path(__file__).parent
TOPO = "ring:2"
MTU = P.DEFAULT_MTU
N_CTX = 4


def _xfer(ep):
    return ep.valid & ep.ready


def probes(cl: NicCluster) -> dict:
    """Events counted by :class:`StreamTop` (node 0 sends on its XP link to node 1's XM)."""
    s, r = cl.nodes[0].nic, cl.nodes[1].nic
    srt, rrt = s.router, r.router
    phy = s.links[0].phy_tx
    kind = phy.data[CTL["kind"].offset:CTL["kind"].offset + CTL["kind"].width]
    xp = int(P.Port.XP)
    return {
        # sender: DMA engine -> injection FIFO -> router -> link XP
        "tx_words": _xfer(s.host.dmatx.source),
        "inj_blocked": (srt.inject.packets != 0) & ~srt.fwd[0] & ~srt.busy[xp]
                       & (srt.slots[xp] < 2),
        "phy_data": phy.valid & ~phy.ctrl,
        "phy_sof": phy.valid & phy.ctrl & (kind == CtlKind.SOF),
        "phy_idle": phy.valid & phy.ctrl & (kind == CtlKind.STATUS),
        # receiver: link XM -> router -> ejection FIFO -> RX engine -> DMA writes
        "rx_words": _xfer(r.host.rx_sink),
        "rx_waiting": r.host.rx_sink.valid & ~r.host.rx_sink.ready,
        "wr_beats": _xfer(r.host.dma_wr.source),
    }


class StreamTop(Module):
    """A :class:`NicCluster` plus one 32-bit counter ``p_<name>`` per probe."""

    def __init__(self, topo: Topology, **kw) -> None:
        self.submodules.cl = cl = NicCluster(topo, **kw)
        self.ios = set(cl.ios)
        self.probe_names = []
        for name, ev in probes(cl).items():
            c = Signal(32, name=f"p_{name}")
            self.sync += c.eq(c + ev)
            self.ios.add(c)
            self.probe_names.append(name)


def test_dma_stream_at_link_rate_cocotb():
    name = "stream_ring2"
    top = StreamTop(Topology.parse(TOPO), n_ctx=N_CTX, mtu=MTU)
    out = BUILD_ROOT / "verilog" / name
    v = write_verilog(top, top.ios, name, out)
    csr = out / f"{name}.csr.json"
    write_csr_json(top.cl.nodes[0].csr_map(), csr)
    run_cocotb(name, [v], name, "tb_stream", test_dir=HERE,
               extra_env={"CLUSTER_TOPO": TOPO, "CLUSTER_CSR": str(csr), "CLUSTER_MTU": str(MTU),
                          "STREAM_PROBES": ",".join(top.probe_names)})
