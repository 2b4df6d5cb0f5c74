"""Host interface: the context pages (Wishbone slave, doorbells, PIO window writes).

Context ``c``'s 4 KiB page is at byte offset ``c * P.CTX_PAGE_BYTES`` of ``bus`` (a
32-bit LiteX Wishbone slave, word addresses). The block decodes word-address bits
``[0:10]`` (offset in the page) and ``[10:10+P.CTX_BITS]`` (context), i.e. a 256 KiB
region; higher address bits are ignored. Every access is acknowledged one cycle
after it is presented; writes to undefined offsets or to contexts ``>= n_ctx`` are
ignored, reads of anything but the read-only registers of ``P.CtxReg`` return 0.
"""

from __future__ import annotations

from migen import Array, Cat, If, Module, Signal, log2_int
from litex.soc.interconnect import wishbone

from paranic.spec import protocol as P

from .host_ctx import ContextState

R = P.CtxReg


class HostPages(Module):
    """Decodes MMIO accesses into context events.

    ``state``: the :class:`ContextState` (read for checks and register reads; its
    MMIO-side events are driven from here). ``pio_wp``: write port of the PIO buffer
    memory (64-bit words, byte write enables; anything with ``adr``, ``dat_w``, ``we``),
    ``pio_words`` 64-bit words per context (a power of two; window writes beyond it are
    ignored). Every window write it stores reports its word (``pio_stage``): the PIO
    engine sends only words staged since the last packet. The window is locked (writes
    refused, doorbell refused) while a packet is pending or the buffer is being cleared.

    Outputs: ``barrier_enter``/``barrier_enter_ctx``, ``irq`` (n_ctx, pulses from
    IRQ_ARM when packets are already waiting), ``err_pio``/``err_ptr`` strobes.
    ``rx_inc_now`` (input, n_ctx): RX tail increments happening this cycle (so an
    IRQ_ARM racing with a new packet still interrupts).
    """

    def __init__(self, n_ctx: int, state: ContextState, pio_wp, pio_words: int) -> None:
        self.bus = bus = wishbone.Interface(data_width=32, adr_width=30)
        self.barrier_enter = Signal()
        self.barrier_enter_ctx = Signal(P.CTX_BITS)
        self.irq = Signal(n_ctx)
        self.err_pio = Signal()
        self.err_ptr = Signal()
        self.rx_inc_now = Signal(n_ctx)

        # # #

        st = state
        page_words = P.CTX_PAGE_BYTES // 4
        pb = log2_int(page_words)
        ctx_full = Signal(P.CTX_BITS)
        off = Signal(pb + 2)  # byte offset within the page
        ctx = Signal(P.CTX_BITS)
        exists = Signal()
        enabled = Signal()
        access = Signal()
        wr = Signal()
        self.comb += [
            ctx_full.eq(bus.adr[pb:pb + P.CTX_BITS]),
            off.eq(Cat(Signal(2), bus.adr[:pb])),
            exists.eq(ctx_full < n_ctx),
            ctx.eq(ctx_full),
            enabled.eq(exists & Array(st.enable)[ctx]),
            access.eq(bus.cyc & bus.stb & ~bus.ack),
            wr.eq(access & bus.we),
        ]

        def reg(r):
            return off == int(r)

        # Per-context values for the addressed context.
        rx_tail = Array(st.rx_tail)[ctx]
        rx_head = Array(st.rx_head)[ctx]
        tx_tail = Array(st.tx_tail)[ctx]
        tx_done = Array(st.tx_done)[ctx]
        rx_mask = Array(st.rx_mask)[ctx]
        tx_mask = Array(st.tx_mask)[ctx]
        # The window is locked while a packet is pending and while the buffer is being
        # zeroed after a reset (the context then belongs to no one yet).
        pending = Array(st.pio_pending)[ctx] | Array(st.pio_clear)[ctx]
        data = bus.dat_w

        # Event plumbing: all MMIO events carry the addressed context.
        events = (st.pio_db, st.pio_db_refused, st.pio_spoil, st.pio_stage, st.rx_head_wr, st.tx_tail_wr,
                  st.ptr_err, st.arm_set)
        self.comb += [ev.ctx.eq(ctx) for ev in events]
        self.comb += [st.rx_head_wr.data.eq(data), st.tx_tail_wr.data.eq(data),
                      self.barrier_enter_ctx.eq(ctx)]

        # Pointer checks (32-bit modular arithmetic).
        tx_p_old = Signal(32)
        tx_p_new = Signal(32)
        tx_slots = Signal(18)
        rx_q_old = Signal(32)
        rx_q_new = Signal(32)
        tail_now = Signal(32)
        self.comb += [
            tx_p_old.eq(tx_tail - tx_done),
            tx_p_new.eq(data - tx_done),
            tx_slots.eq(tx_mask + 1),
            rx_q_old.eq(rx_tail - rx_head),
            rx_q_new.eq(rx_tail - data),
            tail_now.eq(rx_tail + Array(list(self.rx_inc_now))[ctx]),
        ]

        # PIO window.
        win_lo = P.PIO_WINDOW_OFFSET
        assert win_lo % P.PIO_WINDOW_BYTES == 0 and P.PIO_WINDOW_BYTES & (P.PIO_WINDOW_BYTES - 1) == 0
        wb_bits = log2_int(P.PIO_WINDOW_BYTES)
        pw_bits = log2_int(pio_words)
        in_window = Signal()
        word = Signal(wb_bits - 3)
        self.comb += [
            in_window.eq(off[wb_bits:] == (win_lo >> wb_bits)),
            word.eq(off[3:wb_bits]),
            pio_wp.adr.eq(Cat(word[:pw_bits], ctx) if pw_bits else ctx),
            pio_wp.dat_w.eq(Cat(data, data)),
            st.pio_stage.data.eq(word[:pw_bits] + 1 if pw_bits else 1),
        ]
        fits = (word >> pw_bits) == 0 if pw_bits < len(word) else 1

        doorbell = Signal()
        self.comb += doorbell.eq(reg(R.PIO_DOORBELL) | reg(R.TX_TAIL) | reg(R.RX_HEAD)
                                 | reg(R.BARRIER) | reg(R.IRQ_ARM))
        self.comb += If(wr & exists,
            If(in_window & enabled,
                If(pending,
                    st.pio_spoil.stb.eq(1),
                    self.err_pio.eq(1),
                ).Elif(fits,
                    If(off[2], pio_wp.we.eq(Cat(Signal(4), bus.sel))
                    ).Else(pio_wp.we.eq(bus.sel)),
                    st.pio_stage.stb.eq(bus.sel != 0),
                ),
            ),
        ).Elif(wr & ~exists & doorbell,
            self.err_pio.eq(1),
        )
        self.comb += If(wr & exists & doorbell,
            If(~enabled,
                self.err_pio.eq(1),
            ).Elif(reg(R.PIO_DOORBELL),
                If(pending,
                    st.pio_db_refused.stb.eq(1),
                    self.err_pio.eq(1),
                ).Else(
                    st.pio_db.stb.eq(1),
                ),
            ).Elif(reg(R.TX_TAIL),
                If((tx_p_new >= tx_p_old) & (tx_p_new <= tx_slots),
                    st.tx_tail_wr.stb.eq(1),
                ).Else(
                    st.ptr_err.stb.eq(1),
                    self.err_ptr.eq(1),
                ),
            ).Elif(reg(R.RX_HEAD),
                If(rx_q_new <= rx_q_old,
                    st.rx_head_wr.stb.eq(1),
                ).Else(
                    st.ptr_err.stb.eq(1),
                    self.err_ptr.eq(1),
                ),
            ).Elif(reg(R.BARRIER),
                self.barrier_enter.eq(1),
            ).Elif(reg(R.IRQ_ARM),
                If(data != tail_now,
                    *[self.irq[i].eq(ctx == i) for i in range(n_ctx)],
                ).Else(
                    st.arm_set.stb.eq(1),
                ),
            ),
        )

        # Reads.
        status = Signal(32)
        rdata = Signal(32)
        self.comb += [
            status.eq(
                (enabled * int(P.StatusBit.ENABLED))
                | (pending * int(P.StatusBit.PIO_BUSY))
                | ((tx_tail != tx_done) * int(P.StatusBit.TX_BUSY))
                | ((rx_q_old > rx_mask) * int(P.StatusBit.RX_FULL))
                | (Array(st.irq_armed)[ctx] * int(P.StatusBit.IRQ_ARMED))),
            If(exists,
                If(reg(R.STATUS), rdata.eq(status)),
                If(reg(R.RX_TAIL), rdata.eq(rx_tail)),
                If(reg(R.TX_HEAD), rdata.eq(tx_done)),
                If(reg(R.PIO_DONE), rdata.eq(Array(st.pio_done)[ctx])),
                If(reg(R.ERRORS), rdata.eq(Array(st.errors)[ctx])),
            ),
        ]
        self.sync += [
            bus.ack.eq(access),
            If(access, bus.dat_r.eq(rdata)),
        ]
