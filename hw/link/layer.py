"""Link layer: one end of a cable, reliable framing, credits and training over a PHY lane.

:class:`LinkLayer` sits between a router link port (:class:`paranic.hw.common.LinkPortIf`)
and a PHY adapter that moves one line word (64 data bits + 1 control flag,
:func:`paranic.hw.phy.phy_layout`) per cycle in each direction. It joins
:class:`~paranic.hw.link.tx.LinkTX` and :class:`~paranic.hw.link.rx.LinkRX`, runs link
training and holds the counters and CSRs.
"""

from __future__ import annotations

from migen import If, Mux, Signal
from migen.fhdl.decorators import ModuleTransformer
from migen.fhdl.tools import list_targets

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from paranic.spec import protocol as P
from paranic.spec.link import (CREDIT_BITS, DEFAULT_LOS_TIMEOUT, DEFAULT_MAX_REPLAYS, LEN_BITS,
                               SEQ_BITS, LinkDownReason, LinkState, frame_beats)

from ..cdc import NO_CROSS
from .rx import LinkRX
from .tx import LinkTX

#: Counters of a LinkLayer: (name, width, description). All wrap around.
COUNTERS: tuple[tuple[str, int, str], ...] = (
    ("tx_packets", 32, "packets accepted from the router and framed (replays not counted)"),
    ("rx_packets", 32, "frames delivered intact and in sequence to the router"),
    ("tx_bytes", 64, "payload bytes of tx_packets (NIC header length field)"),
    ("rx_bytes", 64, "payload bytes of rx_packets"),
    ("crc_errors", 32, "frames received in sequence whose CRC-32 trailer did not match"),
    ("ctrl_errors", 32, "control words whose CRC-16 failed or that cut a frame short"),
    ("seq_errors", 32, "frames discarded because their sequence number was not the expected one"),
    ("replays", 32, "frames retransmitted from the replay buffer"),
    ("naks", 32, "NAKs received from the far end"),
    ("naks_sent", 32, "NAKs sent to the far end"),
    ("timeouts", 32, "ACK timeouts (replay without a NAK)"),
    ("rx_overflows", 32, "words refused: by the router's input (a credit violation) or by a full control lane (replayed)"),
    ("tx_stomped", 32, "packets framed stomped: bad before this link (error on their last word; cut-through)"),
    ("rx_stomped", 32, "stomped frames received in sequence: delivered marked bad, acknowledged, not replayed"),
    ("rx_refused", 32, "frames refused because the input buffer lacked room (a bad copy still in it; replayed)"),
)


# ---------------------------------------------------------------------------


class RestartInserter(ModuleTransformer):
    """Add a ``restart`` input that returns every register of the module (submodules
    included) to its reset value, except the signals named in ``keep`` (the counters,
    which count across restarts). Memories keep their contents; their pointers are
    registers and restart, which empties them."""

    def __init__(self, keep: tuple[str, ...]) -> None:
        self.keep = keep

    def transform_instance(self, i) -> None:
        i.restart = Signal()

    def transform_fragment(self, i, f) -> None:
        keep = {id(getattr(i, name)) for name in self.keep}
        for cd, stmts in f.sync.items():
            targets = [t for t in list_targets(stmts) if id(t) not in keep]
            targets.sort(key=lambda t: t.duid)   # deterministic Verilog
            f.sync[cd] = stmts + [If(i.restart, *[t.eq(t.reset) for t in targets])]


_TX_COUNTERS = ("tx_packets", "tx_bytes", "replays", "naks", "naks_sent", "timeouts", "tx_stomped")
_RX_COUNTERS = ("rx_packets", "rx_bytes", "crc_errors", "ctrl_errors", "seq_errors", "rx_overflows",
                "rx_stomped", "rx_refused")


def default_replay_words(mtu: int, dw: int = P.WORD_BITS) -> int:
    """Replay buffer depth (beats of ``dw`` bits): room for four MTU frames, rounded up
    to a power of two."""
    return 1 << (4 * frame_beats(mtu, dw) - 1).bit_length()


