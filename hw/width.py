"""Width converters between 64-bit packet streams and a wide router's beats.

The host side, the barrier and the collective units move one 64-bit word per cycle;
a router built with ``dw`` > 64 (docs/architecture.md, "Datapath width") moves beats of
``k = dw // 64`` words, word 0 in the low bits, the unused words of a packet's last
beat zero. :class:`WordsToBeats` packs a packet stream into beats, :class:`BeatsToWords`
unpacks it again and drops the last beat's unused words (the header's ``length`` says
how many words the packet has). Both keep ``first``/``last`` framing and pass ``error``
on the last beat/word. These are the ``link_dw`` converters a wide NicCore puts around
its router (hw/niccore.py), its control lanes (hw/lane.py) and the management port's
evacuation inputs (hw/mgmt.py).
"""

from __future__ import annotations

from migen import Array, Case, Cat, If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from .common import hdr, packet_layout, packet_words

W = P.WORD_BITS

#: Beats a :class:`WordsToBeats` holds on their way (its output register): a room check
#: in front of one (NicCore's injection gate) adds them to what must stay free.
PACK_HELD_BEATS = 1


class WordsToBeats(LiteXModule):
    """64-bit words (``sink``) -> ``dw``-bit beats (``source``), one packet at a time.

    Takes one word per cycle while its output register is free or being read (``sink.ready``
    does not depend on ``sink.valid``); a beat leaves when it holds ``k`` words or the
    packet's last word, its unused words zero. Latency: one cycle (output register)."""

    def __init__(self, dw: int) -> None:
        k = P.beat_words(dw)
        self.sink = sink = stream.Endpoint(packet_layout())
        self.source = source = stream.Endpoint(packet_layout(dw))

        # # #

        idx = Signal(max=max(k, 2))     # next word's place in the beat being filled
        acc = [Signal(W, name=f"acc{j}") for j in range(k)]   # words 0..idx-1 of it
        at_first = Signal(reset=1)      # the beat being filled is a packet's first
        take = Signal()
        complete = Signal()             # this word ends the beat
        full = Signal()                 # a beat waits in the output register
        words = [Mux(idx == j, sink.data, acc[j]) for j in range(k)]
        self.comb += [
            sink.ready.eq(~full | source.ready),
            take.eq(sink.valid & sink.ready),
            complete.eq((idx == k - 1) | sink.last),
            source.valid.eq(full),
        ]
        self.sync += [
            If(source.valid & source.ready, full.eq(0)),
            If(take,
                If(complete,
                    full.eq(1),
                    source.data.eq(Cat(*words)),
                    source.first.eq(at_first),
                    source.last.eq(sink.last),
                    source.error.eq(sink.error & sink.last),
                    at_first.eq(sink.last),
                    idx.eq(0),
                    [a.eq(0) for a in acc],
                ).Else(
                    idx.eq(idx + 1),
                    Case(idx, {j: acc[j].eq(sink.data) for j in range(k)}),
                ),
            ),
        ]


class BeatsToWords(LiteXModule):
    """``dw``-bit beats (``sink``) -> 64-bit words (``source``), one word per cycle, no
    register. A packet's word count comes from its header (``length`` in the first
    beat's word 0): of its last beat only the words up to that count leave (all ``k``
    when the header's count does not fall into that beat: a packet whose header and
    beats disagree is passed on for the next store-and-forward check to drop)."""

    def __init__(self, dw: int) -> None:
        k = P.beat_words(dw)
        self.sink = sink = stream.Endpoint(packet_layout(dw))
        self.source = source = stream.Endpoint(packet_layout())

        # # #

        idx = Signal(max=max(k, 2))     # word of the current beat
        n_hdr = Signal(16)              # the packet's words by its header (first beat)
        rem = Signal(16)                # words of the packet from the current beat on
        rem_later = Signal(16)          # ... kept for the beats after the first
        end = Signal()                  # this word ends its beat
        self.comb += [
            n_hdr.eq(packet_words(hdr(sink.data[:W], "length"))),
            rem.eq(Mux(sink.first, n_hdr, rem_later)),
            end.eq((idx == k - 1) | (sink.last & (rem >= 1) & (rem <= k) & (idx + 1 == rem))),
            source.valid.eq(sink.valid),
            source.data.eq(Array(sink.data[j * W:(j + 1) * W] for j in range(k))[idx]),
            source.first.eq(sink.first & (idx == 0)),
            source.last.eq(sink.last & end),
            source.error.eq(sink.error & sink.last & end),
            sink.ready.eq(source.ready & end),
        ]
        self.sync += If(source.valid & source.ready,
            If(end,
                idx.eq(0),
                rem_later.eq(rem - k),
            ).Else(
                idx.eq(idx + 1),
            ),
        )
