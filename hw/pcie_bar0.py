"""BAR0 as a Wishbone master: memory requests from LitePCIe's crossbar -> Wishbone.

Finding (LitePCIe 2024.12, ``litepcie.frontend.wishbone.LitePCIeWishboneMaster``): a
memory write of n dwords is turned into ONE Wishbone write (the first dword); the other
dwords of the request are consumed and dropped. A CPU's 64-bit store to BAR0 reaches the
device as one 2-dword MWr (x86 ``movq``/``movnti``, arm64 ``str x``), so the upper half of
every 64-bit PIO store was lost (the S7 pair bench in ``tests/cocotb/soc`` sees it;
``tests/hw/test_pcie_bar0.py`` shows it on LitePCIe's class).

:class:`Bar0Master` writes every dword of a request, one Wishbone write each at
consecutive word addresses (``sel`` 0xF; the request's first/last byte enables are not
carried by LitePCIe's request layout), and answers reads with one dword, as LitePCIe's
does (the host model and the driver read 32 bits at a time).

With ``wishbone_width=64`` the Wishbone side is 64 bits wide (word addresses in 8-byte
words, ``sel`` per byte): the dwords of a request are gathered per 8-byte-aligned qword
and each qword becomes ONE Wishbone write with the ``sel`` of the dwords it carries. A
CPU's 64-bit store (one 2-dword MWr at an 8-aligned address) is then one beat on the bus
(``P.CtxReg.PIO_SEND``, the store+doorbell, needs nothing more); a 1-dword write is one
beat with ``sel`` 0x0F or 0xF0; an unaligned 2-dword write is two beats. A read returns
the addressed dword's half.
"""

from __future__ import annotations

from migen import If, Mux, Signal, FSM, NextState, NextValue
from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone


class Bar0Master(LiteXModule):
    """``port``: a crossbar slave port (``sink``: requests, ``source``: completions,
    ``request_layout``/``completion_layout`` at ``data_width``); ``cmp_id``: the
    completer id (the PHY's ``id``). ``self.wishbone``: ``wishbone_width`` (32 or 64)
    bits, word addressed, BAR0 offset / (``wishbone_width`` / 8) (``base_address``
    added)."""

    def __init__(self, port, cmp_id, data_width: int = 64, base_address: int = 0,
                 wishbone_width: int = 32) -> None:
        if data_width % 32 or data_width < 32:
            raise ValueError(f"Bar0Master: data_width {data_width} is not a multiple of 32")
        if wishbone_width not in (32, 64):
            raise ValueError(f"Bar0Master: wishbone_width must be 32 or 64, not {wishbone_width}")
        if wishbone_width == 64:
            self._wide(port, cmp_id, data_width, base_address)
            return
        self.wishbone = bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")

        # # #

        sink, source = port.sink, port.source
        n_dw = data_width // 32                      # dwords per request beat
        adr = Signal(30)                             # word address of the current dword
        remaining = Signal(10)                       # dwords left to write (len 0 = 1024)
        index = Signal(max=max(n_dw, 2))            # dword of the current beat
        rdata = Signal(32)
        dwords = [sink.dat[32 * i:32 * (i + 1)] for i in range(n_dw)]

        self.comb += [bus.sel.eq(0xF), bus.adr.eq(adr)]
        # The write data: dword `index` of the beat at the head of the request stream.
        self.comb += bus.dat_w.eq(dwords[0])
        for i in range(1, n_dw):
            self.comb += If(index == i, bus.dat_w.eq(dwords[i]))

        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            If(sink.valid & sink.first,
                NextValue(adr, sink.adr[2:] + (base_address >> 2)),
                NextValue(remaining, sink.len),
                NextValue(index, 0),       # the depacketizer puts dword 0 first in the beat
                If(sink.we, NextState("WRITE")).Else(NextState("READ")),
            ).Else(
                sink.ready.eq(1),                    # stray beats (no first): dropped
            ),
        )
        last_dword = remaining == 1
        beat_done = (index == n_dw - 1) | last_dword
        fsm.act("WRITE",
            bus.cyc.eq(1), bus.stb.eq(1), bus.we.eq(1),
            If(bus.ack,
                NextValue(adr, adr + 1),
                NextValue(remaining, remaining - 1),
                NextValue(index, index + 1),
                If(beat_done,
                    NextValue(index, 0),
                    sink.ready.eq(1),                # this beat's dwords are written
                    If(last_dword,
                        If(~sink.last, NextState("DRAIN")).Else(NextState("IDLE")),
                    ).Elif(sink.last,
                        NextState("IDLE"),           # shorter than its length: stop
                    ),
                ),
            ),
        )
        fsm.act("DRAIN",                            # beats past the request's length
            sink.ready.eq(1),
            If(sink.valid & sink.last, NextState("IDLE")),
        )
        fsm.act("READ",
            bus.cyc.eq(1), bus.stb.eq(1), bus.we.eq(0),
            If(bus.ack,
                NextValue(rdata, bus.dat_r),
                NextState("COMPLETE"),
            ),
        )
        self._complete(fsm, sink, source, cmp_id, rdata)

    def _wide(self, port, cmp_id, data_width: int, base_address: int) -> None:
        """The 64-bit Wishbone side: one write per 8-byte-aligned qword of a request."""
        self.wishbone = bus = wishbone.Interface(data_width=64, address_width=32, addressing="word")

        # # #

        sink, source = port.sink, port.source
        n_dw = data_width // 32
        adr = Signal(30)                             # dword address of the next dword
        remaining = Signal(10)                       # dwords left (len 0 = 1024)
        index = Signal(max=max(n_dw, 2))            # dword of the current beat
        acc = Signal(64)                             # the qword being gathered
        acc_sel = Signal(8)
        wadr = Signal(29)                            # its qword address
        after = Signal(2)                            # after the write: 0 gather, 1 idle, 2 drain
        rdata = Signal(32)
        dwords = [sink.dat[32 * i:32 * (i + 1)] for i in range(n_dw)]
        dword = Signal(32)
        self.comb += dword.eq(dwords[0])
        for i in range(1, n_dw):
            self.comb += If(index == i, dword.eq(dwords[i]))

        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            NextValue(acc_sel, 0),
            If(sink.valid & sink.first,
                NextValue(adr, sink.adr[2:] + (base_address >> 2)),
                NextValue(remaining, sink.len),
                NextValue(index, 0),
                If(sink.we, NextState("GATHER")).Else(NextState("READ")),
            ).Else(
                sink.ready.eq(1),                    # stray beats (no first): dropped
            ),
        )
        last_dword = remaining == 1
        beat_done = (index == n_dw - 1) | last_dword
        upper = adr[0]
        fsm.act("GATHER",                           # one dword per cycle into the qword
            If(sink.valid,
                If(upper,
                    NextValue(acc[32:], dword), NextValue(acc_sel[4:], 0xF),
                ).Else(
                    NextValue(acc[:32], dword), NextValue(acc_sel[:4], 0xF),
                ),
                NextValue(wadr, adr[1:]),
                NextValue(adr, adr + 1),
                NextValue(remaining, remaining - 1),
                NextValue(index, index + 1),
                If(beat_done,
                    NextValue(index, 0),
                    sink.ready.eq(1),
                ),
                # the qword is complete (its upper dword), or the request ends here
                If(upper | last_dword | (beat_done & sink.last),
                    NextValue(after, 0),
                    If(last_dword,
                        NextValue(after, Mux(sink.last, 1, 2)),
                    ).Elif(beat_done & sink.last,
                        NextValue(after, 1),         # shorter than its length: stop
                    ),
                    NextState("WRITE"),
                ),
            ),
        )
        fsm.act("WRITE",
            bus.cyc.eq(1), bus.stb.eq(1), bus.we.eq(1),
            bus.adr.eq(wadr), bus.dat_w.eq(acc), bus.sel.eq(acc_sel),
            If(bus.ack,
                NextValue(acc_sel, 0),
                If(after == 0, NextState("GATHER")
                ).Elif(after == 1, NextState("IDLE")
                ).Else(NextState("DRAIN")),
            ),
        )
        fsm.act("DRAIN",
            sink.ready.eq(1),
            If(sink.valid & sink.last, NextState("IDLE")),
        )
        fsm.act("READ",
            bus.cyc.eq(1), bus.stb.eq(1), bus.we.eq(0),
            bus.adr.eq(adr[1:]), bus.sel.eq(Mux(upper, 0xF0, 0x0F)),
            If(bus.ack,
                NextValue(rdata, Mux(upper, bus.dat_r[32:], bus.dat_r[:32])),
                NextState("COMPLETE"),
            ),
        )
        self._complete(fsm, sink, source, cmp_id, rdata)

    def _complete(self, fsm, sink, source, cmp_id, rdata) -> None:
        """A read's completion (both bus widths): one dword, ``rdata``, answering the
        request at the head of ``sink``; then the request's beat is taken (state COMPLETE)."""
        self.comb += [
            source.first.eq(1), source.last.eq(1), source.len.eq(1), source.err.eq(0),
            source.end.eq(1),
            source.tag.eq(sink.tag), source.adr.eq(sink.adr), source.req_id.eq(sink.req_id),
            source.cmp_id.eq(cmp_id), source.dat.eq(rdata),
        ]
        fsm.act("COMPLETE",
            source.valid.eq(1),
            If(source.ready,
                sink.ready.eq(1),                    # the read request's (only) beat
                If(sink.last, NextState("IDLE")).Else(NextState("DRAIN")),
            ),
        )


__all__ = ["Bar0Master"]
