"""Link layer: reliable, credit-carrying framing of router packets over one PHY lane.

One :class:`LinkLayer` sits at each end of a cable, between a router link port
(:class:`paranic.hw.common.LinkPortIf`) and a PHY adapter that moves one 65-bit word
(64 data bits + 1 control flag) per cycle in each direction.

* :class:`LinkTX` frames router packets (SOF control word, packet words, CRC-32
  trailer), keeps every frame in a replay buffer until the far end acknowledges it,
  and replays go-back-N on a NAK or an ACK timeout. Between frames (and as fillers
  when the router pauses inside a packet) it sends STATUS control words carrying the
  cumulative ACK, NAK and the cumulative count of drained words (credits).
* :class:`LinkRX` checks every word, delivers in-sequence frames to the router as
  they arrive (``error=1`` on the last beat of a bad frame), discards everything
  else, and extracts ACK/NAK/credits from the far end's control words.
* :class:`LinkLayer` joins both, runs link training and holds the counters.
* :class:`LinkChannel` is a cable: two link layers and two :class:`SimPhy` wires,
  with the same constructor shape as the router's ``WireChannel``.

Control words (``ctrl=1``) all share one layout (:data:`CTL_FIELDS`): 48 bits of
fields protected by their own CRC-16, so a control word with a flipped bit is never
trusted. ``docs/link-layer.md`` describes the protocol in prose.
"""

from __future__ import annotations

import itertools
import operator
from enum import IntEnum
from functools import reduce

from migen import Cat, Constant, If, Memory, Module, Mux, Signal
from migen.fhdl.bitcontainer import log2_int
from migen.genlib.fsm import FSM, NextState, NextValue

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from paranic import protocol as P
from paranic.hw.common import hdr, packet_layout

__all__ = [
    "phy_layout", "CtlKind", "CTL_FIELDS", "CTL", "pack_ctl", "unpack_ctl", "crc32", "crc16",
    "crc_taps", "CRCEngine", "frame_words", "link_efficiency", "LinkTX", "LinkRX",
    "LinkLayer", "LinkChannel", "LinkState", "COUNTERS",
]


def phy_layout() -> list[tuple[str, int]]:
    """Layout of the PHY streams: one 64-bit word and its control flag per beat."""
    return [("data", P.WORD_BITS), ("ctrl", 1)]


# ---------------------------------------------------------------------------
# CRCs: a Python reference and a parallel (one word per cycle) Migen engine
# ---------------------------------------------------------------------------

#: CRC-32 of IEEE 802.3 / zlib, reflected form.
CRC32_POLY, CRC32_INIT, CRC32_XOROUT = 0xEDB88320, 0xFFFFFFFF, 0xFFFFFFFF
#: CRC-16/X-25 (CCITT polynomial 0x1021, reflected form 0x8408).
CRC16_POLY, CRC16_INIT, CRC16_XOROUT = 0x8408, 0xFFFF, 0xFFFF


def _crc_bits(bits, width: int, poly: int, init: int) -> int:
    crc = init
    for b in bits:
        fb = (crc ^ b) & 1
        crc >>= 1
        if fb:
            crc ^= poly
    return crc


def _bits_of(data: bytes):
    for byte in data:
        for i in range(8):
            yield (byte >> i) & 1


def crc32(data: bytes) -> int:
    """CRC-32 (same value as ``zlib.crc32``), bit-serial reference."""
    return _crc_bits(_bits_of(data), 32, CRC32_POLY, CRC32_INIT) ^ CRC32_XOROUT


def crc16(data: bytes) -> int:
    """CRC-16/X-25 (check value 0x906E for b"123456789"), bit-serial reference."""
    return _crc_bits(_bits_of(data), 16, CRC16_POLY, CRC16_INIT) ^ CRC16_XOROUT


