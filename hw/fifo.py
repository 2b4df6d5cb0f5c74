"""Packet FIFO: store-and-forward or cut-through, status flags and a packet-ready FIFO.

:class:`PacketFifo` is the buffer of every router port (link inputs, injection,
ejection) and of a few host-side paths. Two ways of making a packet visible:

* **store-and-forward** (default; injection, ejection, host side): a packet written
  into ``sink`` becomes visible at ``source`` only when its last beat has been written
  and committed; a packet whose last beat carries ``error``, that does not fit into the
  free space, or that is longer than ``max_packet_words`` is discarded whole (the write
  pointer rolls back) and counted in ``aborted``. Committed packets are never touched
  by a later abort.
* **cut-through** (``cut_through=True``; the router's link inputs): the writer
  declares the packet's length on its first beat (``sink_words``, the link layer's
  CRC-16-protected SOF length), the packet is visible at once (its packet-ready entry
  is written with the first beat) and each word can be read two cycles after it was
  written. Nothing can be rolled back, so the packet always leaves with exactly the
  declared number of words: ``error`` on the last beat is stored and passed on (the
  reader drops or stomps it), a packet that ends early is padded by the reader with
  zero words (the last one with ``error``), and one that runs longer is cut at the
  declared length (``error`` on its last word; the excess is discarded and counted in
  ``aborted``). The declared words are reserved at the first beat: a packet for which
  they are not free is refused whole (counted in ``aborted``; the sender's credits
  make this a fault).

Besides the word-level status (``empty``, ``half_full``, ``full``, ``level``,
``free``) the FIFO keeps ParaStation's *packet-ready FIFO*: one entry per packet
holding its word count (and, with ``head_word=True``, its header word 0), so the
reader (the router's arbiter, or the host side) sees ``packets`` and ``head_words``
(length of the head packet) without looking into the data.
"""

from __future__ import annotations

from migen import Array, Cat, If, Memory, Mux, Signal, bits_for, log2_int
from migen.fhdl.specials import READ_FIRST
from migen.genlib.fifo import SyncFIFO
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P

from .common import packet_layout


