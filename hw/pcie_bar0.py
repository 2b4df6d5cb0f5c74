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
"""

from __future__ import annotations

from migen import If, Signal, FSM, NextState, NextValue
from litex.gen import LiteXModule
from litex.soc.interconnect import wishbone


class Bar0Master(LiteXModule):
    """``port``: a crossbar slave port (``sink``: requests, ``source``: completions,
    ``request_layout``/``completion_layout`` at ``data_width``); ``cmp_id``: the
    completer id (the PHY's ``id``). ``self.wishbone``: 32-bit, word addressed, BAR0
    offset / 4 (``base_address`` added)."""

    def __init__(self, port, cmp_id, data_width: int = 64, base_address: int = 0) -> None:
        if data_width % 32 or data_width < 32:
            raise ValueError(f"Bar0Master: data_width {data_width} is not a multiple of 32")
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