def crc_taps(width: int, poly: int, data_width: int) -> list[tuple[list[int], list[int]]]:
    """XOR equations of a reflected CRC advanced by ``data_width`` bits at once.

    Data bits enter LSB first (bit 0 of a little-endian word is the first bit on the
    wire). Returns, for every bit of the next CRC state, the list of current-state
    bits and the list of data bits whose XOR gives it. Computed by running the
    bit-serial LFSR on symbolic values (sets of variables, XOR = symmetric difference).
    """
    state = [frozenset([("s", i)]) for i in range(width)]
    for j in range(data_width):
        fb = state[0] ^ frozenset([("d", j)])
        nxt = state[1:] + [frozenset()]
        for i in range(width):
            if (poly >> i) & 1:
                nxt[i] = nxt[i] ^ fb
        state = nxt
    return [(sorted(i for k, i in s if k == "s"), sorted(i for k, i in s if k == "d"))
            for s in state]


def crc_next(last, data, width: int, poly: int):
    """Migen expression: CRC state ``last`` (``width`` bits, or an int) advanced over ``data``.

    The step is linear: the XOR of one constant column per set input bit. For a
    reflected CRC, state bit ``j`` enters exactly like data bit ``j``, so the two are
    XORed first (64 terms for CRC-32 over a word instead of 96). Written per column
    the expression stays small, which keeps Verilator's C++ and Migen's simulator
    fast; synthesis sees the same XOR network as a per-bit formulation. Use it
    directly in ``sync`` statements on registered inputs.
    """
    data_width = len(data)
    taps = crc_taps(width, poly, data_width)
    s_cols, d_cols = [0] * width, [0] * data_width
    for i, (s_bits, d_bits) in enumerate(taps):
        for j in s_bits:
            s_cols[j] |= 1 << i
        for j in d_bits:
            d_cols[j] |= 1 << i

    def sbit(j):
        return Constant((last >> j) & 1, 1) if isinstance(last, int) else last[j]

    terms = []
    for j in range(max(width, data_width)):
        sc = s_cols[j] if j < width else 0
        dc = d_cols[j] if j < data_width else 0
        if sc and sc == dc:
            terms.append(Mux(data[j] ^ sbit(j), Constant(sc, width), 0))
            continue
        if sc:
            terms.append(Mux(sbit(j), Constant(sc, width), 0))
        if dc:
            terms.append(Mux(data[j], Constant(dc, width), 0))
    return reduce(operator.xor, terms)


class CRCEngine(Module):
    """Combinational CRC step: ``next`` = CRC state ``last`` advanced over ``data``.

    No init and no final XOR here: the users load ``CRC*_INIT`` and complement the
    result themselves. (The link layer itself uses :func:`crc_next` inside its
    ``sync`` statements.)
    """

    def __init__(self, data_width: int = P.WORD_BITS, width: int = 32, poly: int = CRC32_POLY):
        self.data = Signal(data_width)
        self.last = Signal(width)
        self.next = Signal(width)
        self.comb += self.next.eq(crc_next(self.last, self.data, width, poly))


# ---------------------------------------------------------------------------
# Control words
# ---------------------------------------------------------------------------


class CtlKind(IntEnum):
    """``kind`` of a control word (one-hot, so a kind never turns into another by one flip)."""

    SOF = 1     #: start of a data frame: seq + length of the frame, plus ACK/NAK/credits
    STATUS = 2  #: idle / filler: ACK/NAK/credits and the sender's next sequence number
    TRAIN = 4   #: link training (``rdy``: I have received your training words)


SEQ_BITS = 8
LEN_BITS = 11
CREDIT_BITS = 16
CTL_BODY_BITS = 48

#: Layout of a control word (``ctrl=1``). Bits 0..47 are covered by ``check``.
CTL_FIELDS: tuple[P.Field, ...] = (
    P.Field("kind", 0, 3, "CtlKind"),
    P.Field("ack", 3, SEQ_BITS, "SOF/STATUS: sequence number of the last frame received in order"),
    P.Field("nak", 11, 1, "SOF/STATUS: replay everything after `ack` (sent once per error)"),
    P.Field("credit", 12, CREDIT_BITS, "SOF/STATUS: words drained from the receiver's input buffer, cumulative mod 2**16"),
    P.Field("seq", 28, SEQ_BITS, "SOF: sequence number of this frame; STATUS: sequence number of the next new frame"),
    P.Field("len", 36, LEN_BITS, "SOF: packet words in this frame (2 .. packet_words(MTU))"),
    P.Field("rdy", 47, 1, "TRAIN: the sender has received the partner's training words"),
    P.Field("check", 48, 16, "CRC-16/X-25 over bits 0..47"),
)
CTL = {f.name: f for f in CTL_FIELDS}


