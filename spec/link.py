"""The link layer's wire facts: line words, control words, CRCs, framing, link states.

A link moves one *line word* per cycle in each direction: 64 data bits and a control
flag. Data frames are an SOF control word, the packet's words and a CRC-32 trailer;
control words (``ctrl=1``) all share one layout (:data:`CTL_FIELDS`): 48 bits of fields
protected by their own CRC-16, so a control word with a flipped bit is never trusted.
The gateware (``paranic.hw.link``) builds its logic from these tables, the tests
check frames against the reference CRCs here, and ``docs/link-layer.md`` carries the
generated control-word table (:func:`paranic.spec.docgen.link_tables`).
"""

from __future__ import annotations

from enum import IntEnum

from . import protocol as P
from .fields import Field

#: Bits on the line per word: 64 data bits and the control flag.
LINE_WORD_BITS = P.WORD_BITS + 1

# ---------------------------------------------------------------------------
# CRCs (reference, bit-serial; the gateware computes the same one word per cycle)
# ---------------------------------------------------------------------------

#: CRC-32 of IEEE 802.3 / zlib, reflected form: the data frame's trailer.
CRC32_POLY, CRC32_INIT, CRC32_XOROUT = 0xEDB88320, 0xFFFFFFFF, 0xFFFFFFFF
#: CRC-16/X-25 (CCITT polynomial 0x1021, reflected form 0x8408): the control word's check.
CRC16_POLY, CRC16_INIT, CRC16_XOROUT = 0x8408, 0xFFFF, 0xFFFF
#: A *stomped* frame (cut-through: the packet was already bad when it left the previous
#: hop, its last word carried ``error``) ends with the good CRC-32 trailer XOR this
#: constant. The receiver delivers it marked bad and does not ask for a replay (the
#: link where the packet was damaged replays it). 16 of its 32 bits are set: a line
#: error turns a good trailer into a stomped one (or back) only with 16 flipped bits.
CRC32_STOMP = 0x5A3C_C3A5


def _crc_bits(bits, poly: int, init: int) -> int:
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
    return _crc_bits(_bits_of(data), CRC32_POLY, CRC32_INIT) ^ CRC32_XOROUT


def crc32_trailer(packet: bytes, stomped: bool = False) -> int:
    """The CRC trailer word (64-bit int) of a frame carrying ``packet`` (its words,
    little-endian bytes); ``stomped``: the trailer of a stomped frame."""
    return crc32(packet) ^ (CRC32_STOMP if stomped else 0)


def crc16(data: bytes) -> int:
    """CRC-16/X-25 (check value 0x906E for b"123456789"), bit-serial reference."""
    return _crc_bits(_bits_of(data), CRC16_POLY, CRC16_INIT) ^ CRC16_XOROUT


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
CTL_FIELDS: tuple[Field, ...] = (
    Field("kind", 0, 3, "CtlKind"),
    Field("ack", 3, SEQ_BITS, "SOF/STATUS: sequence number of the last frame received in order"),
    Field("nak", 11, 1, "SOF/STATUS: replay everything after `ack` (sent once per error)"),
    Field("credit", 12, CREDIT_BITS, "SOF/STATUS: words drained from the receiver's input buffer, cumulative mod 2**16"),
    Field("seq", 28, SEQ_BITS, "SOF: sequence number of this frame; STATUS: sequence number of the next new frame"),
    Field("len", 36, LEN_BITS, "SOF: packet words in this frame (2 .. packet_words(MTU))"),
    Field("rdy", 47, 1, "TRAIN: the sender has received the partner's training words"),
    Field("check", 48, 16, "CRC-16/X-25 over bits 0..47"),
)
CTL = {f.name: f for f in CTL_FIELDS}

#: What each field carries in each kind of control word (SOF, STATUS, TRAIN): the
#: control-word table of docs/link-layer.md.
CTL_USE: dict[str, tuple[str, str, str]] = {
    "kind": ("1", "2", "4"),
    "ack": ("last seq received in order", "same", "0"),
    "nak": ("replay after `ack`", "same", "0"),
    "credit": ("words drained from my input buffer, cumulative mod 2^16", "same", "0"),
    "seq": ("this frame's sequence number", "sequence number of my next new frame", "0"),
    "len": ("packet words in the frame (2..`packet_words(MTU)`)", "0", "0"),
    "rdy": ("0", "0", "I have received your TRAIN words"),
    "check": ("CRC-16/X-25 over bits 0..47", "same", "same"),
}
assert set(CTL_USE) == set(CTL) and [CTL_USE["kind"][i] for i in range(3)] == \
    [str(int(k)) for k in (CtlKind.SOF, CtlKind.STATUS, CtlKind.TRAIN)]


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


# ---------------------------------------------------------------------------
# Framing overhead and link states
# ---------------------------------------------------------------------------


