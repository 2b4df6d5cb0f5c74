"""NicCore: everything on a ParaNIC board that is not board-specific.

Router + one LinkLayer per link port (carrying a control lane beside the router's
packets: hw/lane.py) + HostInterface + BarrierUnit + MgmtPort (the firmware's CONTROL
packets, and through MgmtTxPath the packets it replays after a link fault), joined by
packet streams; the identity inputs ``dna`` and
``cfg_node`` (driven by the board or the simulator) and the firmware status registers. The board (or the simulator) supplies the PHY adapters for the
link ports' ``phy_tx``/``phy_rx`` streams, a Wishbone master for ``bus`` (the
context pages; privileged CSRs are collected by LiteX from the submodules), and
two LitePCIe master ports for ``dma_rd``/``dma_wr``.
"""

from __future__ import annotations

from migen import ClockDomainsRenamer, If
from migen.genlib.cdc import BusSynchronizer
from litex.gen import LiteXModule
from litex.soc.interconnect import packet, stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from paranic.spec import protocol as P

from .barrier import BarrierUnit
from .cdc import CDC_DEPTH, FREE_LAG_NIC_CYCLES, NO_CROSS, CsrCross, StreamCrossing
from .collective import CollectiveUnit, make_core
from .common import hdr, packet_layout, words_to_beats
from .host import HostInterface
from .inject import InjectionGate, StartGate
from .lane import LaneRx, LaneTx
from .link import LinkLayer
from .mgmt import FwStatus, Identity, MgmtPort, MgmtTxPath
from .router import Router, default_buf_words
from .router_route import RouteCoords
from .width import PACK_HELD_BEATS, BeatsToWords, WordsToBeats


#: Words of the injection FIFO kept for the management port's control packets (an LSA
#: is 18 words, a FLUSH 3).
MGMT_RESERVE_WORDS = 64


#: MTU packets NicCore's injection FIFO holds beside the management port's reserve, and
#: the packets its virtual output queues hold (``Router(inject_packets=...)``). Fourteen,
#: not two: with the router's second read ports the ring reaches its saturation goal only
#: when a node's packets for one direction cannot fill the FIFO while the other direction
#: idles (docs/benchmarks.md, "Router", *Second read ports*).
INJECT_MTU_PACKETS = 14
INJECT_PACKETS = 16
#: Which available queue head a router input offers (``Router(voq_order=...)``): round
#: robin over its queues. With the second read ports it keeps every measured torus:4x4
#: seed above 0.88 where "oldest" left one at 0.876 (the ring has nothing to choose:
#: the same to the last digit; docs/benchmarks.md, "Router", *What limits saturation*).
VOQ_ORDER = "rr"


def mgmt_reserve_beats(dw: int = P.WORD_BITS) -> int:
    """MGMT_RESERVE_WORDS in beats of a ``dw``-bit router (a packet of at most that
    many words takes at most this many beats)."""
    return words_to_beats(MGMT_RESERVE_WORDS, dw)


def inject_buf_words(mtu: int, dw: int = P.WORD_BITS) -> int:
    """NicCore's injection FIFO: INJECT_MTU_PACKETS MTU packets plus the management
    port's reserve (MGMT_RESERVE_WORDS), rounded up to a power of two (2048 words at MTU
    1024), so that host packets still stream while the reserve is kept free. In beats
    of ``dw`` bits (1024 beats at 128 bits, MTU 1024)."""
    need = INJECT_MTU_PACKETS * P.packet_beats(mtu, dw) + mgmt_reserve_beats(dw)
    return 1 << (need - 1).bit_length()


def link_buf_words(mtu: int, dw: int = P.WORD_BITS) -> int:
    """NicCore's link input buffers: four MTU packets, rounded up to a power of two.

    A packet entering a ring needs two free packet slots in the next router's input
    buffer, and a slot comes back only after its packet has crossed the link, been
    received (cut-through: credited once its CRC verdict is in), forwarded out of the buffer and its credits
    returned: about 290 cycles, 2.2 frame times at MTU 1024. With the router's default
    (two packets, 3 slots) only two packets are in flight, and a one-hop DMA stream
    runs at 145 cycles per MTU packet instead of the link's 132; with four packets per
    buffer (7 slots at MTU 1024; one more block RAM per link port) it keeps up. The
    injection and ejection FIFOs keep the router's default size. In beats of ``dw``
    bits (the same four packets).
    """
    return default_buf_words(mtu, packets=4, dw=dw)


