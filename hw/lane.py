"""The control lane: neighbours' firmware talk beside the router, never behind routed packets.

A link-local CONTROL packet (``direct`` != 0: HELLO, LSA; docs/mgmt.md) goes from the
management port straight into its link layer (:class:`LaneTx`), and at the far end
straight from the link layer into the management port (:class:`LaneRx`). It never
enters a router buffer, so it never waits behind a routed packet: a router input buffer
can stay blocked for as long as a route change takes (its head packet waits for a link
that is DOWN until divert frees it), and the route change itself needs the firmware to
hear its neighbours (docs/architecture.md, "Control lane"). The link layer frames
both kinds of packet alike: CRC, replay and the frame order are the link's.

Neither side touches the router's credits: lane packets never occupy a router input
buffer, so the far end returns none for them and the near router counts none.
"""

from __future__ import annotations

from migen import If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from .common import hdr, packet_beats, packet_layout, words_to_beats
from .fifo import PacketFifo
from .width import BeatsToWords, WordsToBeats


def is_lane_header(word0: Signal, n_links: int):
    """Header word 0 of a lane packet: CONTROL, ``direct`` a link port 1..n_links, at most
    ``LANE_MAX_BYTES`` of payload (longer link-local packets go through the router)."""
    d = hdr(word0, "direct")
    return ((hdr(word0, "type") == P.PacketType.CONTROL) & (d != 0) & (d <= n_links) &
            (hdr(word0, "length") <= P.LANE_MAX_BYTES))


#: Words of each link's lane receive FIFO: one block RAM (512 x 72), 28 LSAs.
LANE_RX_WORDS = 512


class LaneTx(LiteXModule):
    """Merges lane packets into a link layer's transmit stream, between router packets.

    ``router_sink`` (the router port's ``source``) and ``lane_sink`` (lane packets of
    this port) go to ``source`` (the link layer's ``tx_sink``). A waiting lane packet
    *claims* the link: ``room_out`` (the port's ``tx_room`` as the router sees it)
    drops, so the router grants the port no new packet; the lane packet starts once the
    router's packet in progress has left (``router_busy``, the router's allocation of
    this output, is 0 and no router packet is part-way through) and the link has room
    for a largest packet (``room_in``). While the link is not up, lane packets are
    read and dropped (``dropped``), as the router drops link-local packets for a port
    that is not up: they were for that link, and the neighbours exchange everything
    again when it comes up. ``sent``: lane packets handed to the link.

    ``dw`` (64, 128, 256): the width of ``router_sink`` and ``source`` (the router port's
    and the link layer's beats). ``lane_sink`` stays 64 bits (the management port's
    words); wider, a :class:`~paranic.hw.width.WordsToBeats` (``pack``) packs its
    packets into beats before the merge.
    """

    def __init__(self, dw: int = P.WORD_BITS) -> None:
        self.router_sink = stream.Endpoint(packet_layout(dw))
        self.lane_sink = stream.Endpoint(packet_layout())
        self.source = stream.Endpoint(packet_layout(dw))
        self.router_busy = Signal()
        self.room_in = Signal()
        self.room_out = Signal()
        self.up = Signal()
        self.sent = Signal(32)
        self.dropped = Signal(32)

        # # #

        claim = Signal()      # a lane packet waits: the router gets no new grant
        active = Signal()     # a lane packet passes to the link
        drop = Signal()       # a lane packet is being dropped (link not up)
        r_open = Signal()     # a router packet is part-way through
        start = Signal()
        start_drop = Signal()
        lane_end = Signal()
        lane = self.lane_sink
        if P.beat_words(dw) > 1:
            self.pack = WordsToBeats(dw)
            self.comb += self.lane_sink.connect(self.pack.sink)
            lane = self.pack.source
        self.comb += [
            self.room_out.eq(self.room_in & ~claim),
            # claim was set a cycle ago, so a grant can only be one already visible in
            # router_busy; that and a packet still leaving (r_open, valid) hold the start.
            start.eq(claim & ~active & ~drop & self.up & self.room_in & ~self.router_busy &
                     ~r_open & ~self.router_sink.valid),
            start_drop.eq(claim & ~active & ~drop & ~self.up),
            lane_end.eq(lane.valid & lane.ready & lane.last),
            If(active | start,
                lane.connect(self.source),
            ).Elif(drop | start_drop,
                lane.ready.eq(1),
            ).Else(
                self.router_sink.connect(self.source),
            ),
        ]
        self.sync += [
            If(self.router_sink.valid & self.router_sink.ready, r_open.eq(~self.router_sink.last)),
            If(lane_end,
                claim.eq(0), active.eq(0), drop.eq(0),
                If(active | start, self.sent.eq(self.sent + 1)).Else(self.dropped.eq(self.dropped + 1)),
            ).Else(
                If(lane.valid & ~claim, claim.eq(1)),
                If(start, active.eq(1)),
                If(start_drop, drop.eq(1)),
            ),
        ]