def pack_ctl(**fields: int) -> int:
    """A control word (64-bit int) from fields; ``check`` is computed."""
    body = 0
    for name, val in fields.items():
        f = CTL[name]
        if name == "check" or val < 0 or val > f.mask:
            raise ValueError(f"bad control field {name}={val}")
        body |= val << f.offset
    return body | crc16(body.to_bytes(6, "little")) << CTL_BODY_BITS


def unpack_ctl(word: int) -> dict[str, int] | None:
    """Fields of a control word, or None when its check fails or its kind is unknown."""
    body = word & ((1 << CTL_BODY_BITS) - 1)
    if crc16(body.to_bytes(6, "little")) != word >> CTL_BODY_BITS:
        return None
    out = {f.name: (word >> f.offset) & f.mask for f in CTL_FIELDS}
    if out["kind"] not in {k.value for k in CtlKind}:
        return None
    return out


def _ctl_slice(sig, name: str):
    f = CTL[name]
    return sig[f.offset:f.offset + f.width]


def frame_words(payload_bytes: int) -> int:
    """PHY words of one data frame: SOF + NIC header + payload + CRC trailer."""
    return 1 + P.packet_words(payload_bytes) + 1


def link_efficiency(payload_bytes: int) -> float:
    """Payload bytes over raw link bytes for a back-to-back stream of equal packets.

    Raw bytes are 8 per PHY word (the 64-bit data field; the control flag and the
    PHY's own line code are not counted). Per packet the link sends the SOF word,
    the 2 NIC header words, the payload words (the last one padded) and the CRC
    trailer. ACKs and credits ride in the SOF words of the frames, and idle words
    are only sent when no packet is waiting, so a saturated stream carries no other
    control traffic (``tests/hw/test_link.py`` and the cocotb bench check this on
    the PHY).
    """
    if not 0 <= payload_bytes <= P.MAX_MTU:
        raise ValueError("payload size out of range")
    return payload_bytes / (P.WORD_BYTES * frame_words(payload_bytes))


class LinkState(IntEnum):
    """Value of the ``link_state`` CSR."""

    TRAINING = 0  #: sending TRAIN words, partner not yet heard
    SEEN = 1      #: partner's TRAIN words received; waiting for its acknowledgement
    UP = 2        #: both ends trained: frames, ACKs and credits flow


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
# Transmit side
# ---------------------------------------------------------------------------


