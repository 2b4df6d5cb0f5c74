"""Link layer, receive side: checks every word, delivers frames, reads the far end's words.

Delivers in-sequence frames to the router as they arrive, cut-through (``error=1`` on
the last beat of a bad frame: the packet is dropped at the next store-and-forward
buffer or stomped on the next link, and the far end replays it; a *stomped* frame,
already bad when it was sent, is delivered the same way but not replayed),
discards everything else, and extracts ACK/NAK/credits and training from the far
end's control words. ``docs/link-layer.md`` has the protocol.
"""

from __future__ import annotations

from migen import Cat, Constant, If, Mux, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P
from paranic.spec.link import (CRC16_INIT, CRC16_POLY, CRC16_XOROUT, CRC32_INIT, CRC32_POLY,
                               CRC32_STOMP, CRC32_XOROUT, CREDIT_BITS, CTL_BODY_BITS, LEN_BITS, SEQ_BITS, CtlKind)

from ..common import hdr, packet_layout
from ..phy import phy_layout
from .crc import crc_next
from .ctl import ctl_slice


class LinkRX(LiteXModule):
    """Deframer and checker.

    PHY side: ``sink`` (phy_layout; ``valid`` honoured, ``ready`` always high).
    Router side: ``source`` (packet_layout, not registered: a word leaves in the cycle the
    PHY delivers the next one; ``ready`` is expected high
    because the router's credits guarantee room, a refused word is counted in
    ``rx_overflows`` and poisons the packet).

    A frame is delivered while it arrives, one word behind the PHY, so that the last
    packet word can carry ``error`` once the CRC trailer has been checked: the last word
    leaves in the cycle the trailer arrives (the PHY's word is decoded as it arrives,
    there is no input or output register). Only a
    frame whose SOF carries the expected sequence number is delivered; a frame cut
    short by a control word ends with ``error=1`` after fewer words than its SOF
    announced (never more).

    Outputs to the transmit side: ``ack_out`` (last in-order sequence number),
    ``nak_req`` (pulse), ``far_*`` (fields of every good SOF/STATUS word).
    Training inputs/outputs: ``enable`` (accept frames and far_* only once the
    partner's training was heard), ``train_valid``/``train_rdy`` (a good TRAIN word),
    ``peer_up`` (a good SOF/STATUS word: the partner is up).

    ``words``: with a packet's first word (``source.valid & source.first``), its length
    in words from the SOF control word (checked by its CRC-16, unlike the packet's
    header, which only the CRC-32 at the tail checks); 0 otherwise. The router
    reserves buffer room and credits by it.

    A frame whose trailer is the good CRC-32 XOR :data:`CRC32_STOMP` was stomped by
    the sender (its packet went bad before it reached this link): it is delivered with
    ``error=1``, counted in ``rx_stomped``, acknowledged, and not NAKed.

    ``room`` (from the router): free words in the input buffer. A frame is accepted
    only when its SOF's length fits; otherwise it is refused (counted in
    ``rx_refused``) and NAKed, and the far end replays it later. The far end's credits
    guarantee the room, except while the copy of a bad frame (to be replayed) still
    takes some. ``done_words``/``done_bad``: with the last word of a delivered frame,
    its SOF length and whether it will be replayed (bad, not stomped): the link layer
    credits a frame's drained words only once this verdict is known.

    ``flush`` (the link is DOWN): the input is ignored; a frame being delivered is cut
    (its last word goes out with ``error=1`` if any went out). ``expected`` is the
    next sequence number to deliver (the ``rx_expect`` CSR).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, dw: int = P.WORD_BITS):
        max_words = P.packet_beats(mtu, dw)
        min_words = P.packet_beats(0, dw)    # the header alone
        self.sink = sink = stream.Endpoint(phy_layout(dw))
        self.source = source = stream.Endpoint(packet_layout(dw))
        self.enable = Signal()
        self.ack_out = Signal(SEQ_BITS)
        self.nak_req = Signal()
        self.far_valid = Signal()
        self.far_ack = Signal(SEQ_BITS)
        self.far_nak = Signal()
        self.far_credit = Signal(CREDIT_BITS)
        self.train_valid = Signal()
        self.train_rdy = Signal()
        self.peer_up = Signal()
        self.any_valid = Signal()  # a word arrived this cycle
        self.flush = Signal()
        # Counters.
        self.rx_packets = Signal(32)
        self.rx_bytes = Signal(64)
        self.crc_errors = Signal(32)
        self.ctrl_errors = Signal(32)
        self.seq_errors = Signal(32)
        self.rx_overflows = Signal(32)
        self.rx_stomped = Signal(32)
        self.words = Signal(LEN_BITS)
        self.done_words = Signal(LEN_BITS)
        self.done_bad = Signal()
        self.rx_refused = Signal(32)
        self.room = Signal(16, reset=2**16 - 1)

        self.comb += sink.ready.eq(1)

        # -- input register and word decode ------------------------------------------
        d_valid = Signal()
        d_data = Signal(dw)
        d_ctrl = Signal()
        check_ok = Signal()     # the control-word check of d_data matches
        # The PHY's word is decoded in the cycle it arrives (no input register: the PHY
        # adapters' outputs are registered; the CRC-16 check is about three LUT levels).
        self.comb += [
            d_valid.eq(sink.valid),
            d_data.eq(sink.data),
            d_ctrl.eq(sink.ctrl),
            check_ok.eq((crc_next(CRC16_INIT, sink.data[:CTL_BODY_BITS], 16, CRC16_POLY)
                         ^ CRC16_XOROUT) == ctl_slice(sink.data, "check")),
        ]
        dv = Signal()   # a word to look at (none while flushed)
        self.comb += dv.eq(d_valid & ~self.flush)
        kind = Signal(3)
        f_len = Signal(LEN_BITS)
        f_seq = Signal(SEQ_BITS)
        c_sof, c_status, c_train, c_bad = Signal(), Signal(), Signal(), Signal()
        is_data = Signal()
        self.comb += [
            kind.eq(ctl_slice(d_data, "kind")),
            f_len.eq(ctl_slice(d_data, "len")),
            f_seq.eq(ctl_slice(d_data, "seq")),
            c_sof.eq(dv & d_ctrl & check_ok & (kind == CtlKind.SOF) &
                     (f_len >= min_words) & (f_len <= max_words)),
            c_status.eq(dv & d_ctrl & check_ok & (kind == CtlKind.STATUS)),
            c_train.eq(dv & d_ctrl & check_ok & (kind == CtlKind.TRAIN)),
            c_bad.eq(dv & d_ctrl & ~c_sof & ~c_status & ~c_train),
            is_data.eq(dv & ~d_ctrl),
            self.far_valid.eq(self.enable & (c_sof | c_status)),
            self.far_ack.eq(ctl_slice(d_data, "ack")),
            self.far_nak.eq(ctl_slice(d_data, "nak")),
            self.far_credit.eq(ctl_slice(d_data, "credit")),
            self.train_valid.eq(c_train),
            self.train_rdy.eq(ctl_slice(d_data, "rdy")),
            self.peer_up.eq(c_sof | c_status),
            self.any_valid.eq(dv),
        ]

        # -- sequence state ------------------------------------------------------------
        self.expected = expected = Signal(SEQ_BITS)
        nak_sent = Signal()
        self.comb += self.ack_out.eq(expected - 1)
        seq_diff = Signal(SEQ_BITS)
        seq_ahead = Signal()    # SOF seq is later than expected: frames were lost
        self.comb += [
            seq_diff.eq(f_seq - expected),
            # SOF: a later frame than expected (frames were lost); STATUS: the sender
            # has sent frames we do not have.
            seq_ahead.eq((seq_diff != 0) & ~seq_diff[SEQ_BITS - 1]),
        ]

        # -- frame state ---------------------------------------------------------------
        in_frame = Signal()     # inside a frame (counting its words)
        accept = Signal()       # ... and delivering it
        remaining = Signal(LEN_BITS)
        crc = Signal(32)
        crc_good = Signal()
        crc_stomp = Signal()    # the trailer of a stomped frame
        self.comb += [
            crc_good.eq(d_data == Cat(crc ^ CRC32_XOROUT, Constant(0, dw - 32))),
            crc_stomp.eq(d_data == Cat(crc ^ (CRC32_XOROUT ^ CRC32_STOMP), Constant(0, dw - 32))),
        ]
        frame_len = Signal(LEN_BITS)   # the SOF's length of the frame being delivered
        hold = Signal(dw)
        hold_valid = Signal()
        hold_first = Signal()
        frame_bytes = Signal(P.HEADER_FIELD["length"].width)
        poisoned = Signal()     # a word of this packet was refused by the router

        # Towards the router: the held word leaves in the cycle the next word (or the
        # trailer, with the CRC verdict) arrives, without an output register.
        emit = Signal()
        emit_last = Signal()
        emit_error = Signal()
        emit_replay = Signal()  # the packet ends bad and will come again (not stomped)
        o_valid = Signal()
        self.comb += [
            o_valid.eq(emit),
            self.done_words.eq(Mux(emit & emit_last, frame_len, 0)),
            self.done_bad.eq(emit_replay),
            self.words.eq(Mux(emit & hold_first, frame_len, 0)),
            source.valid.eq(emit),
            source.data.eq(hold),
            source.first.eq(hold_first),
            source.last.eq(emit_last),
            source.error.eq(emit_error),
        ]
        self.sync += If(o_valid & ~source.ready, self.rx_overflows.eq(self.rx_overflows + 1))

        # Frame events.
        refuse = Signal()       # the frame announced by this SOF does not fit: NAK it
        start = Signal()        # accept the frame announced by this SOF
        skip = Signal()         # count the words of this SOF's frame without delivering
        abort = Signal()        # the current frame is cut short
        after_abort = Signal()  # the rest of a cut frame may follow as stray data words
        want_nak = Signal()
        self.comb += [
            start.eq(self.enable & c_sof & (seq_diff == 0) & (f_len <= self.room)),
            refuse.eq(self.enable & c_sof & (seq_diff == 0) & (f_len > self.room)),
            skip.eq(self.enable & c_sof & ((seq_diff != 0) | refuse)),
        ]
        self.comb += self.nak_req.eq(want_nak & ~nak_sent)
        self.sync += [
            If(self.nak_req, nak_sent.eq(1)),
            If(start, nak_sent.eq(0)),
        ]

        self.sync += [
            If(in_frame,
                If(is_data,
                    If(remaining != 0,
                        # A packet word.
                        If(accept,
                            crc.eq(crc_next(crc, d_data, 32, CRC32_POLY)),
                            hold.eq(d_data),
                            hold_valid.eq(1),
                            hold_first.eq(~hold_valid),
                            If(~hold_valid, frame_bytes.eq(hdr(d_data, "length"))),
                        ),
                        remaining.eq(remaining - 1),
                    ).Else(
                        # The CRC trailer.
                        in_frame.eq(0),
                        hold_valid.eq(0),
                        If(accept,
                            If(crc_good & ~poisoned,
                                expected.eq(expected + 1),
                                self.rx_packets.eq(self.rx_packets + 1),
                                self.rx_bytes.eq(self.rx_bytes + frame_bytes),
                            ).Elif(crc_stomp & ~poisoned,
                                # Intact on this link, bad before it: in sequence,
                                # acknowledged, delivered with error, not replayed.
                                expected.eq(expected + 1),
                                self.rx_stomped.eq(self.rx_stomped + 1),
                            ).Else(
                                self.crc_errors.eq(self.crc_errors + 1),
                            ),
                        ),
                    ),
                ).Elif(c_sof | c_train | c_bad | self.flush,
                    in_frame.eq(0),
                    hold_valid.eq(0),
                ),
            ),
            If(start,
                in_frame.eq(1), accept.eq(1),
                remaining.eq(f_len),
                frame_len.eq(f_len),
                crc.eq(CRC32_INIT),
                hold_valid.eq(0),
                poisoned.eq(0),
            ).Elif(skip,
                in_frame.eq(1), accept.eq(0),
                remaining.eq(f_len),
                If(refuse,
                    self.rx_refused.eq(self.rx_refused + 1),
                ).Else(
                    self.seq_errors.eq(self.seq_errors + 1),
                ),
            ),
            If(c_bad | (abort & ~self.flush), self.ctrl_errors.eq(self.ctrl_errors + 1)),
            If(o_valid & ~source.ready, poisoned.eq(1)),
            If(abort, after_abort.eq(1)).Elif(c_sof | c_status | c_train, after_abort.eq(0)),
        ]
        # What leaves towards the router this cycle, and NAK decisions.
        trailer = Signal()
        self.comb += [
            trailer.eq(in_frame & is_data & (remaining == 0)),
            abort.eq(in_frame & (c_sof | c_train | c_bad | self.flush)),
            If(in_frame & accept & is_data & (remaining != 0) & hold_valid,
                emit.eq(1),
            ).Elif(accept & trailer,
                emit.eq(hold_valid), emit_last.eq(1),
                emit_error.eq(~crc_good | poisoned),
                emit_replay.eq(~(crc_good | crc_stomp) | poisoned),
            ).Elif(accept & abort & hold_valid & ~hold_first,
                # Cut short after at least one word went out: end it with an error.
                emit.eq(1), emit_last.eq(1), emit_error.eq(1), emit_replay.eq(1),
            ),
            want_nak.eq(
                # a frame we wanted turned out bad
                (accept & trailer & (~(crc_good | crc_stomp) | poisoned)) | (accept & abort) |
                # a later frame than expected: some were lost
                (skip & seq_ahead) | refuse |
                # data words outside any frame: its SOF was lost
                (self.enable & ~in_frame & is_data & ~after_abort) |
                # the sender has sent frames we do not have
                (self.enable & ~in_frame & c_status & seq_ahead)
            ),
        ]


# ---------------------------------------------------------------------------
