"""Host interface: PIO transmit engine.

Each context stages one packet (16-byte header + payload) in its region of the PIO
buffer memory through its MMIO window and rings ``PIO_DOORBELL``. The engine serves
pending doorbells round-robin: it reads the header, checks it, stamps the source
fields and streams ``2 + ceil(length/8)`` words out of the buffer at one word per
cycle. The context's window stays locked (``PIO_BUSY``) from the doorbell until the
last word has left the buffer; then ``pio_done`` increments. A doorbell is served
only once the DMA descriptors the context posted before it (``TX_TAIL`` at the
doorbell) are done, so a context's sends leave in the order it posted them.

**Only staged bytes leave.** The engine sends only words written into the window since
the context's previous PIO packet ended (:class:`~paranic.hw.host_ctx.ContextState`
``pio_staged``: one past the highest 64-bit word written). A header whose packet needs
more words (``packet_words(length)``) than that is refused like a bad length (nothing
sent, ``pio_done`` and ``errors`` increment, ``err_length``). So a doorbell never sends
a word past the highest one written for this packet, whatever its header says; a word
below it that was not rewritten holds the same owner's earlier bytes. Together with
:class:`PioClear` (a context's buffer is zeroed at ``ctx_reset``, before it is handed to a
new owner, whose unwritten words are then zero), no owner of a context ever sends bytes
of a previous owner. The ``sw`` backend's NIC model (userlib/src/hal_sw_nic.c) applies
the same rule.
"""

from __future__ import annotations

from migen import Array, Cat, If, Module, Mux, Signal
from migen.genlib.fsm import FSM, NextState, NextValue
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from .common import hdr, packet_layout, packet_words
from .host_ctx import ContextState, RRPicker, user_type_ok


def pio_max_length(mtu: int) -> int:
    """Longest PIO payload: the MTU, or what the window holds after the header."""
    return min(mtu, P.PIO_WINDOW_BYTES - P.HEADER_BYTES)


def pio_buffer_words(mtu: int) -> int:
    """64-bit words of PIO buffer per context (a power of two)."""
    need = P.packet_words(pio_max_length(mtu))
    w = 1
    while w < need:
        w *= 2
    return w


def stamp_header(word0, out, node_id, ctx, keep_flags: int):
    """Statements: ``out`` = ``word0`` with src fields stamped, vc/direct/rt/rsvd zeroed and only
    the ``keep_flags`` bits of ``flags`` kept (``rt`` is stamped later, by NicCore's injection gate)."""
    return [
        out.eq(word0),
        hdr(out, "src_node").eq(node_id),
        hdr(out, "src_ctx").eq(ctx),
        hdr(out, "vc").eq(0),
        hdr(out, "direct").eq(0),   # link-local packets are the management port's
        hdr(out, "rt").eq(0),       # the injection gate stamps the routing-table set
        hdr(out, "rsvd").eq(0),
        hdr(out, "flags").eq(hdr(word0, "flags") & keep_flags),
    ]


