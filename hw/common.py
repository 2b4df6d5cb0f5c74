"""Stream layouts and interfaces shared by the gateware blocks.

Field positions come from :mod:`paranic.spec.protocol`, never re-typed here.
"""

from __future__ import annotations

from migen import Signal, bits_for
from litex.soc.interconnect import stream

from paranic.spec import protocol as P


def packet_layout(dw: int = P.WORD_BITS) -> list[tuple[str, int]]:
    """Layout of the packet streams between blocks: one ``dw``-bit beat per cycle
    (default one 64-bit word; wider: ``dw // 64`` words, word 0 in the low bits).

    A packet is the two header words then the payload words; ``first``/``last``
    frame it; the unused words of its last beat are zero. ``error`` is only meaningful on the ``last`` beat of a packet written
    into a :class:`~paranic.hw.fifo.PacketFifo`: set, it discards the packet.
    """
    P.beat_words(dw)
    return [("data", dw), ("error", 1)]


def hdr(word0: Signal, name: str):
    """Slice of header word 0 holding field ``name`` (all but ``tag``)."""
    f = P.HEADER_FIELD[name]
    if f.offset + f.width > P.WORD_BITS:
        raise ValueError(f"{name} is not in header word 0")
    return word0[f.offset:f.offset + f.width]


def payload_words(length):
    """Words carrying ``length`` payload bytes: the gateware form of
    :func:`paranic.spec.protocol.payload_words` (a Migen expression)."""
    return (length + (P.WORD_BYTES - 1)) >> (P.WORD_BYTES.bit_length() - 1)


def packet_words(length):
    """Words of a whole packet whose header says ``length`` payload bytes
    (:func:`paranic.spec.protocol.packet_words`)."""
    return P.HEADER_WORDS + payload_words(length)


def words_to_beats(words, dw: int = P.WORD_BITS):
    """Beats of ``dw`` bits holding ``words`` packet words (an int or a Migen
    expression): ``ceil(words / (dw / 64))``; at 64 bits ``words`` itself."""
    k = P.beat_words(dw)
    if k == 1:
        return words
    return (words + (k - 1)) >> (k.bit_length() - 1)


def packet_beats(length, dw: int = P.WORD_BITS):
    """Beats of a whole packet whose header says ``length`` payload bytes on a
    ``dw``-bit datapath (:func:`paranic.spec.protocol.packet_beats`); at 64 bits
    exactly :func:`packet_words`."""
    return words_to_beats(packet_words(length), dw)


def hdr_const(**values: int) -> int:
    """Header word 0 as an integer constant."""
    return P.header_words(**values)[0]


class LinkPortIf:
    """The router's side of one link port; a channel (wire or link layer) joins two.

    * ``source``: packets leaving the router. The router starts a packet only when
      the far end's input buffer has room for all of it (credits), and then sends it
      at one word per cycle while ``ready`` is high.
    * ``sink``: packets arriving. Written into the router's input ``PacketFifo``
      (cut-through: forwarded before the tail is in); ``error`` on the last beat marks
      the packet bad (CRC or sequence failure, or stomped upstream): it is dropped by
      the next store-and-forward buffer or stomped on the next link.
    * ``sink_words`` (channel -> router, beside ``sink``, read with a packet's first
      word): the packet's length in words as the channel knows it independently of
      the header (a link layer: the SOF control word's CRC-16-protected length). The
      router reserves buffer room and credits by it, never by a header that only
      the CRC at the tail checks. 0: unknown (wire channels, which cannot corrupt a
      header): the router takes the header's length.
    * ``credit_valid``/``credit_words``: words freed in the far end's input buffer.
    * ``drained``: one strobe per word read out of *this* router's input buffer for
      this port; the channel carries these credits to the far end.
    * ``up``: the channel is usable; the router starts no packet on a down port, and
      while it is 0 the router holds the port's credits and packet slots at full (the
      far end's buffer is empty when a link layer comes up again).
    * ``tx_room``: the channel takes a packet of the largest size at once (a link
      layer's replay buffer has room); the router starts a packet only then.
    * ``buf_empty`` (router -> channel): this port's input buffer is empty; a link
      layer completes training only then.
    * ``buf_free`` (router -> channel): free words in this port's input buffer; a
      link layer accepts a frame only when it fits (cut-through: a bad copy that will
      be replayed takes room the far end's credits do not know of).

    Wider datapaths (``dw`` > 64): every count here (``sink_words``,
    ``credit_words``, ``drained``, ``buf_free``) is in beats of ``dw`` bits.
    """

    def __init__(self, dw: int = P.WORD_BITS) -> None:
        self.dw = dw
        self.source = stream.Endpoint(packet_layout(dw))
        self.sink = stream.Endpoint(packet_layout(dw))
        self.sink_words = Signal(bits_for(P.packet_words(P.MAX_MTU)))
        self.credit_valid = Signal()
        self.credit_words = Signal(16)
        self.drained = Signal()
        self.up = Signal(reset=1)
        self.tx_room = Signal(reset=1)
        self.buf_empty = Signal(reset=1)
        self.buf_free = Signal(16, reset=2**16 - 1)