def default_ack_timeout(mtu: int, dw: int = P.WORD_BITS) -> int:
    """Cycles without ACK progress before a replay: two MTU frames each way plus margin."""
    return 4 * frame_beats(mtu, dw) + 256


class LinkLayer(LiteXModule):
    """One end of a cable: reliable framing, credits and training over a PHY lane.

    Parameters
    ----------
    mtu : largest payload in bytes (frames up to ``packet_words(mtu)`` words).
    replay_words : depth of the replay buffer in beats (64-bit words by default; power of two, at
        least one MTU packet; default :func:`default_replay_words`).
    max_frames : frames in flight without ACK (power of two, 2..128).
    ack_timeout : cycles without ACK progress, while frames are outstanding, before
        everything outstanding is replayed (default :func:`default_ack_timeout`).
    train_words : consecutive good TRAIN words needed to hear the partner.
    los_timeout : cycles without a good SOF/STATUS word after which an UP link goes
        DOWN (loss of signal); must exceed the longest gap between control words on
        the PHY (one MTU frame).
    max_replays : reset value of the ``max_replays`` CSR: replay rounds (NAK or ACK
        timeout) without ACK progress after which an UP link goes DOWN (0: never).
    dw : datapath width in bits (64, 128, 256; docs/link-layer.md "Datapath width"):
        one beat of ``dw // 64`` packet words per cycle on both sides; lengths, credits
        and the replay buffer are counted in beats.

    Router side (names as in ``LinkPortIf``): ``tx_sink`` (from ``port.source``),
    ``rx_source`` (to ``port.sink``), ``rx_words`` (to ``port.sink_words``: the SOF's
    length with a packet's first word), ``credit_valid``/``credit_words`` (to the
    port), ``drained`` (from the port), ``up``. PHY side: ``phy_tx``/``phy_rx``
    (:func:`phy_layout`). Counters: see :data:`COUNTERS` and :meth:`add_csrs`.

    Faults (``docs/link-layer.md``, "Link faults"): ``take_down`` and ``restart``
    (strobes), ``max_replays`` (8 bits), ``rx_buf_empty`` (from the router: this
    port's input buffer is empty; training completes only then), ``tx_room`` (to the
    router: a largest packet would be taken at once); status ``down_reason``,
    ``downs``, ``rx_expect`` and the evacuation port ``evac_*``.
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, replay_words: int | None = None,
                 max_frames: int = 64, ack_timeout: int | None = None, train_words: int = 4,
                 los_timeout: int = DEFAULT_LOS_TIMEOUT, max_replays: int = DEFAULT_MAX_REPLAYS,
                 dw: int = P.WORD_BITS):
        if replay_words is None:
            replay_words = default_replay_words(mtu, dw)
        if ack_timeout is None:
            ack_timeout = default_ack_timeout(mtu, dw)
        if los_timeout <= frame_beats(mtu, dw):
            raise ValueError(f"los_timeout must exceed one MTU frame ({frame_beats(mtu, dw)} beats)")
        if not 0 <= max_replays <= 255:
            raise ValueError("max_replays must be in 0..255")
        self.mtu = mtu
        self.dw = dw
        self.replay_words = replay_words
        self.max_frames = max_frames
        self.ack_timeout = ack_timeout
        self.los_timeout = los_timeout
        self.max_replays_reset = max_replays

        self.tx = tx = RestartInserter(_TX_COUNTERS)(LinkTX(mtu, replay_words, max_frames, ack_timeout,
                                                                  dw=dw))
        self.rx = rx = RestartInserter(_RX_COUNTERS)(LinkRX(mtu, dw=dw))
        self.tx_sink = tx.sink
        self.rx_source = rx.source
        self.rx_words = rx.words    # SOF length with a packet's first word (port.sink_words)
        self.phy_tx = tx.source
        self.phy_rx = rx.sink
        self.phy_hold = tx.hold    # from the PHY adapter: start no frame (LinkTX.hold)
        # From the PHY adapter: the lane is up (aligned, decoding cleanly). Training
        # counts the partner's TRAIN words only while it is high.
        self.phy_up = Signal(reset=1)
        self.credit_valid = Signal()
        self.credit_words = Signal(CREDIT_BITS)
        self.drained = Signal()
        self.rx_room = rx.room       # from the router: free words in this port's input buffer
        self.rx_routed = Signal()    # from the router: port.sink.valid (the word went there)
        self.up = Signal()
        self.link_state = Signal(2)
        # Faults.
        self.take_down = Signal()     # strobe: go DOWN (reason SOFTWARE)
        self.restart = Signal()       # strobe: leave DOWN, train again from scratch
        self.max_replays = Signal(8, reset=max_replays)
        self.rx_buf_empty = Signal(reset=1)   # from the router: this port's input buffer
        self.tx_room = tx.room                # to the router: a largest packet fits now
        self.down = Signal()
        self.down_reason = Signal(2)
        self.downs = Signal(32)
        self.rx_expect = rx.expected
        self.evac_first, self.evac_end = tx.evac_first, tx.evac_end
        self.evac_seq, self.evac_word = tx.evac_seq, tx.evac_word
        self.evac_len, self.evac_data = tx.evac_len, tx.evac_data
        # A stomped frame holds a bad packet: evacuating it must not resend it as good.
        # (Not yet a CSR, and the firmware does not check it: docs/link-layer.md.)
        self.evac_stomped = tx.evac_stomped

        # -- ACK/NAK between the two halves -------------------------------------------
        self.comb += [
            tx.ack_out.eq(rx.ack_out),
            tx.nak_req.eq(rx.nak_req),
            tx.far_valid.eq(rx.far_valid),
            tx.far_ack.eq(rx.far_ack),
            tx.far_nak.eq(rx.far_nak),
        ]

        # -- credits: cumulative count out, difference in ------------------------------
        # Both counts start from 0 when the partner is seen (after reset or a restart):
        # this end's input buffer is empty then, so the far end starts with full credits.
        # Cut-through: the router drains a frame's words while the frame still arrives,
        # before its CRC verdict. A drained word is credited only once the verdict of
        # its frame is known and good (or stomped): ``ahead`` = words of frames with a
        # verdict not yet drained (negative: the drains have run into the frame still
        # arriving, whose drained words are ``held``). A frame that will be replayed
        # (bad, not stomped) was reserved by the far end once, for the copy it
        # replays: its held words are dropped and its words still to come are owed
        # (``debt``), paid by the next drained words. Frames that went to the control
        # lane (not ``rx_routed``) never enter this buffer and are not counted.
        seen = Signal()
        drain_count = Signal(CREDIT_BITS)
        last_credit = Signal(CREDIT_BITS)
        ahead = Signal((CREDIT_BITS + 2, True))
        held = Signal(LEN_BITS + 1)
        debt = Signal(CREDIT_BITS)
        done = Signal()
        done_len = Signal(LEN_BITS)
        in_done = Signal()     # the drained word belongs to a frame with a verdict
        pay = Signal()
        credit_now = Signal()  # the drained word is credited at once
        held_now = Signal(LEN_BITS + 1)
        self.comb += [
            done.eq(self.rx_routed & (rx.done_words != 0)),
            done_len.eq(rx.done_words),
            in_done.eq(ahead > 0),
            pay.eq(self.drained & in_done & (debt != 0)),
            credit_now.eq(self.drained & in_done & (debt == 0)),
            held_now.eq(held + (self.drained & ~in_done)),
        ]
        self.sync += [
            If(~seen,
                ahead.eq(0), held.eq(0), debt.eq(0), drain_count.eq(0),
            ).Else(
                ahead.eq(ahead - self.drained + Mux(done, done_len, 0)),
                If(done,
                    held.eq(0),
                    If(rx.done_bad,
                        debt.eq(debt - pay + done_len - held_now),
                        drain_count.eq(drain_count + credit_now),
                    ).Else(
                        debt.eq(debt - pay),
                        drain_count.eq(drain_count + credit_now + held_now),
                    ),
                ).Else(
                    held.eq(held_now),
                    debt.eq(debt - pay),
                    drain_count.eq(drain_count + credit_now),
                ),
            ),
            self.credit_valid.eq(0),
            If(~seen,
                last_credit.eq(0),
            ).Elif(rx.far_valid & (rx.far_credit != last_credit),
                self.credit_valid.eq(1),
                self.credit_words.eq(rx.far_credit - last_credit),
                last_credit.eq(rx.far_credit),
            ),
        ]
        self.comb += tx.credit_out.eq(drain_count)

        # -- training ------------------------------------------------------------------
        # The partner is seen after train_words good TRAIN words in a row, and only
        # once this port's router input buffer is empty (after a restart it may still
        # hold packets received before the fault).
        train_cnt = Signal(max=train_words + 1)
        self.sync += [
            If(~seen,
                If(~self.phy_up | self.down,
                    train_cnt.eq(0),
                ).Elif(rx.train_valid,
                    If(train_cnt != train_words, train_cnt.eq(train_cnt + 1)),
                    If((train_cnt >= train_words - 1) & self.rx_buf_empty, seen.eq(1)),
                ).Elif(rx.any_valid,
                    train_cnt.eq(0),
                ),
            ),
            If(seen & ((rx.train_valid & rx.train_rdy) | rx.peer_up), self.up.eq(1)),
        ]

        # -- faults: loss of signal, replay limit, software; restart --------------------
        los_cnt = Signal(max=los_timeout + 1)
        self.sync += If(~self.up | rx.peer_up,
            los_cnt.eq(0),
        ).Elif(los_cnt != los_timeout,
            los_cnt.eq(los_cnt + 1),
        )
        go_down = Signal()
        why = Signal(2)
        self.comb += [
            If(self.take_down & ~self.down,
                go_down.eq(1), why.eq(LinkDownReason.SOFTWARE),
            ).Elif(self.up & (los_cnt == los_timeout),
                go_down.eq(1), why.eq(LinkDownReason.LOS),
            ).Elif(self.up & tx.replay_limit,
                go_down.eq(1), why.eq(LinkDownReason.REPLAY_LIMIT),
            ),
            tx.max_replays.eq(self.max_replays),
        ]
        restart = Signal()
        self.comb += [
            restart.eq(self.restart & self.down),
            tx.restart.eq(restart),
            rx.restart.eq(restart),
        ]
        self.sync += [
            If(go_down,
                self.down.eq(1),
                self.down_reason.eq(why),
                self.downs.eq(self.downs + 1),
            ).Elif(restart,
                self.down.eq(0),
                self.down_reason.eq(LinkDownReason.NONE),
            ),
            # Going down (or down) forgets the partner; a restart trains from scratch.
            If(go_down | self.down,
                seen.eq(0),
                self.up.eq(0),
                train_cnt.eq(0),
            ),
        ]
        self.comb += [
            rx.enable.eq(seen & ~self.down),
            rx.flush.eq(self.down),
            tx.down.eq(self.down),
            tx.rdy.eq(seen),
            tx.up.eq(self.up),
            self.link_state.eq(Mux(self.down, LinkState.DOWN,
                                   Mux(self.up, LinkState.UP,
                                       Mux(seen, LinkState.SEEN, LinkState.TRAINING)))),
        ]

        # -- counters --------------------------------------------------------------------
        for name, _, _ in COUNTERS:
            setattr(self, name, getattr(tx, name) if hasattr(tx, name) else getattr(rx, name))

    def port_connections(self, port, rx_sink=None, lane_tx=None) -> list:
        """Statements joining this link layer to a router's ``LinkPortIf``.

        ``rx_sink``: where the received packets go instead of ``port.sink`` (NicCore
        puts a :class:`paranic.hw.lane.LaneRx` there). ``lane_tx``: a
        :class:`paranic.hw.lane.LaneTx` between the port's packets and this link layer
        (its ``router_busy`` is left to the caller)."""
        if lane_tx is None:
            tx = [port.source.connect(self.tx_sink), port.tx_room.eq(self.tx_room)]
        else:
            tx = [
                port.source.connect(lane_tx.router_sink),
                lane_tx.source.connect(self.tx_sink),
                lane_tx.room_in.eq(self.tx_room),
                lane_tx.up.eq(self.up),
                port.tx_room.eq(lane_tx.room_out),
            ]
        return tx + [
            self.rx_source.connect(port.sink if rx_sink is None else rx_sink),
            # The packet's length from its SOF, beside its first word (a control-lane
            # packet never reaches the router's buffer, so it does not matter there).
            port.sink_words.eq(self.rx_words),
            self.rx_room.eq(port.buf_free),
            self.rx_routed.eq(port.sink.valid),
            port.credit_valid.eq(self.credit_valid),
            port.credit_words.eq(self.credit_words),
            self.drained.eq(port.drained),
            port.up.eq(self.up),
            self.rx_buf_empty.eq(port.buf_empty),
        ]

    def add_csrs(self, cross=NO_CROSS) -> None:
        """CSRs: the link state, every counter of :data:`COUNTERS`, and the fault
        registers (docs/link-layer.md, "Link faults").

        ``cross`` (:class:`~paranic.hw.cdc.CsrCross`; default none): the link layer runs
        in another clock domain than the CSR bank (``NicCore(nic_clock=True)``):
        storages cross as levels, ``take_down``/``restart`` as pulses, status and
        counters as whole words (a few cycles late: after writing ``evac_seq``/
        ``evac_word``, ``evac_data``/``evac_len`` follow some cycles later)."""
        c = cross
        self._link_state = CSRStatus(2, name="link_state",
                                     description="LinkState: 0 training, 1 partner seen, 2 up, 3 down")
        self.comb += self._link_state.status.eq(c.status(self.link_state))
        for name, width, desc in COUNTERS:
            csr = CSRStatus(width, name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(c.status(getattr(self, name)))
        st = [
            ("down_reason", 2, self.down_reason,
             "LinkDownReason: 0 none, 1 loss of signal, 2 replay limit, 3 taken down by software"),
            ("downs", 32, self.downs, "times the link went DOWN"),
            ("rx_expect", SEQ_BITS, self.rx_expect,
             "next sequence number the receiver expects (frames of the far end delivered, mod 2^SEQ_BITS)"),
            ("evac_first", SEQ_BITS, self.evac_first, "oldest unacknowledged frame (sequence number)"),
            ("evac_end", SEQ_BITS, self.evac_end, "one past the newest frame in the replay buffer"),
            ("evac_len", LEN_BITS, self.evac_len, "packet words of frame evac_seq (valid while DOWN)"),
            ("evac_data", len(self.evac_data), self.evac_data, "word evac_word of frame evac_seq (valid while DOWN)"),
        ]
        for name, width, sig, desc in st:
            csr = CSRStatus(width, name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(c.status(sig))
        self._take_down = CSR(name="take_down")
        self._restart = CSR(name="restart")
        self._max_replays = CSRStorage(8, reset=self.max_replays_reset, name="max_replays",
                                       description="replay rounds without ACK progress before DOWN (0: never)")
        self._evac_seq = CSRStorage(SEQ_BITS, name="evac_seq", description="frame the evacuation port reads")
        self._evac_word = CSRStorage(LEN_BITS, name="evac_word", description="word of frame evac_seq to read")
        self.comb += [
            self.take_down.eq(c.pulse(self._take_down.re)),
            self.restart.eq(c.pulse(self._restart.re)),
            self.max_replays.eq(c.level(self._max_replays.storage, self.max_replays_reset)),
            self.evac_seq.eq(c.level(self._evac_seq.storage)),
            self.evac_word.eq(c.level(self._evac_word.storage)),
        ]


# ---------------------------------------------------------------------------
