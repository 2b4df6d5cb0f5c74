"""Line-word framing on an 8b/10b byte lane: the characters and their meaning.

A line word (64 data bits + control flag, :func:`paranic.hw.phy.phy_layout`) goes
on the lane as

==============  ==================================================  =========
line word       characters (first on the wire first)                bytes
==============  ==================================================  =========
data word       D(b0) D(b1) ... D(b7)   (b0 = data[0:8])            8
control word    K27.7  D(b0) ... D(b7)                              9
idle (between   K28.5 in transceiver byte lane 0 of an all-idle     -
words only)     clock, K28.0 in every other idle byte
==============  ==================================================  =========

K28.5 is the only comma on the line and always sits in byte lane 0, so a
transceiver's comma aligner (which wants commas on its word boundary) never sees
one elsewhere; the receiver nevertheless parses a plain byte stream and does not
care in which lane anything lands. ``docs/phy.md`` has the rules.
"""

from __future__ import annotations

#: 8b/10b K characters used by the framing (byte values; the K flag is set).
K28_5 = 0xBC   # comma: idle at the start of a transceiver word (alignment, link up)
K28_0 = 0x1C   # pad: idle in the other byte lanes
K27_7 = 0xFB   # marker: the next 8 bytes are a control word

COMMA = K28_5
PAD = K28_0
MARKER = K27_7

#: Bytes of a data / control line word on the lane.
DATA_WORD_BYTES = 8
CTRL_WORD_BYTES = 9


def word_bytes(ctrl: int) -> int:
    """Bytes a line word takes on the lane."""
    return CTRL_WORD_BYTES if ctrl else DATA_WORD_BYTES


def encode_word(data: int, ctrl: int) -> list[tuple[int, int]]:
    """Reference encoding of one line word as (byte, k) pairs (tests, docs)."""
    body = [((data >> (8 * i)) & 0xFF, 0) for i in range(8)]
    return ([(MARKER, 1)] + body) if ctrl else body


#: Transceiver bytes per clock the adapter supports (LiteICLink data_width 20 / 40).
LANE_BYTES = (2, 4)