class LinkTX(LiteXModule):
    """Framer, replay buffer (go-back-N), ACK timer and control-word generator.

    Router side: ``sink`` (packet_layout). PHY side: ``source`` (phy_layout, one
    word every cycle, registered; ``source.ready`` is assumed high). ``ready`` of
    ``sink`` depends only on the internal state, never on ``sink.valid``.

    From the receive side: ``ack_out``/``nak_req``/``credit_out`` (what to tell the
    far end) and ``far_valid``/``far_ack``/``far_nak`` (what the far end told us).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, replay_words: int = 1024, max_frames: int = 64,
                 ack_timeout: int = 1024):
        max_words = P.packet_words(mtu)
        if max_words >= 1 << LEN_BITS:
            raise ValueError("MTU too large for the SOF length field")
        aw = log2_int(replay_words)  # raises unless a power of two
        fw = log2_int(max_frames)
        if replay_words < max_words:
            raise ValueError("the replay buffer must hold at least one MTU packet")
        if not 2 <= max_frames <= 1 << (SEQ_BITS - 1):
            raise ValueError("max_frames must be a power of two in 2..128")

        self.sink = sink = stream.Endpoint(packet_layout())
        self.source = source = stream.Endpoint(phy_layout())
        self.up = Signal()          # link trained: send frames/STATUS instead of TRAIN
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
        self.naks = Signal(32)
        self.naks_sent = Signal(32)
        self.timeouts = Signal(32)
        self.outstanding = Signal(SEQ_BITS)  # frames sent and not yet acknowledged
        self.idle = Signal()  # nothing outstanding and nothing being sent

        # Replay buffer: packet words, and per frame (indexed by seq mod max_frames)
        # its start address and length.
        self.mem = mem = Memory(P.WORD_BITS, replay_words)
        self.wrport = wr = mem.get_port(write_capable=True)
        self.rdport = rd = mem.get_port()
        self.table = table = Memory(aw + 1 + LEN_BITS, max_frames)
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
            ack_ok.eq(self.far_valid & (far_delta <= self.outstanding)),
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
            If((self.outstanding == 0) | ack_moves | replay_take | nak_set,
                timer.eq(0),
            ).Elif(timeout,
                timer.eq(0),
                self.timeouts.eq(self.timeouts + 1),
            ).Else(
                timer.eq(timer + 1),
            )
        ]

        # -- NAK to send -------------------------------------------------------
        nak_pending = Signal()
        emit_ctl = Signal()  # this cycle sends a SOF/STATUS word (carries ack/nak/credit)
        self.sync += [
            nak_pending.eq((nak_pending & ~emit_ctl) | self.nak_req),
            If(emit_ctl & nak_pending, self.naks_sent.eq(self.naks_sent + 1)),
        ]

        # -- word to send -------------------------------------------------------------
        # The FSM decides in cycle t what leaves in cycle t+1: a control word (its
        # 48-bit body is registered and the CRC-16 check is added at the output), a
        # data word (registered), or the CRC trailer. The frame CRC-32 runs on the
        # registered output words, so the trailer is ready the cycle after the last
        # data word without a long combinational path.
        w_ctl = Signal()
        w_data = Signal(P.WORD_BITS)
        w_crc = Signal()        # the word is a packet word: include it in the CRC
        w_trailer = Signal()
        c_kind = Signal(3)
        c_seq = Signal(SEQ_BITS)
        c_len = Signal(LEN_BITS)
        body = Signal(CTL_BODY_BITS)
        self.comb += [
            _ctl_slice(body, "kind").eq(c_kind),
            _ctl_slice(body, "ack").eq(Mux(c_kind == CtlKind.TRAIN, 0, self.ack_out)),
            _ctl_slice(body, "nak").eq(nak_pending & (c_kind != CtlKind.TRAIN)),
            _ctl_slice(body, "credit").eq(Mux(c_kind == CtlKind.TRAIN, 0, self.credit_out)),
            _ctl_slice(body, "seq").eq(c_seq),
            _ctl_slice(body, "len").eq(c_len),
            _ctl_slice(body, "rdy").eq(self.rdy & (c_kind == CtlKind.TRAIN)),
        ]
        o_ctl = Signal()
        o_body = Signal(CTL_BODY_BITS)
        o_data = Signal(P.WORD_BITS)
        o_crc = Signal()
        o_trailer = Signal()
        o_sof = Signal()
        self.sync += [
            o_ctl.eq(w_ctl),
            o_body.eq(body),
            o_data.eq(w_data),
            o_crc.eq(w_crc),
            o_trailer.eq(w_trailer),
            o_sof.eq(w_ctl & (c_kind == CtlKind.SOF)),
        ]
        o_check = Signal(16)
        self.sync += o_check.eq(crc_next(CRC16_INIT, body, 16, CRC16_POLY) ^ CRC16_XOROUT)
        crc = Signal(32)        # CRC-32 state over the packet words already sent
        self.comb += [
            source.valid.eq(1),
            source.ctrl.eq(o_ctl),
            If(o_ctl,
                source.data.eq(Cat(o_body, o_check)),
            ).Elif(o_trailer,
                source.data.eq(Cat(crc ^ CRC32_XOROUT, Constant(0, 32))),
            ).Else(
                source.data.eq(o_data),
            ),
        ]
        self.sync += If(o_sof,
            crc.eq(CRC32_INIT),
        ).Elif(o_crc,
            crc.eq(crc_next(crc, o_data, 32, CRC32_POLY)),
        )

        # -- frame length from the router's header word 0 -------------------------
        hlen = Signal(P.HEADER_FIELD["length"].width)
        plen = Signal(LEN_BITS + 4)
        len_w = Signal(LEN_BITS)
        self.comb += [
            hlen.eq(hdr(sink.data, "length")),
            plen.eq(P.HEADER_WORDS + ((hlen + P.WORD_BYTES - 1) >> 3)),
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
            rp_sel.eq(Mux(replay_pending | ~rp_in_window, acked + 1, rp)),
            do_replay.eq((replay_pending | replaying) & (rp_sel != next_seq)),
            trep.adr.eq(rp_sel[:fw]),
        ]
        rep_start = Signal(aw + 1)
        rep_len = Signal(LEN_BITS)
        self.comb += [
            rep_start.eq(trep.dat_r[:aw + 1]),
            rep_len.eq(trep.dat_r[aw + 1:]),
        ]
        fresh_ok = Signal()
        self.comb += fresh_ok.eq(sink.valid & sink.first &
                                 (self.outstanding < max_frames) &
                                 ((used + len_w) <= replay_words))

        remaining = Signal(LEN_BITS)
        rd_ptr = Signal(aw + 1)
        pad = Signal()

        self.fsm = fsm = FSM(reset_state="TRAIN")
        fsm.act("TRAIN",
            c_kind.eq(CtlKind.TRAIN),
            w_ctl.eq(1),
            If(self.up, NextState("BOUNDARY")),
        )
        fsm.act("BOUNDARY",
            emit_ctl.eq(1),
            w_ctl.eq(1),
            replay_take.eq(replay_pending),
            NextValue(replaying, do_replay),
            If(do_replay,
                # Replay frame rp_sel.
                c_kind.eq(CtlKind.SOF), c_seq.eq(rp_sel), c_len.eq(rep_len),
                rd.adr.eq(rep_start[:aw]),
                NextValue(rd_ptr, rep_start + 1),
                NextValue(remaining, rep_len),
                NextValue(rp, rp_sel + 1),
                NextValue(self.replays, self.replays + 1),
                NextState("RDATA"),
            ).Elif(fresh_ok,
                # New frame from the router: its length is read off header word 0
                # before the word is accepted.
                c_kind.eq(CtlKind.SOF), c_seq.eq(next_seq), c_len.eq(len_w),
                tw.adr.eq(next_seq[:fw]), tw.dat_w.eq(Cat(wp, len_w)), tw.we.eq(1),
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
        )
        fsm.act("CRC",
            w_trailer.eq(1),
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


# ---------------------------------------------------------------------------
# Receive side
# ---------------------------------------------------------------------------


class LinkRX(LiteXModule):
    """Deframer and checker.

    PHY side: ``sink`` (phy_layout; ``valid`` honoured, ``ready`` always high).
    Router side: ``source`` (packet_layout, registered; ``ready`` is expected high
    because the router's credits guarantee room, a refused word is counted in
    ``rx_overflows`` and poisons the packet).

    A frame is delivered while it arrives, one word behind the PHY, so that the last
    packet word can carry ``error`` once the CRC trailer has been checked. Only a
    frame whose SOF carries the expected sequence number is delivered; a frame cut
    short by a control word ends with ``error=1`` after fewer words than its SOF
    announced (never more).

    Outputs to the transmit side: ``ack_out`` (last in-order sequence number),
    ``nak_req`` (pulse), ``far_*`` (fields of every good SOF/STATUS word).
    Training inputs/outputs: ``enable`` (accept frames and far_* only once the
    partner's training was heard), ``train_valid``/``train_rdy`` (a good TRAIN word),
    ``peer_up`` (a good SOF/STATUS word: the partner is up).
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU):
        max_words = P.packet_words(mtu)
        self.sink = sink = stream.Endpoint(phy_layout())
        self.source = source = stream.Endpoint(packet_layout())
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
        # Counters.
        self.rx_packets = Signal(32)
        self.rx_bytes = Signal(64)
        self.crc_errors = Signal(32)
        self.ctrl_errors = Signal(32)
        self.seq_errors = Signal(32)
        self.rx_overflows = Signal(32)

        self.comb += sink.ready.eq(1)

        # -- input register and word decode ------------------------------------------
        d_valid = Signal()
        d_data = Signal(P.WORD_BITS)
        d_ctrl = Signal()
        check_ok = Signal()     # the control-word check of d_data matches
        self.sync += [
            d_valid.eq(sink.valid),
            d_data.eq(sink.data),
            d_ctrl.eq(sink.ctrl),
            check_ok.eq((crc_next(CRC16_INIT, sink.data[:CTL_BODY_BITS], 16, CRC16_POLY)
                         ^ CRC16_XOROUT) == _ctl_slice(sink.data, "check")),
        ]
        kind = Signal(3)
        f_len = Signal(LEN_BITS)
        f_seq = Signal(SEQ_BITS)
        c_sof, c_status, c_train, c_bad = Signal(), Signal(), Signal(), Signal()
        is_data = Signal()
        self.comb += [
            kind.eq(_ctl_slice(d_data, "kind")),
            f_len.eq(_ctl_slice(d_data, "len")),
            f_seq.eq(_ctl_slice(d_data, "seq")),
            c_sof.eq(d_valid & d_ctrl & check_ok & (kind == CtlKind.SOF) &
                     (f_len >= P.HEADER_WORDS) & (f_len <= max_words)),
            c_status.eq(d_valid & d_ctrl & check_ok & (kind == CtlKind.STATUS)),
            c_train.eq(d_valid & d_ctrl & check_ok & (kind == CtlKind.TRAIN)),
            c_bad.eq(d_valid & d_ctrl & ~c_sof & ~c_status & ~c_train),
            is_data.eq(d_valid & ~d_ctrl),
            self.far_valid.eq(self.enable & (c_sof | c_status)),
            self.far_ack.eq(_ctl_slice(d_data, "ack")),
            self.far_nak.eq(_ctl_slice(d_data, "nak")),
            self.far_credit.eq(_ctl_slice(d_data, "credit")),
            self.train_valid.eq(c_train),
            self.train_rdy.eq(_ctl_slice(d_data, "rdy")),
            self.peer_up.eq(c_sof | c_status),
            self.any_valid.eq(d_valid),
        ]

        # -- sequence state ------------------------------------------------------------
        expected = Signal(SEQ_BITS)
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
        self.comb += crc_good.eq(d_data == Cat(crc ^ CRC32_XOROUT, Constant(0, 32)))
        hold = Signal(P.WORD_BITS)
        hold_valid = Signal()
        hold_first = Signal()
        frame_bytes = Signal(P.HEADER_FIELD["length"].width)
        poisoned = Signal()     # a word of this packet was refused by the router

        # Output register towards the router.
        o_valid = Signal()
        o_last = Signal()
        o_error = Signal()
        out_data = Signal(P.WORD_BITS)
        out_first = Signal()
        self.comb += [
            source.valid.eq(o_valid),
            source.data.eq(out_data),
            source.first.eq(out_first),
            source.last.eq(o_last),
            source.error.eq(o_error),
        ]

        emit = Signal()
        emit_last = Signal()
        emit_error = Signal()
        self.sync += [
            o_valid.eq(emit),
            If(emit,
                out_data.eq(hold),
                out_first.eq(hold_first),
                o_last.eq(emit_last),
                o_error.eq(emit_error),
            ),
            If(o_valid & ~source.ready, self.rx_overflows.eq(self.rx_overflows + 1)),
        ]

        # Frame events.
        start = Signal()        # accept the frame announced by this SOF
        skip = Signal()         # count the words of this SOF's frame without delivering
        abort = Signal()        # the current frame is cut short
        after_abort = Signal()  # the rest of a cut frame may follow as stray data words
        want_nak = Signal()
        self.comb += [
            start.eq(self.enable & c_sof & (seq_diff == 0)),
            skip.eq(self.enable & c_sof & (seq_diff != 0)),
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
                            ).Else(
                                self.crc_errors.eq(self.crc_errors + 1),
                            ),
                        ),
                    ),
                ).Elif(c_sof | c_train | c_bad,
                    in_frame.eq(0),
                    hold_valid.eq(0),
                ),
            ),
            If(start,
                in_frame.eq(1), accept.eq(1),
                remaining.eq(f_len),
                crc.eq(CRC32_INIT),
                hold_valid.eq(0),
                poisoned.eq(0),
            ).Elif(skip,
                in_frame.eq(1), accept.eq(0),
                remaining.eq(f_len),
                self.seq_errors.eq(self.seq_errors + 1),
            ),
            If(c_bad | abort, self.ctrl_errors.eq(self.ctrl_errors + 1)),
            If(o_valid & ~source.ready, poisoned.eq(1)),
            If(abort, after_abort.eq(1)).Elif(c_sof | c_status | c_train, after_abort.eq(0)),
        ]
        # What leaves towards the router this cycle, and NAK decisions.
        trailer = Signal()
        self.comb += [
            trailer.eq(in_frame & is_data & (remaining == 0)),
            abort.eq(in_frame & (c_sof | c_train | c_bad)),
            If(in_frame & accept & is_data & (remaining != 0) & hold_valid,
                emit.eq(1),
            ).Elif(accept & trailer,
                emit.eq(hold_valid), emit_last.eq(1),
                emit_error.eq(~crc_good | poisoned | (o_valid & ~source.ready)),
            ).Elif(accept & abort & hold_valid & ~hold_first,
                # Cut short after at least one word went out: end it with an error.
                emit.eq(1), emit_last.eq(1), emit_error.eq(1),
            ),
            want_nak.eq(
                # a frame we wanted turned out bad
                (accept & trailer & (~crc_good | poisoned)) | (accept & abort) |
                # a later frame than expected: some were lost
                (skip & seq_ahead) |
                # data words outside any frame: its SOF was lost
                (self.enable & ~in_frame & is_data & ~after_abort) |
                # the sender has sent frames we do not have
                (self.enable & ~in_frame & c_status & seq_ahead)
            ),
        ]