class LaneRx(LiteXModule):
    """Takes the lane packets out of a link layer's receive stream.

    ``sink`` (the link layer's ``rx_source``) passes to ``router_source`` (towards the
    router port's input buffer), except lane packets, which go into a packet FIFO of
    ``depth_words`` whose ``source`` feeds the management port, with ``direct`` set to
    ``port`` (the firmware learns the port a neighbour's packet came in on, as from the
    router); ``depth_words`` defaults to :data:`LANE_RX_WORDS`. A lane packet is taken
    only when all of it fits (its length from its header against the FIFO's free
    words); otherwise it is refused whole: the link layer counts the refused words
    (``rx_overflows``), poisons the frame and the far end replays it. ``refused``: lane
    packets refused. The router's credits never cover lane packets, so this is the
    lane's only flow control.

    ``dw`` (64, 128, 256): the width of ``sink`` and ``router_source`` (the link layer's
    and the router port's beats) and of the FIFO, whose ``depth_words`` then counts
    beats (default: :data:`LANE_RX_WORDS` words' worth); ``source`` stays 64 bits (the
    management port's words): wider, a :class:`~paranic.hw.width.BeatsToWords`
    (``unpack``) follows the FIFO.
    """

    def __init__(self, port: int, n_links: int, depth_words: int | None = None,
                 dw: int = P.WORD_BITS) -> None:
        depth_words = words_to_beats(LANE_RX_WORDS, dw) if depth_words is None else depth_words
        self.sink = stream.Endpoint(packet_layout(dw))
        self.router_source = stream.Endpoint(packet_layout(dw))
        self.fifo = fifo = PacketFifo(depth_words, P.packet_beats(P.LANE_MAX_BYTES, dw), backpressure=True,
                                      dw=dw)
        if P.beat_words(dw) > 1:
            self.unpack = BeatsToWords(dw)
            self.comb += fifo.source.connect(self.unpack.sink)
            self.source = self.unpack.source
        else:
            self.source = fifo.source
        self.refused = Signal(32)

        # # #

        d = self.sink.data
        open_ = Signal()      # part-way through a packet
        held = Signal(2)      # its way: 0 router, 1 lane, 2 refused
        way = Signal(2)
        need = Signal(len(fifo.free) + 1)
        length = hdr(d, "length")
        self.comb += [
            need.eq(packet_beats(length, dw)),
            If(open_,
                way.eq(held),
            ).Elif(is_lane_header(d, n_links),
                way.eq(Mux(need <= fifo.free, 1, 2)),
            ),
        ]
        # The link layer's output moves on every cycle whether taken or not (a refused
        # word is dropped there), so packets are tracked by valid alone.
        self.sync += [
            If(self.sink.valid,
                open_.eq(~self.sink.last),
                If(~open_, held.eq(way)),
            ),
            If(self.sink.valid & self.sink.last & (way == 2), self.refused.eq(self.refused + 1)),
        ]
        data = Signal(dw)
        self.comb += [
            data.eq(d),
            If(~open_, hdr(data, "direct").eq(port)),
            If(way == 0,
                self.sink.connect(self.router_source),
            ).Elif(way == 1,
                fifo.sink.valid.eq(self.sink.valid),
                fifo.sink.data.eq(data),
                fifo.sink.last.eq(self.sink.last),
                fifo.sink.error.eq(self.sink.error),
                self.sink.ready.eq(fifo.sink.ready),
            ),
            # way 2: ready stays 0; the link layer drops and poisons every word.
        ]
