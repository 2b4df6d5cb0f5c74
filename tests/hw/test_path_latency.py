"""The one-way path of an 8-byte PIO packet through the NIC's own logic, cycle by cycle
(Migen simulator): host A's store+doorbell -> PioEngine -> router A's injection input ->
link layer A -> cable -> link layer B -> router B's link input and ejection -> RxEngine
-> the valid word's DMA write beat on host B's port. The stage figures are the table in
docs/host-interface.md ("Cycles of the host logic", "The whole path"); the cluster
simulator's doorbell -> valid visible is NIC_PATH + the cable + the DMA write latency
and the polling CPU's miss (tests/sim/test_latency_model_sim.py).

Two HostInterfaces, two Routers and two LinkLayers without the rest of NicCore: the
parts between them in NicCore (injection gate, arbiters, dispatchers, control lanes) are
combinational, and an arbiter's grant stays on the host when nothing else sends.
"""

from __future__ import annotations

from migen import Module
from migen.sim import passive, run_simulation

from model.pcie_migen import MigenHost
from paranic.hw.host import HostInterface
from paranic.hw.link import LinkLayer
from paranic.hw.router import Router
from paranic.sim.cable import SimPhy
from paranic.spec import link as LK
from paranic.spec import protocol as P

from test_host_wide import WIN, Wb64, open_ctx, words

MTU = 64
R = P.CtxReg
#: The cable of the realistic latency model (paranic.spec.sim), as the simulator builds it.
CABLE = 13
#: Cycles of each stage, from the previous event to this one (docs/host-interface.md).
STAGES = {
    "header on host A's tx_source": 1,          # doorbell state; the header from the bypass register
    "tail on tx_source": 2,                     # 3 words back to back
    "header on router A's link output": 4,      # injection FIFO (store and forward) + hop
    "SOF on the cable": 0,                      # LinkTX: no output register
    "trailer on the cable": 4,                  # header, 2 words, CRC-32 trailer
    "trailer out of the cable": CABLE,
    "tail on router B's link input": 0,         # LinkRX: the held last word leaves with its verdict
    "tail into router B's ejection FIFO": 4,    # the hop (cut-through: the tail too)
    "header out of the ejection FIFO": 1,       # store and forward: once complete
    "first beat of the slot write": 1,          # RxEngine's check
    "valid word's beat": 3,                     # 3 slot beats, then the valid word
}
#: Doorbell write presented on host A's bus -> the valid word's beat on host B's DMA port.
NIC_PATH = sum(STAGES.values())


class Path(Module):
    """Host A -> router A (node 0) -> link XP -> cable -> link XM -> router B (node 1) -> host B."""

    def __init__(self, cable: int = CABLE) -> None:
        self.ha = HostInterface(n_ctx=2, mtu=MTU, bus_width=64)
        self.hb = HostInterface(n_ctx=2, mtu=MTU, bus_width=64)
        # route_fn "table": the route kernel's twin answers a table hit in the same cycle
        # (4-cycle hops either way: tests/hw/test_router.py HOP)
        self.ra = Router(n_links=2, mtu=MTU, table_nodes=4, route_fn="table",
                         table_init=[P.Port.LOCAL, P.Port.XP, P.Port.XP, P.Port.XP])
        self.rb = Router(n_links=2, mtu=MTU, table_nodes=4, route_fn="table",
                         table_init=[P.Port.XM, P.Port.LOCAL, P.Port.XM, P.Port.XM])
        self.la, self.lb = LinkLayer(mtu=MTU), LinkLayer(mtu=MTU)
        self.ab, self.ba = SimPhy(delay=cable, seed=1), SimPhy(delay=cable, seed=2)
        self.submodules += self.ha, self.hb, self.ra, self.rb, self.la, self.lb, self.ab, self.ba
        self.comb += [
            self.ra.node_id.eq(0), self.ha.node_id.eq(0),
            self.rb.node_id.eq(1), self.hb.node_id.eq(1),
            self.ha.tx_source.connect(self.ra.local_sink), self.ra.local_source.connect(self.ha.rx_sink),
            self.hb.tx_source.connect(self.rb.local_sink), self.rb.local_source.connect(self.hb.rx_sink),
            *self.la.port_connections(self.ra.links[P.Port.XP - 1]),
            *self.lb.port_connections(self.rb.links[P.Port.XM - 1]),
            self.la.phy_tx.connect(self.ab.sink), self.ab.source.connect(self.lb.phy_rx),
            self.lb.phy_tx.connect(self.ba.sink), self.ba.source.connect(self.la.phy_rx),
        ]


