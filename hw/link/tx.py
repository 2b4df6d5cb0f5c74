"""Link layer, transmit side: framer, replay buffer (go-back-N), ACK timer, control words.

Frames router packets (SOF control word, packet words, CRC-32 trailer), keeps every
frame in a replay buffer until the far end acknowledges it, and replays go-back-N on
a NAK or an ACK timeout. Between frames (and as fillers when the router pauses inside
a packet) it sends STATUS control words carrying the cumulative ACK, NAK and the
cumulative count of drained words (credits). ``docs/link-layer.md`` has the protocol.
"""

from __future__ import annotations

from migen import Cat, Constant, If, Memory, Mux, Signal
from migen.fhdl.bitcontainer import log2_int
from migen.genlib.fsm import FSM, NextState, NextValue

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P
from paranic.spec.link import (CRC16_INIT, CRC16_POLY, CRC16_XOROUT, CRC32_INIT, CRC32_POLY,
                               CRC32_STOMP, CRC32_XOROUT, CREDIT_BITS, CTL_BODY_BITS, LEN_BITS, SEQ_BITS, CtlKind)

from ..common import hdr, packet_beats, packet_layout
from ..phy import phy_layout
from .crc import crc_next
from .ctl import ctl_slice


class LinkTX(LiteXModule):
    """Framer, replay buffer (go-back-N), ACK timer and control-word generator.

    Router side: ``sink`` (packet_layout). PHY side: ``source`` (phy_layout, one
    word every cycle, not registered: the PHY adapter registers it; ``source.ready`` is
    assumed high). ``ready`` of
    ``sink`` depends only on the internal state, never on ``sink.valid``.

    From the receive side: ``ack_out``/``nak_req``/``credit_out`` (what to tell the
    far end) and ``far_valid``/``far_ack``/``far_nak`` (what the far end told us).

    From the PHY: ``hold``. While it is high no frame starts: at a frame boundary the
    transmitter sends STATUS fillers instead, which a PHY may drop (:func:`is_filler`).
    A PHY whose line is slower than one word per cycle, or that must drop words for
    clock compensation, uses it; a frame already started is never held.

    Faults (``docs/link-layer.md``, "Link faults"): ``down`` (from the link state)
    freezes the transmitter: no word leaves (``source.valid=0``), no frame is replayed,
    no ACK is taken; a packet the router is handing over is still completed into the
    replay buffer (and a packet it had already granted is still taken), so every packet
    accepted and not acknowledged stays there. ``evac_seq``/``evac_word`` select a frame
    and a word of it; ``evac_len``/``evac_data`` show them while ``down``.
    ``replay_limit`` rises when more than ``max_replays`` replay rounds (NAKs or ACK
    timeouts) happened without the far end's ACK advancing (``max_replays=0``: never).
    Stomping (cut-through, ``docs/link-layer.md``): a packet whose last word carries
    ``error`` (it went bad before this link, and its head has already left), or whose
    words disagree with its header's length, is sent as a *stomped* frame: its
    trailer is the good CRC-32 XOR :data:`CRC32_STOMP`, so the far end drops it
    without asking for a replay. Replays of it are stomped too (a bit per frame in the
    replay table). ``tx_stomped`` counts the packets framed stomped.

    ``room`` (registered): a new packet of the largest size would be accepted at once
    (the router grants a packet to the link only then, so a granted packet never waits).

    ``dw`` (64, 128, 256): the datapath width; one beat per cycle on both sides, and
    lengths, the replay buffer and credits in beats. A control word or the CRC trailer
    takes a whole beat (its low 64 bits; the rest zero); the CRC-32 runs over whole
    beats (a packet's last beat with its zero words).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, replay_words: int = 1024, max_frames: int = 64,
                 ack_timeout: int = 1024, dw: int = P.WORD_BITS):
        max_words = P.packet_beats(mtu, dw)
        if max_words >= 1 << LEN_BITS:
            raise ValueError("MTU too large for the SOF length field")
        aw = log2_int(replay_words)  # raises unless a power of two
        fw = log2_int(max_frames)
        if replay_words < max_words:
            raise ValueError("the replay buffer must hold at least one MTU packet")
        if not 2 <= max_frames <= 1 << (SEQ_BITS - 1):
            raise ValueError("max_frames must be a power of two in 2..128")

        self.sink = sink = stream.Endpoint(packet_layout(dw))
        self.source = source = stream.Endpoint(phy_layout(dw))
        self.up = Signal()          # link trained: send frames/STATUS instead of TRAIN
        self.hold = Signal()        # from the PHY: start no frame, send fillers
        self.rdy = Signal()         # TRAIN.rdy: partner's training received
        self.ack_out = Signal(SEQ_BITS)
        self.nak_req = Signal()     # pulse: the receiver wants a NAK sent
        self.credit_out = Signal(CREDIT_BITS)
        self.far_valid = Signal()   # a good SOF/STATUS word arrived: far_ack/far_nak valid
        self.far_ack = Signal(SEQ_BITS)
        self.far_nak = Signal()
        # Status.
        self.tx_packets = Signal(32)
        self.tx_bytes = Signal(64)
        self.replays = Signal(32)
        self.tx_stomped = Signal(32)
        self.naks = Signal(32)
        self.naks_sent = Signal(32)
        self.timeouts = Signal(32)
        self.outstanding = Signal(SEQ_BITS)  # frames sent and not yet acknowledged
        self.idle = Signal()  # nothing outstanding and nothing being sent
        # Faults.
        self.down = Signal()
        self.max_replays = Signal(8)
        self.replay_limit = Signal()
        self.room = Signal(reset=1)
        self.evac_first = Signal(SEQ_BITS)   # oldest unacknowledged frame
        self.evac_end = Signal(SEQ_BITS)     # one past the newest frame stored
        self.evac_seq = Signal(SEQ_BITS)
        self.evac_word = Signal(LEN_BITS)
        self.evac_len = Signal(LEN_BITS)
        self.evac_data = Signal(dw)
        self.evac_stomped = Signal()         # frame evac_seq was sent stomped (bad packet)

        # Replay buffer: packet words, and per frame (indexed by seq mod max_frames)
        # its start address, length and stomp bit.
        self.mem = mem = Memory(dw, replay_words)
        self.wrport = wr = mem.get_port(write_capable=True)
        self.rdport = rd = mem.get_port()
        self.table = table = Memory(aw + 1 + LEN_BITS + 1, max_frames)
        self.tport_w = tw = table.get_port(write_capable=True)
        self.tport_rel = trel = table.get_port(async_read=True)
        self.tport_rep = trep = table.get_port(async_read=True)

        # -- sequence state -------------------------------------------------
        next_seq = Signal(SEQ_BITS)
        acked = Signal(SEQ_BITS, reset=(1 << SEQ_BITS) - 1)
        wp = Signal(aw + 1)     # replay buffer write pointer (one wrap bit)
        tail = Signal(aw + 1)   # start of the oldest unacknowledged frame
        used = Signal(aw + 1)
        self.comb += [
            self.outstanding.eq(next_seq - acked - 1),
            used.eq(wp - tail),
        ]

        # -- ACK/NAK from the far end -------------------------------------------
        far_delta = Signal(SEQ_BITS)
        ack_ok = Signal()
        ack_moves = Signal()
        all_acked = Signal()
        self.comb += [
            far_delta.eq(self.far_ack - acked),
            ack_ok.eq(self.far_valid & ~self.down & (far_delta <= self.outstanding)),
            ack_moves.eq(ack_ok & (far_delta != 0)),
            all_acked.eq((self.far_ack + 1)[:SEQ_BITS] == next_seq),
            trel.adr.eq((self.far_ack + 1)[:fw]),
        ]
        self.sync += If(ack_moves,
            acked.eq(self.far_ack),
            tail.eq(Mux(all_acked, wp, trel.dat_r[:aw + 1])),
        )
        replay_pending = Signal()
        replay_set = Signal()
        replay_take = Signal()  # the boundary consumed the pending request
        self.sync += [
            If(ack_ok & self.far_nak, self.naks.eq(self.naks + 1)),
            If(replay_set, replay_pending.eq(1)).Elif(replay_take, replay_pending.eq(0)),
        ]
        nak_set = Signal()
        self.comb += nak_set.eq(ack_ok & self.far_nak & ~all_acked)

        # -- ACK timer -----------------------------------------------------------
        timer = Signal(max=ack_timeout + 1)
        timeout = Signal()
        self.comb += [
            timeout.eq(timer == ack_timeout),
            replay_set.eq(nak_set | timeout),
        ]
        self.sync += [
            If((self.outstanding == 0) | ack_moves | replay_take | nak_set | self.down,
                timer.eq(0),
            ).Elif(timeout,
                timer.eq(0),
                self.timeouts.eq(self.timeouts + 1),
            ).Else(
                timer.eq(timer + 1),
            )
        ]

        # -- escalation: replay rounds without ACK progress ---------------------------
        rounds = Signal(9)
        self.sync += If(ack_moves,
            rounds.eq(replay_set),
        ).Elif(replay_set & (rounds != 256),
            rounds.eq(rounds + 1),
        )
        self.comb += self.replay_limit.eq((self.max_replays != 0) & (rounds > self.max_replays))

        # -- NAK to send -------------------------------------------------------
        nak_pending = Signal()
        emit_ctl = Signal()  # this cycle sends a SOF/STATUS word (carries ack/nak/credit)
        self.sync += [
            nak_pending.eq((nak_pending & ~emit_ctl) | self.nak_req),
            If(emit_ctl & nak_pending & ~self.down, self.naks_sent.eq(self.naks_sent + 1)),
        ]

        # -- word to send -------------------------------------------------------------
        # The FSM decides in cycle t what leaves in cycle t: a control word (its 48-bit
        # body and CRC-16 check), a data word, or the CRC trailer.
        w_ctl = Signal()
        w_data = Signal(dw)
        w_crc = Signal()        # the word is a packet word: include it in the CRC
        w_trailer = Signal()
        c_kind = Signal(3)
        c_seq = Signal(SEQ_BITS)
        c_len = Signal(LEN_BITS)
        body = Signal(CTL_BODY_BITS)
        self.comb += [
            ctl_slice(body, "kind").eq(c_kind),
            ctl_slice(body, "ack").eq(Mux(c_kind == CtlKind.TRAIN, 0, self.ack_out)),
            ctl_slice(body, "nak").eq(nak_pending & (c_kind != CtlKind.TRAIN)),
            ctl_slice(body, "credit").eq(Mux(c_kind == CtlKind.TRAIN, 0, self.credit_out)),
            ctl_slice(body, "seq").eq(c_seq),
            ctl_slice(body, "len").eq(c_len),
            ctl_slice(body, "rdy").eq(self.rdy & (c_kind == CtlKind.TRAIN)),
        ]
        # No output register: the word the FSM decides in a cycle leaves in that cycle
        # (a control word's CRC-16 check is computed from its body, about three LUT
        # levels after the header word's length; the PHY adapters register their input).
        # The frame CRC-32 runs on the words sent, so the trailer is ready the cycle
        # after the last data word.
        w_stomp = Signal()      # the trailer is a stomped frame's
        crc = Signal(32)        # CRC-32 state over the packet words already sent
        check = Signal(16)
        self.comb += [
            check.eq(crc_next(CRC16_INIT, body, 16, CRC16_POLY) ^ CRC16_XOROUT),
            source.valid.eq(~self.down),
            source.ctrl.eq(w_ctl),
            If(w_ctl,
                source.data.eq(Cat(body, check)),
            ).Elif(w_trailer,
                source.data.eq(Cat(crc ^ Mux(w_stomp, CRC32_XOROUT ^ CRC32_STOMP, CRC32_XOROUT),
                                   Constant(0, 32))),
            ).Else(
                source.data.eq(w_data),
            ),
        ]
        self.sync += If(w_ctl & (c_kind == CtlKind.SOF),
            crc.eq(CRC32_INIT),
        ).Elif(w_crc,
            crc.eq(crc_next(crc, w_data, 32, CRC32_POLY)),
        )

        # -- frame length from the router's header word 0 -------------------------
        hlen = Signal(P.HEADER_FIELD["length"].width)
        plen = Signal(LEN_BITS + 4)
        len_w = Signal(LEN_BITS)
        self.comb += [
            hlen.eq(hdr(sink.data, "length")),
            plen.eq(packet_beats(hlen, dw)),
            len_w.eq(Mux(plen > max_words, max_words, plen)),
        ]

        # -- replay selection at a frame boundary ------------------------------------
        rp = Signal(SEQ_BITS)           # next frame to replay
        replaying = Signal()
        rp_in_window = Signal()
        rp_sel = Signal(SEQ_BITS)
        do_replay = Signal()
        self.comb += [
            rp_in_window.eq((rp - acked - 1)[:SEQ_BITS] < self.outstanding),
            # (rp_in_window == 0), not ~rp_in_window: Migen's simulator evaluates ~1 to
            # -2, which is true inside the OR, so it restarted every replay at acked+1.
            rp_sel.eq(Mux(replay_pending | (rp_in_window == 0), acked + 1, rp)),
            do_replay.eq((replay_pending | replaying) & (rp_sel != next_seq) & ~self.hold &
                         ~self.down),
            # While down the replay table serves the evacuation port.
            trep.adr.eq(Mux(self.down, self.evac_seq[:fw], rp_sel[:fw])),
        ]
        rep_start = Signal(aw + 1)
        rep_len = Signal(LEN_BITS)
        self.comb += [
            rep_start.eq(trep.dat_r[:aw + 1]),
            rep_len.eq(trep.dat_r[aw + 1:aw + 1 + LEN_BITS]),
        ]
        fresh_ok = Signal()
        # Down, a packet the router granted before the link went down is still taken
        # (``room`` promised it a place); nothing is sent anyway, so ``hold`` is moot.
        self.comb += fresh_ok.eq(sink.valid & sink.first & (~self.hold | self.down) &
                                 (self.outstanding < max_frames) &
                                 ((used + len_w) <= replay_words))

        remaining = Signal(LEN_BITS)
        rd_ptr = Signal(aw + 1)
        pad = Signal()
        stomp = Signal()        # the frame being sent is stomped
        fstart = Signal(aw + 1) # a fresh frame's start in the replay buffer
        flen = Signal(LEN_BITS)
        fresh_frame = Signal()  # the frame being sent is a fresh one (not a replay)

        self.fsm = fsm = FSM(reset_state="TRAIN")
        fsm.act("TRAIN",
            c_kind.eq(CtlKind.TRAIN),
            w_ctl.eq(1),
            If(self.up, NextState("BOUNDARY")),
        )
        fsm.act("BOUNDARY",
            emit_ctl.eq(1),
            w_ctl.eq(1),
            replay_take.eq(replay_pending & ~self.hold & ~self.down),
            If(~self.hold, NextValue(replaying, do_replay)),
            # Down: the replay buffer's read port serves the evacuation port.
            If(self.down, rd.adr.eq((rep_start + self.evac_word)[:aw])),
            If(do_replay,
                # Replay frame rp_sel.
                c_kind.eq(CtlKind.SOF), c_seq.eq(rp_sel), c_len.eq(rep_len),
                rd.adr.eq(rep_start[:aw]),
                NextValue(rd_ptr, rep_start + 1),
                NextValue(remaining, rep_len),
                NextValue(rp, rp_sel + 1),
                NextValue(self.replays, self.replays + 1),
                NextValue(stomp, trep.dat_r[aw + 1 + LEN_BITS]),
                NextValue(fresh_frame, 0),
                NextState("RDATA"),
            ).Elif(fresh_ok,
                # New frame from the router: its length is read off header word 0
                # before the word is accepted.
                c_kind.eq(CtlKind.SOF), c_seq.eq(next_seq), c_len.eq(len_w),
                tw.adr.eq(next_seq[:fw]), tw.dat_w.eq(Cat(wp, len_w, 0)), tw.we.eq(1),
                NextValue(stomp, 0),
                NextValue(fresh_frame, 1),
                NextValue(fstart, wp),
                NextValue(flen, len_w),
                NextValue(next_seq, next_seq + 1),
                NextValue(remaining, len_w),
                NextValue(pad, 0),
                NextValue(self.tx_packets, self.tx_packets + 1),
                NextValue(self.tx_bytes, self.tx_bytes + hlen),
                NextState("FDATA"),
            ).Elif(sink.valid & ~sink.first,
                # Words of a packet longer than its header says: drop them.
                c_kind.eq(CtlKind.STATUS), c_seq.eq(next_seq),
                NextState("DROP"),
            ).Else(
                c_kind.eq(CtlKind.STATUS), c_seq.eq(next_seq),
            ),
        )
        fsm.act("FDATA",
            sink.ready.eq(~pad),
            If(pad | sink.valid,
                w_data.eq(Mux(pad, 0, sink.data)),
                wr.adr.eq(wp[:aw]), wr.dat_w.eq(w_data), wr.we.eq(1),
                NextValue(wp, wp + 1),
                w_crc.eq(1),
                NextValue(remaining, remaining - 1),
                If(~pad & sink.last & (remaining != 1), NextValue(pad, 1)),
                # Bad packet (error on its last word), or one that ends before or runs
                # past its header's length: stomp the frame.
                If(~pad & (sink.error | (sink.last & (remaining != 1)) |
                           (~sink.last & (remaining == 1))),
                    NextValue(stomp, 1)),
                If(remaining == 1, NextState("CRC")),
            ).Else(
                # The router paused inside the packet: send a STATUS filler.
                emit_ctl.eq(1),
                c_kind.eq(CtlKind.STATUS), c_seq.eq(next_seq),
                w_ctl.eq(1),
            ),
        )
        fsm.act("RDATA",
            w_data.eq(rd.dat_r),
            rd.adr.eq(rd_ptr[:aw]),
            NextValue(rd_ptr, rd_ptr + 1),
            w_crc.eq(1),
            NextValue(remaining, remaining - 1),
            If(remaining == 1, NextState("CRC")),
            # Down: nobody hears the rest of a replayed frame; free the read port for
            # the evacuation port at once.
            If(self.down, NextState("BOUNDARY")),
        )
        fsm.act("CRC",
            w_trailer.eq(1),
            w_stomp.eq(stomp),
            # a fresh frame's stomp bit, for its replays
            If(fresh_frame,
                tw.adr.eq((next_seq - 1)[:fw]), tw.dat_w.eq(Cat(fstart, flen, stomp)),
                tw.we.eq(1),
                If(stomp, NextValue(self.tx_stomped, self.tx_stomped + 1)),
            ),
            NextState("BOUNDARY"),
        )
        fsm.act("DROP",
            sink.ready.eq(1),
            emit_ctl.eq(1),
            c_kind.eq(CtlKind.STATUS), c_seq.eq(next_seq),
            w_ctl.eq(1),
            If(sink.valid & sink.last, NextState("BOUNDARY")),
        )
        self.comb += self.idle.eq((self.outstanding == 0) & fsm.ongoing("BOUNDARY"))

        # -- room for a new packet, evacuation port ------------------------------------
        committed = Signal(aw + 2)   # buffer words in use once the frame being stored is in
        self.comb += committed.eq(used + Mux(fsm.ongoing("FDATA"), remaining, 0))
        self.sync += self.room.eq((self.outstanding < max_frames) &
                                  (committed + max_words <= replay_words))
        self.comb += [
            self.evac_first.eq(acked + 1),
            self.evac_end.eq(next_seq),
            self.evac_len.eq(rep_len),
            self.evac_stomped.eq(trep.dat_r[aw + 1 + LEN_BITS]),
            self.evac_data.eq(rd.dat_r),
        ]


# ---------------------------------------------------------------------------