# ---------------------------------------------------------------------------
# The link layer: TX + RX + training + counters
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
                If(rx.train_valid,
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
# A cable: two link layers and two sim PHY wires
# ---------------------------------------------------------------------------


class LinkChannel(LiteXModule):
    """Join two router link ports through two LinkLayers and two :class:`SimPhy` wires.

    Same shape as the router's ``WireChannel(a, b, ...)``: ``a.source`` reaches
    ``b.sink`` and vice versa; ``drained`` at one end comes out as
    ``credit_valid``/``credit_words`` at the other; ``up`` follows training.

    ``ber`` sets the reset value of ``ber_threshold`` (shared by both wires), which a
    bench may also drive at run time (make it a top-level input). ``seed`` selects the
    error patterns; by default every channel gets a new one. Remaining keyword
    arguments go to both :class:`LinkLayer`s.
    """

    _seeds = itertools.count(1)

    @classmethod
    def reset_seeds(cls, start: int = 1) -> None:
        """Restart the default seeds, so that elaborating the same network twice gives
        the same Verilog (and a cached Verilator build is reused)."""
        cls._seeds = itertools.count(start)

    def __init__(self, a, b, delay: int = 8, ber: float = 0.0, seed: int | None = None,
                 **link_kwargs):
        from paranic.hw.phy.sim import SimPhy, ber_to_threshold

        if seed is None:
            seed = next(LinkChannel._seeds)
        self.ber_threshold = Signal(32, reset=ber_to_threshold(ber))
        self.link_a = LinkLayer(**link_kwargs)
        self.link_b = LinkLayer(**link_kwargs)
        self.phy_ab = SimPhy(delay=delay, seed=2 * seed)
        self.phy_ba = SimPhy(delay=delay, seed=2 * seed + 1)
        for port, link in ((a, self.link_a), (b, self.link_b)):
            self.comb += link.port_connections(port)
        self.comb += [
            self.link_a.phy_tx.connect(self.phy_ab.sink),
            self.phy_ab.source.connect(self.link_b.phy_rx),
            self.link_b.phy_tx.connect(self.phy_ba.sink),
            self.phy_ba.source.connect(self.link_a.phy_rx),
            self.phy_ab.ber_threshold.eq(self.ber_threshold),
            self.phy_ba.ber_threshold.eq(self.ber_threshold),
        ]