class NicCore(LiteXModule):
    """One ParaNIC.

    Parameters: ``n_links`` 2 (ring) or 4 (torus); ``n_ctx`` hardware contexts;
    ``mtu`` payload bytes per packet; ``table_nodes`` routing-table depth;
    ``buf_words`` words (beats at ``link_dw``) of each router link input buffer
    (every node of a network must agree; default :func:`link_buf_words`);
    ``link_kwargs``/``host_kwargs`` pass through to the LinkLayer/HostInterface;
    ``with_sync_line`` gives the barrier unit its wired-AND sync-line path (a board with
    a ribbon's sync line; adds the ``barrier_use_line`` CSR, so the CSR map differs).
    ``collective`` picks the collective unit's kernel (:func:`~paranic.hw.collective.make_core`):
    None (the unit refuses every command), ``"migen"``, ``"vitis"`` or ``"sim"``.
    ``route_fn`` picks how the router routes (:class:`~paranic.hw.router.Router`,
    docs/architecture.md "Routing stage"): ``"migen"`` (default: the route kernel's Migen
    twin, 4-cycle hops), ``"vitis"`` (the kernel's exported RTL), ``"sim"`` (the
    simulator's DPI-C shell around the kernel's C++), ``"table"`` (the table alone, no
    routing beyond it). ``dims``: the topology's (X, Y) the kernel assumes after reset
    (CSRs ``route_coords_dim_x``/``_dim_y``; default a ring of MAX_NODES, which routes every
    destination inside the table by it); the node's coordinates follow from the node id.
    ``link_dw`` (64, 128, 256; docs/architecture.md "Datapath width"): the width of the
    router, the link layers and the control lanes; every count of theirs is in beats of
    ``link_dw`` bits. The host interface, the barrier, collective and management units
    stay 64 bits: wider, a :class:`~paranic.hw.width.WordsToBeats` (``inject_pack``)
    packs the injection arbiter's packets into the router's local input and a
    :class:`~paranic.hw.width.BeatsToWords` (``eject_unpack``) unpacks its local output
    before the ejection dispatcher. At 64 (default) there is no converter: the
    gateware is the same as without the parameter.
    ``nic_clock`` (``link_dw`` > 64 only; docs/boards.md "NIC clock domain"): the router,
    the link layers (their ``phy_tx``/``phy_rx`` too), the control lanes and the
    evacuation inputs run in clock domain ``nic``, everything else in ``sys``; packet
    streams cross on the wide side of the converters (:class:`~paranic.hw.cdc.StreamCrossing`:
    ``inject_cross``, ``eject_cross``, ``mgmt_tx.crosses``), the lanes' 64-bit streams
    (``lane_tx_cross``/``lane_rx_cross``), the router's and link layers' CSRs through
    ``csr_cross`` (:class:`~paranic.hw.cdc.CsrCross`), the injection FIFO's ``free``
    through a ``BusSynchronizer`` (the room checks add ``CDC_DEPTH`` and
    ``FREE_LAG_NIC_CYCLES`` beats). Default False: one clock, the gateware as before.
    """

    def __init__(self, n_links: int = 2, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 table_nodes: int = P.DEFAULT_TABLE_NODES, buf_words: int | None = None,
                 link_kwargs: dict | None = None, host_kwargs: dict | None = None,
                 with_sync_line: bool = False, collective: str | None = None,
                 route_fn: str = "migen", dims: tuple[int, int] = (P.MAX_NODES, 1),
                 link_dw: int = P.WORD_BITS, nic_clock: bool = False) -> None:
        wide = P.beat_words(link_dw) > 1
        if nic_clock and not wide:
            raise ValueError("NicCore: nic_clock needs link_dw > 64 (the crossings sit on the converters' wide side)")
        self.nic_clock = nic_clock
        if nic_clock:
            self.csr_cross = cross = CsrCross("sys", "nic")
        else:
            cross = NO_CROSS

        def in_nic(m):
            # renames the module in place (and keeps the one-clock build's signal names)
            if nic_clock:
                ClockDomainsRenamer("nic")(m)
        self.n_links = n_links
        self.n_ctx = n_ctx
        self.mtu = mtu
        self.link_dw = dw = link_dw

        # Gateware identity (read-only), checked by the driver before it trusts pn_csr.h.
        self.ident = CSRStatus(32, reset=P.NIC_IDENT, description="NIC_IDENT (\"PNIC\"): a ParaNIC's BAR0")
        self.version = CSRStatus(32, reset=P.NIC_VERSION, description="NIC_VERSION of the gateware")
        # Node identity, written by the driver/firmware at bring-up.
        self.node = CSRStorage(P.NODE_BITS, description="This node's id (stamped into headers)")
        node_id = self.node.storage
        # What the board/simulator says this node is (inputs; CSRs id_dna, id_cfg_node).
        self.id = Identity()
        self.dna = self.id.dna
        self.cfg_node = self.id.cfg_node
        # The firmware's status registers (fw_*; 0 without firmware).
        self.fw = FwStatus()

        # Blocks ------------------------------------------------------------------------------
        self.router = Router(n_links=n_links, mtu=mtu,
                             buf_words=link_buf_words(mtu, dw) if buf_words is None else buf_words,
                             eject_words=default_buf_words(mtu, dw=dw),
                             inject_words=inject_buf_words(mtu, dw), inject_packets=INJECT_PACKETS,
                             voq_order=VOQ_ORDER,
                             table_nodes=table_nodes,
                             route_fn=route_fn, dims=dims, dw=dw)
        in_nic(self.router)
        self.route_coords = RouteCoords(dims)
        self.host = HostInterface(n_ctx=n_ctx, mtu=mtu, **(host_kwargs or {}))
        self.barrier = BarrierUnit(n_ctx=n_ctx, with_sync_line=with_sync_line)
        self.mgmt = MgmtPort(mtu=mtu)
        self.coll = CollectiveUnit(make_core(collective))
        self.links = []
        for i in range(n_links):
            link = LinkLayer(mtu=mtu, dw=dw, **(link_kwargs or {}))
            in_nic(link)
            setattr(self, f"link{i}", link)
            self.links.append(link)
        self.router.add_csrs(cross)
        self.host.add_csrs()
        self.barrier.add_csrs()
        self.mgmt.add_csrs()
        self.coll.add_csrs()
        for link in self.links:
            link.add_csrs(cross)

        self.comb += [
            self.router.node_id.eq(cross.level(node_id)),
            self.route_coords.node_id.eq(node_id),
            self.router.node_x.eq(cross.level(self.route_coords.node_x)),
            self.router.node_y.eq(cross.level(self.route_coords.node_y)),
            self.router.dim_x.eq(cross.level(self.route_coords.dim_x)),
            self.router.dim_y.eq(cross.level(self.route_coords.dim_y)),
            self.host.node_id.eq(node_id),
            self.barrier.node_id.eq(node_id),
            self.coll.node_id.eq(node_id),
        ]

        # Router link ports <-> link layers, and the management port's TX path: into the
        # router's local input (mgmt_tx_target 0) or, through a multiplexer in front of
        # each link port's input buffer, into the buffer of a port whose link is DOWN
        # (target p; docs/mgmt.md, "Replayed packets"). -----------------------------------
        # Each link carries the control lane beside the router's packets: link-local
        # CONTROL packets go from the management port to the link (LaneTx) and from the
        # far link to the far management port (LaneRx), never through a router buffer
        # (hw/lane.py; docs/architecture.md, "The control lane"). ----------------------------
        self.mgmt_tx = MgmtTxPath(self.mgmt, self.router, cd="nic" if nic_clock else None)
        self.lanes_tx, self.lanes_rx = [], []
        self.lanes_out = []     # the lanes' packets for the management port (sys)
        for i, (port, link, evac_sink, state) in enumerate(zip(
                self.router.links, self.links, self.mgmt_tx.link_sinks, self.mgmt_tx.link_states)):
            ltx, lrx = LaneTx(dw=dw), LaneRx(port=i + 1, n_links=n_links, dw=dw)
            in_nic(ltx)
            in_nic(lrx)
            setattr(self, f"lane_tx{i}", ltx)
            setattr(self, f"lane_rx{i}", lrx)
            self.lanes_tx.append(ltx)
            self.lanes_rx.append(lrx)
            lane_in, lane_out = ltx.lane_sink, lrx.source
            if nic_clock:
                # The lanes' 64-bit streams cross whole (control packets: a few words now
                # and then); the lanes' packer and unpacker run in nic.
                tx_cdc = stream.ClockDomainCrossing(packet_layout(), cd_from="sys", cd_to="nic", depth=CDC_DEPTH)
                rx_cdc = stream.ClockDomainCrossing(packet_layout(), cd_from="nic", cd_to="sys", depth=CDC_DEPTH)
                setattr(self, f"lane_tx_cross{i}", tx_cdc)
                setattr(self, f"lane_rx_cross{i}", rx_cdc)
                self.comb += [tx_cdc.source.connect(ltx.lane_sink), lrx.source.connect(rx_cdc.sink)]
                lane_in, lane_out = tx_cdc.sink, rx_cdc.source
            self.lanes_out.append(lane_out)
            self.comb += [
                link.port_connections(port, rx_sink=lrx.sink, lane_tx=ltx),
                ltx.router_busy.eq(self.router.busy[i + 1]),
                self.mgmt_tx.steer.lanes[i].connect(lane_in),
                lrx.router_source.connect(evac_sink),
                state.eq(link.link_state),
            ]

        # Injection: barrier packets, the management port's packets (target 0) and host
        # packets share the router's local input (packet round-robin). Barrier and host
        # packets pass the injection gate (rt stamped, hold; CSRs injection_*); the
        # management port's do not (the firmware writes their headers raw and sends while
        # host traffic is held). A host or barrier packet starts only while the injection
        # FIFO has room for a whole MTU packet plus MGMT_RESERVE_WORDS, a management packet
        # only while it has MGMT_RESERVE_WORDS: so a control packet (at most that long)
        # always goes in whole, and when the packets at the FIFO's head wait for a failed
        # link, the firmware's packets are still in its TX FIFO, where a new
        # mgmt_tx_target re-steers them (docs/firmware.md, "Route changes"). --------------
        # The host's COLLECTIVE packets are commands for the collective unit, whose own
        # packets are injected beside the barrier unit's. -----------------------------------
        self.injection = InjectionGate(3)
        self.injection.add_csrs()
        gate = self.injection
        self.mgmt_start = StartGate()
        free = self.router.inject.free
        # Wider: a packer between the arbiter and the injection FIFO; the room checks
        # count beats, and the beats a packer holds are not yet in ``free``.
        # NIC clock: the packer's beats cross into nic; the room checks read a copy of
        # ``free`` a few nic cycles late (up to FREE_LAG_NIC_CYCLES beats may have entered
        # the FIFO since) and up to CDC_DEPTH beats may be in the crossing.
        if nic_clock:
            self.inject_pack = WordsToBeats(dw)
            inject_in = self.inject_pack.sink
            self.inject_cross = StreamCrossing(packet_layout(dw), cd_from="sys", cd_to="nic")
            self.inject_free = BusSynchronizer(len(free), "nic", "sys")
            self.comb += [
                self.inject_pack.source.connect(self.inject_cross.sink),
                self.inject_cross.source.connect(self.router.local_sink),
                self.inject_cross.far_busy.eq(~self.router.inject.empty),
                self.inject_free.i.eq(free),
            ]
            free = self.inject_free.o
            held = PACK_HELD_BEATS + CDC_DEPTH + FREE_LAG_NIC_CYCLES
        elif wide:
            self.inject_pack = WordsToBeats(dw)
            inject_in = self.inject_pack.sink
            self.comb += self.inject_pack.source.connect(self.router.local_sink)
            held = PACK_HELD_BEATS
        else:
            inject_in = self.router.local_sink
            held = 0
        self.host_tx = packet.Dispatcher(self.host.tx_source, [gate.sinks[1], self.coll.host_sink])
        self.comb += [
            self.host_tx.sel.eq(hdr(self.host.tx_source.data, "type") == P.PacketType.COLLECTIVE),
            self.barrier.source.connect(gate.sinks[0]),
            self.coll.net_source.connect(gate.sinks[2]),
            *(gate.watch(self.router, self.mgmt, self.inject_pack.source.valid if wide else None)
              if not nic_clock else
              # idle: nothing in the packer, the crossing or (seen through it) the FIFO.
              [gate.inject_empty.eq(~self.inject_pack.source.valid & ~self.inject_cross.pending),
               gate.mgmt_idle.eq(self.mgmt.tx_empty)]),
            gate.room.eq(free >= P.packet_beats(mtu, dw) + mgmt_reserve_beats(dw) + held),
            self.mgmt_tx.local.connect(self.mgmt_start.sink),
            self.mgmt_start.ok.eq(free >= mgmt_reserve_beats(dw) + held),
        ]
        self.inject = packet.Arbiter([gate.sources[0], self.mgmt_start.source, gate.sources[1],
                                      gate.sources[2]], inject_in)

        # Ejection by type: BARRIER to the barrier unit, CONTROL to the management port
        # (which back-pressures, never drops), COLLECTIVE to the collective unit, everything
        # else to the host, which also takes the collective unit's results. ---------------
        eject_mgmt = stream.Endpoint(packet_layout())
        eject_host = stream.Endpoint(packet_layout())
        if wide:
            self.eject_unpack = BeatsToWords(dw)
            eject_beats = self.router.local_source
            if nic_clock:
                self.eject_cross = stream.ClockDomainCrossing(packet_layout(dw), cd_from="nic", cd_to="sys",
                                                              depth=CDC_DEPTH)
                self.comb += self.router.local_source.connect(self.eject_cross.sink)
                eject_beats = self.eject_cross.source
            self.comb += eject_beats.connect(self.eject_unpack.sink)
            ejected = self.eject_unpack.source
        else:
            ejected = self.router.local_source
        self.eject = packet.Dispatcher(ejected,
                                       [eject_host, self.barrier.sink, eject_mgmt, self.coll.net_sink])
        self.host_rx = packet.Arbiter([eject_host, self.coll.host_source], self.host.rx_sink)
        # The management port receives routed CONTROL packets from the router and
        # link-local ones from the lanes (packet round-robin).
        self.mgmt_rx = packet.Arbiter([eject_mgmt] + self.lanes_out, self.mgmt.sink)
        ptype = hdr(ejected.data, "type")
        self.comb += If(ptype == P.PacketType.BARRIER, self.eject.sel.eq(1)
                        ).Elif(ptype == P.PacketType.CONTROL, self.eject.sel.eq(2)
                        ).Elif(ptype == P.PacketType.COLLECTIVE, self.eject.sel.eq(3)
                        ).Else(self.eject.sel.eq(0))

        # Host <-> barrier ------------------------------------------------------------------
        self.comb += [
            self.barrier.enter.eq(self.host.barrier_enter),
            self.barrier.enter_ctx.eq(self.host.barrier_enter_ctx),
            self.host.barrier_done_pulse.eq(self.barrier.done),
            self.host.barrier_done_ctx.eq(self.barrier.done_ctx),
        ]

        # Host-side interfaces --------------------------------------------------------------
        self.bus = self.host.bus
        self.dma_rd = self.host.dma_rd
        self.dma_wr = self.host.dma_wr
        self.irq = self.host.irq
        self.phys = [(link.phy_tx, link.phy_rx) for link in self.links]
