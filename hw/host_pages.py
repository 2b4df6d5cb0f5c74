"""Host interface: the context pages (Wishbone slave, doorbells, PIO window writes).

Context ``c``'s 4 KiB page is at byte offset ``c * P.CTX_PAGE_BYTES`` of ``bus``, a
**64-bit** LiteX Wishbone slave (word addresses in 8-byte words, ``sel`` one bit per
byte). A 64-bit store is one bus beat; a 32-bit store is a beat with four ``sel`` bits
(``0x0F`` at an 8-aligned offset, ``0xF0`` at offset + 4). The block decodes word-address
bits ``[0:9]`` (offset in the page) and ``[9:9+P.CTX_BITS]`` (context), i.e. a 256 KiB
region; higher address bits are ignored. A write is acknowledged in the cycle it is
presented (combinationally: one store per cycle back to back), a read one cycle after; writes to undefined offsets or to contexts ``>= n_ctx`` are ignored, reads
of anything but the read-only registers of ``P.CtxReg`` return 0.

The registers are 32 bits wide on an 8-byte stride: a register is written by the bytes
in the low half of its 8-byte word (``sel[0:4]`` not all zero, value ``dat_w[0:32]``)
and read in ``dat_r[0:32]``. ``PIO_SEND`` is the exception, a 64-bit register: the
store+doorbell (:class:`HostPages`).
"""

from __future__ import annotations

from migen import Array, Cat, If, Module, Mux, Signal, log2_int
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

    **Store+doorbell** (``P.CtxReg.PIO_SEND``): a write there is a write of PIO window
    word 0 (the header word that holds ``length``) with the same byte enables, and when
    its bytes include the upper half (``sel[4:8]``, where ``length`` and ``flags`` live)
    it also rings ``PIO_DOORBELL`` in the same cycle. The word is stored and staged in
    that cycle; the PIO engine reads it two cycles later at the earliest, so the doorbell
    sees it. A 64-bit store is one beat; split into two 32-bit writes (a 32-bit bus,
    low half first, as PCIe and the Wishbone converters order them) the second one rings.
    ``rx_inc_now`` (input, n_ctx): RX tail increments happening this cycle (so an
    IRQ_ARM racing with a new packet still interrupts).
    """

    def __init__(self, n_ctx: int, state: ContextState, pio_wp, pio_words: int) -> None:
        self.bus = bus = wishbone.Interface(data_width=64, address_width=32, addressing="word")
        self.barrier_enter = Signal()
        self.barrier_enter_ctx = Signal(P.CTX_BITS)
        self.irq = Signal(n_ctx)
        self.err_pio = Signal()
        self.send_full = Signal()      # out: a 64-bit PIO_SEND rang the doorbell (ctx: st.pio_db.ctx)
        self.send_word = Signal(64)    # out: its word (window word 0)
        self.err_ptr = Signal()
        self.rx_inc_now = Signal(n_ctx)

        # # #

        st = state
        page_words = P.CTX_PAGE_BYTES // 8
        pb = log2_int(page_words)
        ctx_full = Signal(P.CTX_BITS)
        off = Signal(pb + 3)  # byte offset within the page (8-byte aligned)
        ctx = Signal(P.CTX_BITS)
        exists = Signal()
        enabled = Signal()
        access = Signal()
        wr = Signal()
        rack = Signal()       # a read's acknowledge (registered)
        lo = Signal()         # the beat carries bytes of the low half (a register's value)
        hi = Signal()         # ... of the high half
        self.comb += [
            ctx_full.eq(bus.adr[pb:pb + P.CTX_BITS]),
            off.eq(Cat(Signal(3), bus.adr[:pb])),
            exists.eq(ctx_full < n_ctx),
            ctx.eq(ctx_full),
            enabled.eq(exists & Array(st.enable)[ctx]),
            # A write depends on the bus inputs alone (not on ``rack``): its combinational
            # ``ack`` is the same before and after the clock edge, so a master that
            # samples ``ack`` after the edge (cocotb) sees it for the write that edge
            # made, also right after a read.
            access.eq(bus.cyc & bus.stb & (bus.we | ~rack)),
            wr.eq(access & bus.we),
            lo.eq(bus.sel[:4] != 0),
            hi.eq(bus.sel[4:] != 0),
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
        data = bus.dat_w[:32]   # a 32-bit register's value

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

        # PIO window (and PIO_SEND, an alias of its word 0).
        win_lo = P.PIO_WINDOW_OFFSET
        assert win_lo % P.PIO_WINDOW_BYTES == 0 and P.PIO_WINDOW_BYTES & (P.PIO_WINDOW_BYTES - 1) == 0
        assert not win_lo <= int(R.PIO_SEND) < win_lo + P.PIO_WINDOW_BYTES
        wb_bits = log2_int(P.PIO_WINDOW_BYTES)
        pw_bits = log2_int(pio_words)
        send = Signal()       # a write to PIO_SEND: window word 0 (+ doorbell)
        in_window = Signal()
        word = Signal(wb_bits - 3)
        self.comb += [
            send.eq(reg(R.PIO_SEND)),
            in_window.eq(off[wb_bits:] == (win_lo >> wb_bits)),
            word.eq(Mux(send, 0, off[3:wb_bits])),
            pio_wp.adr.eq(Cat(word[:pw_bits], ctx) if pw_bits else ctx),
            pio_wp.dat_w.eq(bus.dat_w),
            st.pio_stage.data.eq(word[:pw_bits] + 1 if pw_bits else 1),
        ]
        fits = (word >> pw_bits) == 0 if pw_bits < len(word) else 1

        ring = Signal()       # PIO_DOORBELL, or PIO_SEND's upper half
        doorbell = Signal()   # any doorbell-like register write
        self.comb += [
            ring.eq((reg(R.PIO_DOORBELL) & lo) | (send & hi)),
            doorbell.eq(ring | ((reg(R.TX_TAIL) | reg(R.RX_HEAD) | reg(R.BARRIER) | reg(R.IRQ_ARM)) & lo)),
        ]
        self.comb += If(wr & exists,
            If((in_window | send) & enabled,
                If(pending,
                    st.pio_spoil.stb.eq(1),
                    self.err_pio.eq(1),
                ).Elif(fits,
                    pio_wp.we.eq(bus.sel),
                    st.pio_stage.stb.eq(bus.sel != 0),
                ),
            ),
        ).Elif(wr & ~exists & doorbell,
            self.err_pio.eq(1),
        )
        # A whole-word PIO_SEND whose doorbell is taken: the PIO engine may send the
        # header word from here (``send_word``) instead of reading it back from the
        # buffer (PioEngine, "bypass").
        self.comb += [
            self.send_full.eq(st.pio_db.stb & send & (bus.sel == 0xFF)),
            self.send_word.eq(bus.dat_w),
        ]
        self.comb += If(wr & exists & doorbell,
            If(~enabled,
                self.err_pio.eq(1),
            ).Elif(ring,
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
        # A write is acknowledged in the cycle it is presented (it takes effect at that
        # clock edge), so back-to-back stores move one per cycle; a read one cycle later
        # (its data registered).
        self.comb += bus.ack.eq(wr | rack)
        self.sync += [
            rack.eq(access & ~bus.we),
            If(access & ~bus.we, bus.dat_r.eq(rdata)),   # low half; the high half reads 0
        ]