class PioEngine(Module):
    """Drains doorbelled PIO buffers into ``source`` (packet_layout).

    ``rdport``: synchronous read port of the PIO buffer (address = Cat(word, ctx)).
    Header checks: type in ``P.USER_PACKET_TYPES``, ``length <= pio_max_length(mtu)``,
    the packet's words all staged (``packet_words(length) <= pio_staged``), and no
    window write refused since the previous doorbell. A refused packet sends
    nothing; ``pio_done`` and the context's ``errors`` both increment. A doorbell
    still pending when its context is disabled is dropped the same way.
    Strobes: ``err_length`` (too long or not staged), ``err_unstaged`` (not staged),
    ``err_type``, ``err_spoiled``.
    """

    def __init__(self, n_ctx: int, mtu: int, state: ContextState, rdport, pio_words: int) -> None:
        self.source = source = stream.Endpoint(packet_layout())
        self.node_id = Signal(P.NODE_BITS)
        self.err_length = Signal()
        self.err_unstaged = Signal()
        self.err_type = Signal()
        self.err_spoiled = Signal()
        self.busy = Signal()
        # The header bypass (inputs, HostPages.send_full/send_word with st.pio_db.ctx): a
        # whole-word PIO_SEND's word 0, kept so that the engine can offer the header in
        # the cycle after the doorbell instead of reading it back from the buffer first.
        self.byp_stb = Signal()
        self.byp_data = Signal(64)
        self.byp_ctx = Signal(P.CTX_BITS)

        # # #

        st = state
        max_len = pio_max_length(mtu)
        self.submodules.pick = pick = RRPicker(n_ctx)
        ctx = Signal(P.CTX_BITS)
        idx = Signal(max=pio_words + 1)
        nwords = Signal(max=pio_words + 1)
        offered = Signal()   # HDR: the first beat is on source (the decision is taken)
        stamped = Signal(64)
        word_bits = len(Signal(max=pio_words)) if pio_words > 1 else 0

        def radr(word, c):
            return Cat(word[:word_bits], c) if word_bits else c

        # The bypass register: the last whole-word PIO_SEND's word 0 and its context.
        # The window is locked from the doorbell until the packet has left, so the word
        # in the buffer stays equal to it; any other doorbell may be served first, and a
        # later doorbell without a whole-word PIO_SEND (PIO_DOORBELL, or PIO_SEND as two
        # 32-bit writes) clears it: those are read from the buffer.
        byp = Signal(64)
        byp_ctx = Signal(P.CTX_BITS)
        byp_ok = Signal()
        byp_used = Signal()
        self.sync += If(self.byp_stb,
            byp.eq(self.byp_data), byp_ctx.eq(self.byp_ctx), byp_ok.eq(1),
        ).Elif(st.pio_db.stb | byp_used,
            byp_ok.eq(0),
        )
        self.submodules.fsm = fsm = FSM(reset_state="IDLE")
        idle = fsm.ongoing("IDLE")
        hit = Signal()      # IDLE: the picked doorbell's header is in the bypass register
        self.comb += hit.eq(idle & pick.valid & byp_ok & (pick.grant == byp_ctx))
        cx = Signal(P.CTX_BITS)   # the context checked: the bypass's in IDLE, else ctx
        self.comb += cx.eq(Mux(idle, byp_ctx, ctx))
        w0 = Signal(64)
        self.comb += w0.eq(Mux(idle, byp, rdport.dat_r))
        length = hdr(w0, "length")
        bad_len = Signal()
        unstaged = Signal()
        bad_type = Signal()
        refused = Signal()
        disabled = Signal()
        self.comb += [
            # a doorbell waits for the DMA descriptors posted before it (send order)
            # (a disabled context's pending doorbell is flushed at once, unsent)
            pick.request.eq(Cat(*[st.pio_pending[i] & ((st.tx_done[i] == st.pio_after[i])
                                                       | ~st.enable[i])
                                  for i in range(n_ctx)])),
            disabled.eq(~Array(list(st.enable))[cx]),
            *stamp_header(w0, stamped, self.node_id, cx, int(P.Flags.SOM | P.Flags.EOM)),
            bad_len.eq(length > max_len),
            unstaged.eq(packet_words(length) > Array(st.pio_staged)[cx]),
            bad_type.eq(~user_type_ok(hdr(w0, "type"))),
            refused.eq(Array(st.pio_refuse)[cx]),
            st.pio_fin.ctx.eq(cx),
        ]

        # HDR checks header word 0 as it comes out of the buffer and, when it passes,
        # offers the stamped word at once (the packet's first beat leaves in the cycle
        # the header is read, not one later); SEND streams the rest. A doorbell whose
        # header is in the bypass register skips the read: IDLE checks and offers it
        # (as HDR does) in the cycle it is picked, fetching word 1 once it is taken (or
        # word 0, for HDR, while it waits).
        xfer = source.valid & source.ready
        ok = Signal()
        next_word = Signal(max(word_bits, 1))   # word 0 until the first beat is taken, then 1
        self.comb += [ok.eq(~(refused | bad_len | bad_type | unstaged | disabled)),
                      next_word.eq(xfer)]

        def offer(c):
            return [
                self.busy.eq(1),
                source.valid.eq(1),
                source.first.eq(1),
                source.data.eq(stamped),
                # keep word 0 on dat_r until it is taken, then fetch word 1
                rdport.adr.eq(radr(next_word, c)),
                NextValue(offered, 1),   # a valid beat stays offered until taken
                NextValue(nwords, packet_words(length)),
                If(xfer,
                    NextValue(idx, 1),
                    NextState("SEND"),
                ).Else(
                    NextState("HDR"),
                ),
            ]

        def refuse():
            return [
                st.pio_fin.stb.eq(1),
                st.pio_fin.data.eq(1),
                If(disabled,
                ).Elif(refused, self.err_spoiled.eq(1)
                ).Elif(bad_type, self.err_type.eq(1)
                ).Else(self.err_length.eq(1), self.err_unstaged.eq(~bad_len)),
            ]

        fsm.act("IDLE",
            rdport.adr.eq(radr(Signal(max(word_bits, 1)), pick.grant)),
            NextValue(offered, 0),
            If(pick.valid,
                pick.take.eq(1),
                NextValue(ctx, pick.grant),
                If(hit,
                    byp_used.eq(1),
                    If(~ok,
                        *refuse(),
                    ).Else(*offer(byp_ctx)),
                ).Else(
                    NextState("HDR"),
                ),
            ),
        )
        fsm.act("HDR",  # dat_r = header word 0
            If(~ok & ~offered,
                *refuse(),
                NextState("IDLE"),
            ).Else(*offer(ctx)),
        )
        fsm.act("SEND",
            self.busy.eq(1),
            source.valid.eq(1),
            source.last.eq(idx == nwords - 1),
            source.data.eq(rdport.dat_r),
            rdport.adr.eq(radr(idx + xfer, ctx)),
            If(xfer,
                NextValue(idx, idx + 1),
                If(source.last,
                    st.pio_fin.stb.eq(1),
                    NextState("IDLE"),
                ),
            ),
        )


