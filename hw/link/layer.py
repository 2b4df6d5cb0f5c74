"""Link layer: one end of a cable, reliable framing, credits and training over a PHY lane.

:class:`LinkLayer` sits between a router link port (:class:`paranic.hw.common.LinkPortIf`)
and a PHY adapter that moves one line word (64 data bits + 1 control flag,
:func:`paranic.hw.phy.phy_layout`) per cycle in each direction. It joins
:class:`~paranic.hw.link.tx.LinkTX` and :class:`~paranic.hw.link.rx.LinkRX`, runs link
training and holds the counters and CSRs.
"""

from __future__ import annotations

from migen import If, Mux, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P
from paranic.spec.link import CREDIT_BITS, LinkState, frame_words

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
    ("rx_overflows", 32, "words the router's input did not accept (credit violation; should stay 0)"),
)


# ---------------------------------------------------------------------------


def default_replay_words(mtu: int) -> int:
    """Replay buffer depth: room for four MTU frames, rounded up to a power of two."""
    return 1 << (4 * frame_words(mtu) - 1).bit_length()


def default_ack_timeout(mtu: int) -> int:
    """Cycles without ACK progress before a replay: two MTU frames each way plus margin."""
    return 4 * frame_words(mtu) + 256


class LinkLayer(LiteXModule):
    """One end of a cable: reliable framing, credits and training over a PHY lane.

    Parameters
    ----------
    mtu : largest payload in bytes (frames up to ``packet_words(mtu)`` words).
    replay_words : depth of the replay buffer in 64-bit words (power of two, at
        least one MTU packet; default :func:`default_replay_words`).
    max_frames : frames in flight without ACK (power of two, 2..128).
    ack_timeout : cycles without ACK progress, while frames are outstanding, before
        everything outstanding is replayed (default :func:`default_ack_timeout`).
    train_words : consecutive good TRAIN words needed to hear the partner.

    Router side (names as in ``LinkPortIf``): ``tx_sink`` (from ``port.source``),
    ``rx_source`` (to ``port.sink``), ``credit_valid``/``credit_words`` (to the
    port), ``drained`` (from the port), ``up``. PHY side: ``phy_tx``/``phy_rx``
    (:func:`phy_layout`). Counters: see :data:`COUNTERS` and :meth:`add_csrs`.
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, replay_words: int | None = None,
                 max_frames: int = 64, ack_timeout: int | None = None, train_words: int = 4):
        if replay_words is None:
            replay_words = default_replay_words(mtu)
        if ack_timeout is None:
            ack_timeout = default_ack_timeout(mtu)
        self.mtu = mtu
        self.replay_words = replay_words
        self.max_frames = max_frames
        self.ack_timeout = ack_timeout

        self.tx = tx = LinkTX(mtu, replay_words, max_frames, ack_timeout)
        self.rx = rx = LinkRX(mtu)
        self.tx_sink = tx.sink
        self.rx_source = rx.source
        self.phy_tx = tx.source
        self.phy_rx = rx.sink
        self.phy_hold = tx.hold    # from the PHY adapter: start no frame (LinkTX.hold)
        # From the PHY adapter: the lane is up (aligned, decoding cleanly). Training
        # counts the partner's TRAIN words only while it is high.
        self.phy_up = Signal(reset=1)
        self.credit_valid = Signal()
        self.credit_words = Signal(CREDIT_BITS)
        self.drained = Signal()
        self.up = Signal()
        self.link_state = Signal(2)

        # -- ACK/NAK between the two halves -------------------------------------------
        self.comb += [
            tx.ack_out.eq(rx.ack_out),
            tx.nak_req.eq(rx.nak_req),
            tx.far_valid.eq(rx.far_valid),
            tx.far_ack.eq(rx.far_ack),
            tx.far_nak.eq(rx.far_nak),
        ]

        # -- credits: cumulative count out, difference in ------------------------------
        drain_count = Signal(CREDIT_BITS)
        last_credit = Signal(CREDIT_BITS)
        self.sync += [
            If(self.drained, drain_count.eq(drain_count + 1)),
            self.credit_valid.eq(0),
            If(rx.far_valid & (rx.far_credit != last_credit),
                self.credit_valid.eq(1),
                self.credit_words.eq(rx.far_credit - last_credit),
                last_credit.eq(rx.far_credit),
            ),
        ]
        self.comb += tx.credit_out.eq(drain_count)

        # -- training ------------------------------------------------------------------
        seen = Signal()
        train_cnt = Signal(max=train_words + 1)
        self.sync += [
            If(~seen,
                If(~self.phy_up,
                    train_cnt.eq(0),
                ).Elif(rx.train_valid,
                    train_cnt.eq(train_cnt + 1),
                    If(train_cnt == train_words - 1, seen.eq(1)),
                ).Elif(rx.any_valid,
                    train_cnt.eq(0),
                ),
            ),
            If(seen & ((rx.train_valid & rx.train_rdy) | rx.peer_up), self.up.eq(1)),
        ]
        self.comb += [
            rx.enable.eq(seen),
            tx.rdy.eq(seen),
            tx.up.eq(self.up),
            self.link_state.eq(Mux(self.up, LinkState.UP, Mux(seen, LinkState.SEEN,
                                                               LinkState.TRAINING))),
        ]

        # -- counters --------------------------------------------------------------------
        for name, _, _ in COUNTERS:
            setattr(self, name, getattr(tx, name) if hasattr(tx, name) else getattr(rx, name))

    def port_connections(self, port) -> list:
        """Statements joining this link layer to a router's ``LinkPortIf``."""
        return [
            port.source.connect(self.tx_sink),
            self.rx_source.connect(port.sink),
            port.credit_valid.eq(self.credit_valid),
            port.credit_words.eq(self.credit_words),
            self.drained.eq(port.drained),
            port.up.eq(self.up),
        ]

    def add_csrs(self) -> None:
        """CSRStatus registers for the link state and every counter of :data:`COUNTERS`."""
        self._link_state = CSRStatus(2, name="link_state",
                                     description="LinkState: 0 training, 1 partner seen, 2 up")
        self.comb += self._link_state.status.eq(self.link_state)
        for name, width, desc in COUNTERS:
            csr = CSRStatus(width, name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(getattr(self, name))


# ---------------------------------------------------------------------------