class PacketFifo(LiteXModule):
    """Packet FIFO (store-and-forward, or cut-through for link inputs).

    Parameters
    ----------
    depth_words:
        Data storage in beats (a power of two, >= ``max_packet_words``). Every count
        of this FIFO (lengths, levels, ``drained``) is in beats of ``dw`` bits; at the
        default 64 bits a beat is one packet word.
    max_packet_words:
        Longest packet accepted; longer ones are aborted (store-and-forward) or cut
        (cut-through). Sets ``head_words``' width.
    packets:
        Depth of the packet-ready FIFO (default ``depth_words``: every packet holds
        at least one word, so it can never fill). With a smaller depth a packet
        that completes (starts, cut-through) while the packet-ready FIFO is full is
        aborted (refused).
    backpressure:
        ``False`` (default, link inputs): ``sink.ready`` is always 1 and a packet
        that meets a full FIFO is aborted (the sender's credits make this a fault).
        ``True`` (injection side): ``sink.ready`` drops while the FIFO is full and
        the packet being written fits into ``max_packet_words``, so a producer can
        simply stream; only oversized or ``error`` packets are aborted.
        Store-and-forward only.
    cut_through:
        Cut-through mode (see the module docstring); needs ``sink_words``.
    lookahead:
        The reader takes packet-ready entries itself (``head_take``, one pulse when it
        starts reading a packet) instead of at the packet's last word, so ``head_words``
        and ``head_word`` show the *next* packet while the current one streams (the
        router decides the next grant meanwhile). ``waiting`` counts the entries not
        yet taken; ``packets`` still counts every packet not wholly read.
    head_word:
        Keep each packet's header word 0 in its packet-ready entry (``head_word``).
    random_read:
        Virtual output queues (the router's inputs): packets are read in any order.
        Every packet holds one of ``packets`` *entries*, allocated in arrival order
        with the packet-ready entry (which also carries its start address
        ``head_adr`` and entry number ``head_idx``); ``head_take`` only moves an entry
        on to the reader's own queues. The reader starts a packet with ``start``
        (``start_adr``/``start_words``/``start_idx`` from that entry) in a cycle in
        which it is idle or reads the last word of the one before. Room is reclaimed
        in arrival order: ``drained`` pulses once per word (declared words, like the
        cut-through reader's pad words) of the oldest packet that has been read, so
        credits and ``level`` behave exactly as for a FIFO whose reader is late for
        packets it overtook. While every entry is taken, a cut-through packet is
        refused and a ``backpressure`` writer waits.
    second_reader:
        A second read port (``random_read`` only: the router's inputs; on a link
        input it serves the ejection port, on the injection input the ``-`` links): ``source2`` with
        ``start2``/``start2_adr``/``start2_words``/``start2_idx``, used like the first
        and independent of it (two packets are read at once; never the same one). It
        reads a copy of the data memory (one more block RAM); room still comes back in
        arrival order, one word per cycle, whichever port read a packet.
    dw:
        Datapath width in bits (:data:`~paranic.spec.protocol.DATAPATH_WIDTHS`): one
        beat of ``dw // 64`` packet words per cycle. ``head_word`` keeps only the first
        beat's word 0 (the header fields the router reads).

    Interface
    ---------
    ``sink``/``source``: :func:`~paranic.hw.common.packet_layout` streams. ``source``
    carries one word per cycle with ``first`` and ``last`` set; store-and-forward: only
    committed packets, ``valid`` rising in the cycle in which ``packets`` turns
    non-zero. ``drained`` pulses once per word read (cut-through: also per pad word, so
    it counts exactly the declared words of every packet, as the sender's credits do).
    ``sink_words``: declared length, sampled on a packet's first beat (cut-through).
    ``packets``/``head_words``: the packet-ready FIFO. ``level``/``free``: words
    held (including a packet being written or reserved) and free.
    ``empty``/``half_full`` (``level >= depth/2``)/``full``. ``aborted``: 32-bit count
    of discarded (refused, cut) packets. ``abort_words``: beats of the packet discarded
    in this cycle (store-and-forward; 0 otherwise), so a credit-keeping writer gets
    back the room of a packet it will never see drained.
    """

    def __init__(self, depth_words: int, max_packet_words: int, packets: int | None = None,
                 backpressure: bool = False, cut_through: bool = False, lookahead: bool = False,
                 head_word: bool = False, random_read: bool = False,
                 second_reader: bool = False, dw: int = P.WORD_BITS) -> None:
        if depth_words < 2 or depth_words & (depth_words - 1):
            raise ValueError("depth_words must be a power of two >= 2")
        if not 1 <= max_packet_words <= depth_words:
            raise ValueError("max_packet_words must be in 1..depth_words")
        if cut_through and backpressure:
            raise ValueError("a cut-through FIFO takes no back-pressure (credits guarantee room)")
        if random_read and not (lookahead and head_word and packets):
            raise ValueError("random_read needs lookahead, head_word and a packets bound")
        if second_reader and not random_read:
            raise ValueError("second_reader needs random_read")
        self.second_reader = second_reader
        packets = depth_words if packets is None else packets
        self.random_read = random_read
        self.depth_words = depth_words
        self.max_packet_words = max_packet_words
        self.cut_through = cut_through

        self.sink = sink = stream.Endpoint(packet_layout(dw))
        self.source = source = stream.Endpoint(packet_layout(dw))
        self.sink_words = Signal(bits_for(max_packet_words))

        abits = log2_int(depth_words)
        self.level = Signal(abits + 1)
        self.free = Signal(abits + 1)
        self.empty = Signal()
        self.half_full = Signal()
        self.full = Signal()
        self.packets = Signal(max=packets + 1)
        self.waiting = Signal(max=packets + 1)
        self.head_words = Signal(bits_for(max_packet_words))
        self.head_word = Signal(P.WORD_BITS)
        self.head_take = Signal()
        self.drained = Signal()
        self.aborted = Signal(32)
        self.abort_words = Signal(bits_for(max_packet_words + 1))
        self.committed = Signal()  # strobe: a packet was committed (cut-through: started)
        ibits = bits_for(max(packets - 1, 1))
        self.head_adr = Signal(abits + 1)
        self.head_idx = Signal(ibits)
        self.start = Signal()
        self.start_adr = Signal(abits + 1)
        self.start_words = Signal(bits_for(max_packet_words))
        self.start_idx = Signal(ibits)
        if second_reader:
            # second read port (``source2``/``start2``...): a copy of the data memory
            self.source2 = stream.Endpoint(packet_layout(dw))
            self.start2 = Signal()
            self.start2_adr = Signal(abits + 1)
            self.start2_words = Signal(bits_for(max_packet_words))
            self.start2_idx = Signal(ibits)

        # # #

        wptr = Signal(abits + 1)   # next word to write (may run ahead of cptr)
        cptr = Signal(abits + 1)   # end of the readable words
        rptr = Signal(abits + 1)   # next word to read
        wcnt = Signal(bits_for(max_packet_words))  # words of the packet being written
        drop = Signal()            # the packet being written is already lost
        resv = Signal(abits + 1)   # cut-through: declared words not yet written

        # Data memory: one beat + last flag + error flag.
        mem = Memory(dw + 2, depth_words)
        wr = mem.get_port(write_capable=True)
        rd = mem.get_port(mode=READ_FIRST)  # synchronous read (block RAM)
        self.specials += mem, wr, rd

        # Packet-ready FIFO: one word count (and header word 0) per packet.
        hw = len(self.head_words)
        hb = P.WORD_BITS   # header word 0: the low word of the first beat
        pf_width = hw + (hb if head_word else 0) + ((abits + 1 + ibits) if random_read else 0)
        self.pfifo = pfifo = SyncFIFO(pf_width, packets, fwft=True)
        pf_words = Signal(hw)
        pf_hword = Signal(hb)
        pf_adr = Signal(abits + 1)     # random_read: start address of the packet
        aptr = Signal(ibits)           # random_read: next entry to allocate
        self._pf_adr = pf_adr
        self._pf_words_in = pf_words
        self._inuse = inuse = Signal(max=packets + 1)   # random_read: entries held
        self._table_full = Signal()
        self.comb += self._table_full.eq(inuse == packets) if random_read else self._table_full.eq(0)
        if random_read:
            self.comb += [pfifo.din.eq(Cat(pf_words, pf_hword, pf_adr, aptr)),
                          self.head_adr.eq(pfifo.dout[hw + hb:hw + hb + abits + 1]),
                          self.head_idx.eq(pfifo.dout[hw + hb + abits + 1:])]
        else:
            self.comb += pfifo.din.eq(Cat(pf_words, pf_hword) if head_word else pf_words)

        tptr = Signal(abits + 1)   # random_read: oldest word not reclaimed
        self.comb += [
            self.level.eq(wptr - (tptr if random_read else rptr) + resv),
            # random_read: no packet fits while every entry is taken
            self.free.eq(Mux(self._table_full, 0, depth_words - self.level)),
            self.empty.eq(self.level == 0),
            self.full.eq(self.level == depth_words),
            self.half_full.eq(self.level >= depth_words // 2),
            self.waiting.eq(pfifo.level),
            self.head_words.eq(pfifo.dout[:hw]),
            self.head_word.eq(pfifo.dout[hw:hw + hb] if head_word else 0),
        ]

        beat = Signal()
        pop = Signal()        # a word (or pad word) leaves at source
        last_out = Signal()   # ... and it is the packet's last
        if cut_through:
            self._cut_through_write(sink, wr, pfifo, pf_words, pf_hword, beat, wptr, cptr,
                                    wcnt, drop, resv, max_packet_words)
        else:
            self._store_write(sink, wr, pfifo, pf_words, pf_hword, beat, wptr, cptr, wcnt,
                              drop, max_packet_words, backpressure, head_word)

        # -- packet count: every packet not wholly read -------------------------------
        if random_read:
            self.comb += [self.packets.eq(inuse), pfifo.re.eq(self.head_take)]
        elif lookahead:
            cnt = Signal(max=packets + 1)
            self.sync += cnt.eq(cnt + pfifo.we - (pop & last_out))
            self.comb += [self.packets.eq(cnt), pfifo.re.eq(self.head_take)]
        else:
            self.comb += [self.packets.eq(pfifo.level), pfifo.re.eq(pop & last_out)]

        # -- read side -------------------------------------------------------
        # The first read port; a random_read FIFO starts each packet with ``start``.
        if cut_through:
            # ``cur``: the declared length of the packet being read
            cur = Signal(hw)
            if random_read:
                self.sync += If(self.start, cur.eq(self.start_words))
            elif lookahead:
                self.sync += If(self.head_take, cur.eq(self.head_words))
            else:
                self.comb += cur.eq(self.head_words)
        else:
            cur = None
        pop, last_out = self._read_port(rd, source, self.start if random_read else None,
                                         self.start_adr, cur, cptr, dw, abits,
                                         rptr=rptr, pop=pop, last_out=last_out)
        if not random_read:
            self.comb += self.drained.eq(pop)
        readers = [(pop, last_out, self.start, self.start_idx)]
        if second_reader:
            rd2 = mem.get_port(mode=READ_FIRST)
            self.specials += rd2
            cur2 = None
            if cut_through:
                cur2 = Signal(hw)
                self.sync += If(self.start2, cur2.eq(self.start2_words))
            pop2, last2 = self._read_port(rd2, self.source2, self.start2, self.start2_adr,
                                          cur2, cptr, dw, abits)
            readers.append((pop2, last2, self.start2, self.start2_idx))
        if random_read:
            self._reclaim(packets, ibits, aptr, tptr, pfifo, readers)

    # ------------------------------------------------------------------------
    def _read_port(self, rd, source, start, start_adr, cur, cptr, dw, abits,
                   rptr=None, pop=None, last_out=None):
        """One read port of the data memory (``rd``) onto ``source``: the first port,
        and the second of a random_read FIFO (``second_reader``).

        ``start``/``start_adr`` (random_read; ``start`` None otherwise): jump to a
        packet. Cut-through (``cur``: the declared length of the packet being read):
        the port sends exactly the declared beats of each packet; a packet stored short
        (its last beat before the declared length) is padded with zero beats, the
        last of them carrying ``error``. Returns the port's (pop, last beat) strobes."""
        rptr = Signal(abits + 1) if rptr is None else rptr
        rnext = Signal(abits + 1)
        at_first = Signal(reset=1)
        pop = Signal() if pop is None else pop
        last_out = Signal() if last_out is None else last_out
        m_data = Signal(dw)
        m_last = Signal()
        m_err = Signal()
        self.comb += [
            m_data.eq(rd.dat_r[:dw]),
            m_last.eq(rd.dat_r[dw]),
            m_err.eq(rd.dat_r[dw + 1]),
            source.first.eq(at_first),
            pop.eq(source.valid & source.ready),
            last_out.eq(source.last),
            rd.adr.eq(rnext[:abits]),
        ]
        self.sync += If(pop, at_first.eq(last_out))
        if cur is not None:
            rcnt = Signal(len(cur))   # beats of the packet sent so far
            padding = Signal()
            short = Signal()
            self.comb += [
                short.eq(m_last & (rcnt + 1 < cur)),
                If(padding,
                    source.valid.eq(1),
                    source.data.eq(0),
                    source.last.eq(rcnt + 1 >= cur),
                    source.error.eq(rcnt + 1 >= cur),
                ).Else(
                    source.valid.eq(rptr != cptr),
                    source.data.eq(m_data),
                    source.last.eq(m_last & ~short),
                    source.error.eq(m_err & ~short),
                ),
            ]
            self.sync += If(pop,
                rcnt.eq(Mux(last_out, 0, rcnt + 1)),
                If(last_out, padding.eq(0)).Elif(~padding & short, padding.eq(1)),
            )
            step = pop & ~padding
        else:
            self.comb += [
                source.valid.eq((rptr != cptr) & ~(self._fresh & (rptr == cptr - 1))),
                source.data.eq(m_data),
                source.last.eq(m_last),
            ]
            step = pop
        self.comb += (rnext.eq(rptr + step) if start is None
                      else rnext.eq(Mux(start, start_adr, rptr + step)))
        self.sync += rptr.eq(rnext)
        return pop, last_out

    # ------------------------------------------------------------------------
    def _reclaim(self, n, ibits, aptr, tptr, pfifo, readers):
        """random_read: entry table in arrival order; room (and ``drained``, the
        credits) comes back in that order, one word per cycle. ``readers``: per read
        port (pop, last word, start, start entry)."""
        inuse = self._inuse
        words = [Signal(len(self.start_words), name=f"ewords{i}") for i in range(n)]
        done = [Signal(name=f"edone{i}") for i in range(n)]
        hptr = Signal(ibits)         # oldest entry
        rc = Signal(len(self.start_words))    # its words already given back
        alloc = Signal()
        self.comb += alloc.eq(self.pfifo.we)
        h_words = Signal(len(rc))
        h_done = Signal()
        avail = Signal(len(rc))
        strobe = Signal()
        free_h = Signal()
        # per read port: a packet is being read, its entry, its words read so far
        partial = None
        for j, (pop, last_out, start, start_idx) in enumerate(readers):
            reading = Signal(name=f"reading{j}")
            cur_idx = Signal(ibits, name=f"curidx{j}")
            rsent = Signal(len(self.start_words), name=f"rsent{j}")
            self.sync += [
                If(pop,
                    rsent.eq(rsent + 1),
                    If(last_out, reading.eq(0)),
                ),
                # (after the pop: a packet may start as the one before ends)
                If(start, reading.eq(1), cur_idx.eq(start_idx), rsent.eq(0)),
            ]
            for i in range(n):
                self.sync += If(pop & last_out & (cur_idx == i), done[i].eq(1))
            here = reading & (cur_idx == hptr)
            partial = If(here, avail.eq(rsent)) if partial is None else partial.Elif(here, avail.eq(rsent))
        self.comb += [
            h_words.eq(Array(words)[hptr]),
            h_done.eq(Array(done)[hptr]),
            If(h_done, avail.eq(h_words)).Else(partial),
            strobe.eq((inuse != 0) & (rc < avail)),
            free_h.eq(strobe & (rc + 1 == h_words)),
            self.drained.eq(strobe),
        ]
        #: random_read: entry number of the oldest packet held (arrival order)
        self.oldest = hptr

        def inc(x):
            return Mux(x == n - 1, 0, x + 1)
        self.sync += [
            inuse.eq(inuse + alloc - free_h),
            If(alloc, aptr.eq(inc(aptr))),
            If(strobe, tptr.eq(tptr + 1), rc.eq(rc + 1)),
            If(free_h, rc.eq(0), hptr.eq(inc(hptr))),
        ]
        for i in range(n):
            self.sync += If(alloc & (aptr == i), words[i].eq(self._pf_words_in), done[i].eq(0))

    # ------------------------------------------------------------------------
    def _store_write(self, sink, wr, pfifo, pf_words, pf_hword, beat, wptr, cptr, wcnt, drop,
                     max_packet_words, backpressure, head_word):
        """Store-and-forward write side: commit at the last beat, roll back on abort."""
        fits = Signal()      # this beat can be stored
        too_long = Signal()  # the packet already holds max_packet_words
        lost = Signal()      # the packet (with this beat) must be discarded
        stall = Signal()
        bcnt = Signal(len(self.abort_words))   # beats of the packet so far
        self.comb += [
            too_long.eq(wcnt == max_packet_words),
            fits.eq(~self.full & ~too_long & ~drop),
            # random_read: while every entry is taken the writer waits (ready does not
            # depend on the beat itself, as a producer may assume)
            stall.eq((self.full & ~too_long & ~drop) | self._table_full)
            if backpressure else stall.eq(0),
            sink.ready.eq(~stall),
            beat.eq(sink.valid & sink.ready),
            wr.adr.eq(wptr[:len(wptr) - 1]),
            wr.dat_w.eq(Cat(sink.data, sink.last, 0)),
            wr.we.eq(beat & fits),
            lost.eq(drop | ~fits | sink.error | ~pfifo.writable | self._table_full),
            self._pf_adr.eq(cptr),
            pf_words.eq(wcnt + 1),
            pfifo.we.eq(beat & sink.last & ~lost),
            self.committed.eq(pfifo.we),
            self.abort_words.eq(Mux(beat & sink.last & lost, bcnt + 1, 0)),
        ]
        if head_word:
            # header word 0 of the packet being written, for its packet-ready entry
            w0 = Signal(P.WORD_BITS)
            self.sync += If(beat & (bcnt == 0), w0.eq(sink.data))
            self.comb += pf_hword.eq(Mux(bcnt == 0, sink.data, w0))
        # A one-word packet committed at edge k is read at edge k as well (its only
        # word is written then): hold its valid back one cycle. Longer packets have
        # their first word written at least one edge before their commit.
        self._fresh = fresh = Signal()
        self.sync += [
            fresh.eq(0),
            If(beat,
                If(bcnt != max_packet_words + 1, bcnt.eq(bcnt + 1)),
                If(sink.last,
                    wcnt.eq(0),
                    bcnt.eq(0),
                    drop.eq(0),
                    If(lost,
                        wptr.eq(cptr),
                        self.aborted.eq(self.aborted + 1),
                    ).Else(
                        wptr.eq(wptr + 1),
                        cptr.eq(wptr + 1),
                        fresh.eq(wcnt == 0),
                    )
                ).Else(
                    If(fits,
                        wptr.eq(wptr + 1),
                        wcnt.eq(wcnt + 1),
                    ).Else(
                        drop.eq(1),
                    )
                )
            )
        ]

    def _cut_through_write(self, sink, wr, pfifo, pf_words, pf_hword, beat, wptr, cptr, wcnt,
                           drop, resv, max_packet_words):
        """Cut-through write side: announce at the first beat, never roll back."""
        self._fresh = Signal()
        decl = Signal(len(self.sink_words))   # declared words of this packet (first beat)
        cur = Signal(len(self.sink_words))    # ... latched for the rest of it
        starting = Signal()                   # this beat is a packet's first
        refused = Signal()                    # the first beat found no room: drop it all
        inpkt = Signal()                      # part-way through a packet
        at_end = Signal()                     # this beat fills the declared length
        n = Signal(len(self.sink_words))      # declared words of the current packet
        self.comb += [
            sink.ready.eq(1),
            beat.eq(sink.valid),
            starting.eq(beat & ~inpkt),
            decl.eq(Mux(self.sink_words > max_packet_words, max_packet_words,
                        Mux(self.sink_words == 0, 1, self.sink_words))),
            refused.eq((decl > self.free) | ~pfifo.writable),
            self._pf_adr.eq(wptr),
            n.eq(Mux(starting, decl, cur)),
            at_end.eq(wcnt + 1 == n),
            pf_words.eq(decl),
            pf_hword.eq(sink.data),
            pfifo.we.eq(starting & ~refused),
            self.committed.eq(pfifo.we),
            wr.adr.eq(wptr[:len(wptr) - 1]),
            # last word of the packet: its own last beat, or cut at the declared length
            # (then it carries error: the packet was longer than its SOF said).
            wr.dat_w.eq(Cat(sink.data, sink.last | at_end,
                            sink.error | (at_end & ~sink.last) | (sink.last & ~at_end))),
            wr.we.eq(beat & Mux(starting, ~refused, ~drop)),
        ]
        wrote = Signal()
        self.comb += wrote.eq(wr.we)
        # Reservation: the declared words are counted in ``level`` from the first beat.
        self.sync += [
            cptr.eq(wptr),  # a word written in cycle t is readable from t+2 (block RAM)
            If(beat,
                inpkt.eq(~sink.last),
                If(starting, cur.eq(decl), drop.eq(refused)),
                If(wrote,
                    wptr.eq(wptr + 1),
                    If(sink.last | at_end,
                        # random_read: a packet stored short keeps its declared room, so
                        # entries are reclaimed (and credited) by their declared words
                        wptr.eq(wptr + n - wcnt) if self.random_read else [],
                        wcnt.eq(0), drop.eq(~sink.last),
                        resv.eq(0),
                    ).Else(
                        wcnt.eq(wcnt + 1),
                        resv.eq(n - wcnt - 1),
                    ),
                ).Elif(sink.last,
                    wcnt.eq(0), drop.eq(0),
                ),
                If((starting & refused) | (wrote & at_end & ~sink.last),
                    self.aborted.eq(self.aborted + 1)),
            ),
        ]

    def add_csrs(self) -> None:
        """Status registers (level, packets, aborted) for the generated CSR map."""
        self._level = CSRStatus(len(self.level), description="Words held.")
        self._packets = CSRStatus(len(self.packets), description="Complete packets waiting.")
        self._aborted = CSRStatus(32, description="Packets discarded (error/overflow).")
        self.comb += [
            self._level.status.eq(self.level),
            self._packets.status.eq(self.packets),
            self._aborted.status.eq(self.aborted),
        ]