class PioClear(Module):
    """Zeroes the PIO buffer region of every context whose ``pio_clear`` is set (set by
    ``ctx_reset``), one context at a time, then reports ``pio_cleared`` for it.

    It writes through ``wp`` (the buffer's write port, ``pio_words`` words per context)
    only on cycles when ``busy_in`` (the MMIO side writing) is low, so window writes of
    other contexts are never delayed; on a board MMIO writes arrive at most every other
    cycle (a PCIe write request is at least two beats of the 64-bit datapath), so a
    region takes at most ``2 * pio_words`` cycles (a bus master that writes in every
    cycle, as the simulator's may, delays it while it does). ``STATE.pio_busy`` stays set until it
    is done: the hand-over sequence waits for it before it enables the context.
    """

    def __init__(self, n_ctx: int, state: ContextState, wp, pio_words: int, busy_in) -> None:
        self.busy = Signal()

        # # #

        st = state
        word_bits = len(Signal(max=pio_words)) if pio_words > 1 else 0
        self.submodules.pick = pick = RRPicker(n_ctx)
        ctx = Signal(P.CTX_BITS)
        idx = Signal(max=max(pio_words, 2))
        go = Signal()
        self.comb += [
            pick.request.eq(st.pio_clear),
            go.eq(self.busy & ~busy_in),
            st.pio_cleared.ctx.eq(ctx),
        ]
        self.sync += [
            If(~self.busy,
                If(pick.valid,
                    self.busy.eq(1),
                    ctx.eq(pick.grant),
                    idx.eq(0),
                ),
            ).Elif(go,
                idx.eq(idx + 1),
                If(idx == pio_words - 1, self.busy.eq(0)),
            ),
        ]
        self.comb += [
            pick.take.eq(~self.busy & pick.valid),
            If(go,
                wp.adr.eq(Cat(idx[:word_bits], ctx) if word_bits else ctx),
                wp.dat_w.eq(0),
                wp.we.eq(2 ** len(wp.we) - 1),
                st.pio_cleared.stb.eq(idx == pio_words - 1),
            ),
        ]