def frame_words(payload_bytes: int) -> int:
    """Line words of one data frame: SOF + NIC header + payload + CRC trailer."""
    return 1 + P.packet_words(payload_bytes) + 1


def frame_beats(payload_bytes: int, dw: int = P.WORD_BITS) -> int:
    """Line beats of one data frame on a ``dw``-bit link: the SOF control word and
    the CRC trailer each take a whole beat (in its low 64 bits, the rest zero)."""
    return 1 + P.packet_beats(payload_bytes, dw) + 1


def link_efficiency(payload_bytes: int, dw: int = P.WORD_BITS) -> float:
    """Payload bytes over raw link bytes for a back-to-back stream of equal packets.

    Raw bytes are 8 per line word (the 64-bit data field; the control flag and the
    PHY's own line code are not counted). Per packet the link sends the SOF word,
    the 2 NIC header words, the payload words (the last one padded) and the CRC
    trailer. ACKs and credits ride in the SOF words of the frames, and idle words
    are only sent when no packet is waiting, so a saturated stream carries no other
    control traffic (``tests/hw/test_link.py`` and the cocotb bench check this on
    the PHY).
    A ``dw``-bit link (:data:`~paranic.spec.protocol.DATAPATH_WIDTHS`) moves ``dw/8``
    raw bytes per beat and sends :func:`frame_beats` beats per packet.
    """
    if not 0 <= payload_bytes <= P.MAX_MTU:
        raise ValueError("payload size out of range")
    return payload_bytes / (dw // 8 * frame_beats(payload_bytes, dw))


def nic_clock_and_width(line_bps: float, code: tuple[int, int] = (64, 66),
                        max_clk_hz: float = 250e6) -> tuple[float, int]:
    """The NIC clock and datapath width a lane of ``line_bps`` needs: the narrowest
    width of :data:`~paranic.spec.protocol.DATAPATH_WIDTHS` whose clock (the lane's
    payload rate, ``line_bps * code[0] / code[1]``, over ``dw`` bits per cycle) is at
    most ``max_clk_hz`` (a part's fabric limit for the router and link layer), and that
    clock. E.g. a QSFP28 lane (25.78125 Gb/s, 64b/66b): 128 bits at 195.3 MHz; an SFP+
    lane (10.3125 Gb/s, 64b/66b): 64 bits at 156.25 MHz."""
    payload = line_bps * code[0] / code[1]
    for dw in P.DATAPATH_WIDTHS:
        clk = payload / dw
        if clk <= max_clk_hz:
            return clk, dw
    raise ValueError(f"{line_bps / 1e9:g} Gb/s needs more than {P.DATAPATH_WIDTHS[-1]} bits "
                     f"at {max_clk_hz / 1e6:g} MHz")


class LinkState(IntEnum):
    """Value of a link port's ``link_state`` CSR."""

    TRAINING = 0  #: sending TRAIN words, partner not yet heard
    SEEN = 1      #: partner's TRAIN words received; waiting for its acknowledgement
    UP = 2        #: both ends trained: frames, ACKs and credits flow
    DOWN = 3      #: taken out (loss of signal, replay limit, software): sends nothing


#: What each link state means (docs/link-layer.md).
LINK_STATE_DOC = {
    LinkState.TRAINING: "sending TRAIN, partner not yet heard",
    LinkState.SEEN: "partner heard, waiting for its acknowledgement",
    LinkState.UP: "frames, ACKs and credits flow",
    LinkState.DOWN: "taken out: sends nothing, replay buffer frozen until `restart`",
}


class LinkDownReason(IntEnum):
    """Value of a link port's ``down_reason`` CSR: why it went DOWN (0 while it is not)."""

    NONE = 0          #: not down (cleared by ``restart``)
    LOS = 1           #: loss of signal: no good SOF/STATUS word for ``los_timeout`` cycles
    REPLAY_LIMIT = 2  #: more than ``max_replays`` replay rounds without ACK progress
    SOFTWARE = 3      #: ``take_down`` written


#: What each down reason means (docs/link-layer.md).
LINK_DOWN_REASON_DOC = {
    LinkDownReason.NONE: "not down",
    LinkDownReason.LOS: "loss of signal: no good SOF/STATUS word for `los_timeout` cycles",
    LinkDownReason.REPLAY_LIMIT: "more than `max_replays` replay rounds (NAK or ACK timeout) without ACK progress",
    LinkDownReason.SOFTWARE: "`take_down` written by software",
}

#: Default ``los_timeout`` (cycles without a good SOF/STATUS word before an UP link goes
#: DOWN): far above the longest legal gap (one MTU frame, 131 words at MTU 1024).
DEFAULT_LOS_TIMEOUT = 1024
#: Default ``max_replays`` (reset value of the CSR): replay rounds without ACK progress
#: tolerated before an UP link goes DOWN (0 = never).
DEFAULT_MAX_REPLAYS = 32