def run_path():
    top = Path()
    ha, hb = top.ha, top.hb
    host_a = MigenHost(None, ha.dma_rd.source, ha.dma_rd.sink, ha.dma_wr.source, ha.irq, read_latency=3)
    host_b = MigenHost(None, hb.dma_rd.source, hb.dma_rd.sink, hb.dma_wr.source, hb.irq, read_latency=3)
    for h in (host_a, host_b):
        m = h.mem
        m.add(0x10000, 4 * P.rx_slot_bytes(MTU), "rx", dma_write=True)
        m.add(0x20000, 4 * P.TX_DESC_BYTES, "tx", dma_read=True)
        m.add(0x30000, P.STATUS_BLOCK_BYTES, "status", dma_write=True)
        m.add(0x40000, 0x1000, "window", dma_read=True)
    wb = Wb64(ha.bus)
    ev: dict[str, int] = {}

    def once(name, n):
        ev.setdefault(name, n)

    @passive
    def monitor():
        n = 0
        b = ha.bus
        in_frame = False
        sent = 0
        while True:
            yield
            n += 1
            if "armed" not in ev:
                continue
            if ((yield b.cyc) and (yield b.stb) and (yield b.we)
                    and (yield b.adr) == int(R.PIO_SEND) >> 3):
                once("doorbell", n)
            s = ha.tx_source
            if (yield s.valid) and (yield s.ready):
                if (yield s.first):
                    once("header on host A's tx_source", n)
                if (yield s.last):
                    once("tail on tx_source", n)
            s = top.ra.links[P.Port.XP - 1].source
            if (yield s.valid) and (yield s.first):
                once("header on router A's link output", n)
            w = top.ab.sink
            if (yield w.valid):
                data, ctrl = (yield w.data), (yield w.ctrl)
                ctl = LK.unpack_ctl(data) if ctrl else None
                if ctl and ctl["kind"] == LK.CtlKind.SOF and "SOF on the cable" not in ev:
                    once("SOF on the cable", n)
                    in_frame, sent = True, 0
                elif in_frame and not ctrl:
                    sent += 1
                    if sent == P.packet_words(8) + 1:
                        once("trailer on the cable", n)
                        in_frame = False
            if "trailer on the cable" in ev and (yield top.ab.source.valid):
                if "trailer out of the cable" not in ev and n >= ev["trailer on the cable"] + CABLE:
                    once("trailer out of the cable", n)
            s = top.lb.rx_source
            if (yield s.valid) and (yield s.last) and "armed" in ev:
                once("tail on router B's link input", n)
            s = top.rb.pipes[P.Port.LOCAL].source
            if (yield s.valid) and (yield s.ready) and (yield s.last):
                once("tail into router B's ejection FIFO", n)
            s = top.rb.local_source
            if (yield s.valid) and (yield s.first):
                once("header out of the ejection FIFO", n)
            s = hb.dma_wr.source
            if (yield s.valid) and (yield s.ready) and "header out of the ejection FIFO" in ev:
                if (yield s.first):
                    if "first beat of the slot write" in ev:
                        once("valid word's beat", n)
                    once("first beat of the slot write", n)

    def main():
        yield from open_ctx(ha)
        yield from open_ctx(hb)
        for _ in range(2000):
            if (yield top.la.up) and (yield top.lb.up):
                break
            yield
        else:
            raise AssertionError("links not up")
        for _ in range(40):    # status writes of the open, link idle
            yield
        w = words(P.pack_header(dst_node=1, length=8, tag=5), b"12345678")
        yield from wb.w64(WIN + 16, w[2])
        yield from wb.w64(WIN + 8, w[1])
        ev["armed"] = 1
        yield from wb.w64(R.PIO_SEND, w[0])
        for _ in range(80):
            yield

    run_simulation(top, [main(), host_a.generator(), host_b.generator(), monitor()])
    slot = host_b.mem.read(0x10000, P.rx_slot_bytes(MTU))
    assert P.unpack_header(slot)["tag"] == 5 and slot[16:24] == b"12345678"
    assert int.from_bytes(slot[P.rx_valid_offset(MTU):][:8], "little") == 1
    return ev


def test_one_way_path_cycle_by_cycle():
    """Each stage of the 8-byte packet's path takes the cycles of STAGES (the docs'
    table); doorbell -> valid word's beat is NIC_PATH, 33 cycles (38 before the link
    layer lost its three register stages, LinkTX's output register and LinkRX's input
    and output registers, the DMA write arbiter granted an idle port at once and the PIO
    engine took the header from its bypass register)."""
    ev = run_path()
    names = ["doorbell"] + list(STAGES)
    got = {b: ev[b] - ev[a] for a, b in zip(names, names[1:])}
    print()
    for k in STAGES:
        print(f"  {k}: {got[k]} (total {ev[k] - ev['doorbell']})")
    assert got == STAGES
    assert ev["valid word's beat"] - ev["doorbell"] == NIC_PATH == 33
