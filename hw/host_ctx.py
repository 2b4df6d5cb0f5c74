"""Host interface: per-context configuration and state.

* :class:`ContextConfig` holds the privileged, driver-written configuration of every
  context (ring bases, sizes, status-block address, DMA window). The 64-bit
  addresses live in small memories (one per consumer, LUT RAM), written through
  ``cfg_*`` plain signals (the CSRs of :class:`~paranic.hw.host.HostInterface`
  drive them).
* :class:`ContextState` holds the per-context counters and flags (ring pointers,
  PIO/TX/barrier completion counts, errors, IRQ arm, PIO busy) and applies the
  events the engines send it. Every counter is absolute, modulo 2**32.
* :class:`RRPicker`: combinational round-robin choice among requesters.
"""

from __future__ import annotations

from migen import Array, Case, Cat, If, Memory, Module, Signal

from paranic.spec import protocol as P

#: Packet types a context may send (PIO header or DMA descriptor); BARRIER and
#: CONTROL belong to the NIC itself.
USER_TYPES = P.USER_PACKET_TYPES

#: Largest ring (RX or TX) in slots, as log2; larger ``*_log2`` values are clamped.
MAX_RING_LOG2 = 16


def user_type_ok(t: Signal):
    """Expression: packet type ``t`` may be sent by a user context."""
    e = 0
    for ty in USER_TYPES:
        e = e | (t == int(ty))
    return e


class RRPicker(Module):
    """Round-robin choice: ``grant`` is the first requester after the last one taken.

    ``request`` (n bits) in, ``valid``/``grant`` out (combinational), ``take`` strobes
    that ``grant`` was served (the search then starts after it).
    """

    def __init__(self, n: int) -> None:
        self.request = Signal(n)
        self.grant = Signal(max=max(n, 2))
        self.valid = Signal()
        self.take = Signal()

        last = Signal(max=max(n, 2), reset=n - 1)
        cases = {}
        for l in range(n):
            stmt = []
            for t in reversed([(l + 1 + k) % n for k in range(n)]):
                stmt = [If(self.request[t], self.grant.eq(t)).Else(*stmt)]
            cases[l] = stmt
        cases["default"] = cases[0]
        self.comb += [Case(last, cases), self.valid.eq(self.request != 0)]
        self.sync += If(self.take, last.eq(self.grant))


class Ev:
    """An event towards :class:`ContextState`: strobe, context, optional data."""

    def __init__(self, data_bits: int = 0) -> None:
        self.stb = Signal()
        self.ctx = Signal(P.CTX_BITS)
        self.data = Signal(max(data_bits, 1))

    def hit(self, i: int):
        return self.stb & (self.ctx == i)


def log2_mask(log2: Signal, bits: int = MAX_RING_LOG2):
    """``(1 << min(log2, bits)) - 1`` as a ``bits``-wide expression (bit i = log2 > i)."""
    return Cat(*[log2 > i for i in range(bits)])


class ContextConfig(Module):
    """Privileged per-context configuration (written by the kernel driver only).

    Plain-signal interface: set ``cfg_ctx`` and the ``cfg_*`` fields, strobe
    ``cfg_write`` to store them into that context (``cfg_ctx >= n_ctx``: ignored).
    The low bits of the ring bases and of the status address are ignored (rx_base:
    64-byte, tx_base: 32-byte, status: 16-byte alignment), so the NIC never writes
    or reads before the start of a ring even if the driver passes a misaligned base.
    Read ports (asynchronous, one per consumer): ``rx_base_rd`` (RX engine),
    ``tx_base_rd`` (descriptor fetcher), ``win_rd`` (descriptor checker: dat_r =
    Cat(win_base, win_size)), ``st_rd`` (status writer).
    """

    def __init__(self, n_ctx: int, address_width: int = 64) -> None:
        aw = address_width
        self.cfg_ctx = Signal(P.CTX_BITS)
        self.cfg_enable = Signal()
        self.cfg_rx_base = Signal(aw)
        self.cfg_rx_log2 = Signal(5)
        self.cfg_tx_base = Signal(aw)
        self.cfg_tx_log2 = Signal(5)
        self.cfg_status_addr = Signal(aw)
        self.cfg_win_base = Signal(aw)
        self.cfg_win_size = Signal(aw)
        self.cfg_write = Signal()
        self.cfg_reset = Signal()

        # # #

        self.valid_ctx = valid = self.cfg_ctx < n_ctx
        mems = {}
        for name, width, value in (
            ("rx_base", aw, Cat(Signal(6), self.cfg_rx_base[6:])),
            ("tx_base", aw, Cat(Signal(5), self.cfg_tx_base[5:])),
            ("win", 2 * aw, Cat(self.cfg_win_base, self.cfg_win_size)),
            ("st", aw, Cat(Signal(4), self.cfg_status_addr[4:])),
        ):
            mem = Memory(width, max(n_ctx, 2), name=f"ctxcfg_{name}")
            wp = mem.get_port(write_capable=True)
            rp = mem.get_port(async_read=True)
            self.specials += mem, wp, rp
            self.comb += [
                wp.adr.eq(self.cfg_ctx),
                wp.dat_w.eq(value),
                wp.we.eq(self.cfg_write & valid),
            ]
            mems[name] = rp
        self.rx_base_rd = mems["rx_base"]
        self.tx_base_rd = mems["tx_base"]
        self.win_rd = mems["win"]
        self.st_rd = mems["st"]


class ContextState(Module):
    """Per-context counters and flags, and the events that move them.

    Per context ``i`` (lists of Signals / bit vectors):
    ``enable``, ``rx_mask``/``tx_mask`` (ring slots - 1), ``rx_head``, ``rx_tail``,
    ``tx_tail``, ``tx_fetch`` (descriptors fetched), ``tx_done``, ``pio_done``,
    ``barrier_done``, ``errors``, ``irq_armed``, ``pio_pending`` (= PIO busy),
    ``pio_refuse`` (the pending doorbell will be refused), ``pio_spoiled`` (a window
    write was refused since the last doorbell), ``pio_after`` (``tx_tail`` when the
    pending doorbell rang: the PIO packet waits until ``tx_done`` reaches it, and
    descriptors from it on wait for the PIO packet), ``dirty`` (status block to
    rewrite), ``pio_staged`` (64-bit words of the PIO window staged since the last PIO
    packet finished: one past the highest word written; the PIO engine refuses a header
    that needs more, see :mod:`~paranic.hw.host_pio`), ``pio_clear`` (the context's PIO
    buffer is being zeroed: set by ``cfg_rst``, so a new owner never sends the previous
    owner's bytes).

    Events (:class:`Ev`, one per source, all may fire in the same cycle):
    ``cfg_wr`` (+ ``cfg_enable``, ``cfg_rx_log2``, ``cfg_tx_log2``), ``cfg_rst``,
    ``rx_head_wr``/``tx_tail_wr`` (data = new value), ``pio_db`` (accepted doorbell),
    ``pio_db_refused`` (doorbell while busy: done and error at once), ``pio_spoil``,
    ``pio_stage`` (data = a window word written + 1), ``pio_fin`` (data = error),
    ``pio_cleared`` (the buffer of ``ctx`` is zero), ``rx_inc``, ``arm_set``, ``arm_clr``, ``tx_fetch_inc``,
    ``tx_fin`` (data = error), ``barrier_inc``, ``ptr_err``, ``dirty_clr``.

    ``pio_words``: 64-bit words of PIO buffer per context (``pio_buffer_words(mtu)``),
    the range of ``pio_staged``.
    """

    def __init__(self, n_ctx: int, pio_words: int) -> None:
        n = self.n_ctx = n_ctx
        self.enable = Signal(n)
        self.irq_armed = Signal(n)
        self.pio_pending = Signal(n)
        self.pio_refuse = Signal(n)
        self.pio_spoiled = Signal(n)
        self.pio_clear = Signal(n)
        self.dirty = Signal(n)

        def vec(name, bits=32):
            return [Signal(bits, name=f"{name}{i}") for i in range(n)]

        self.rx_mask = vec("rx_mask", MAX_RING_LOG2)
        self.tx_mask = vec("tx_mask", MAX_RING_LOG2)
        self.rx_head = vec("rx_head")
        self.rx_tail = vec("rx_tail")
        self.tx_tail = vec("tx_tail")
        self.tx_fetch = vec("tx_fetch")
        self.tx_done = vec("tx_done")
        self.pio_done = vec("pio_done")
        self.barrier_done = vec("barrier_done")
        self.errors = vec("errors")
        self.pio_after = vec("pio_after")
        self.pio_staged = [Signal(max=pio_words + 1, name=f"pio_staged{i}") for i in range(n)]

        self.cfg_wr = Ev()
        self.cfg_enable = Signal()
        self.cfg_rx_log2 = Signal(5)
        self.cfg_tx_log2 = Signal(5)
        self.cfg_rst = Ev()
        self.rx_head_wr = Ev(32)
        self.tx_tail_wr = Ev(32)
        self.pio_db = Ev()
        self.pio_db_refused = Ev()
        self.pio_spoil = Ev()
        self.pio_stage = Ev(len(self.pio_staged[0]))
        self.pio_fin = Ev(1)
        self.pio_cleared = Ev()
        self.rx_inc = Ev()
        self.arm_set = Ev()
        self.arm_clr = Ev()
        self.tx_fetch_inc = Ev()
        self.tx_fin = Ev(1)
        self.barrier_inc = Ev()
        self.ptr_err = Ev()
        self.dirty_clr = Ev()

        # # #

        rx_m = log2_mask(self.cfg_rx_log2)
        tx_m = log2_mask(self.cfg_tx_log2)
        for i in range(n):
            rst = self.cfg_rst.hit(i)
            pio_fin = self.pio_fin.hit(i)
            db_ref = self.pio_db_refused.hit(i)
            tx_fin = self.tx_fin.hit(i)
            bar = self.barrier_inc.hit(i)
            perr = self.ptr_err.hit(i)
            changed = pio_fin | db_ref | tx_fin | bar | perr | rst | self.cfg_wr.hit(i)
            self.sync += [
                If(self.cfg_wr.hit(i),
                    self.enable[i].eq(self.cfg_enable),
                    self.rx_mask[i].eq(rx_m),
                    self.tx_mask[i].eq(tx_m),
                ),
                self.dirty[i].eq((self.dirty[i] & ~self.dirty_clr.hit(i)) | changed),
                If(rst,
                    *[s[i].eq(0) for s in (self.rx_head, self.rx_tail, self.tx_tail, self.tx_fetch,
                                           self.tx_done, self.pio_done, self.barrier_done,
                                           self.errors, self.pio_after)],
                    self.irq_armed[i].eq(0),
                    self.pio_pending[i].eq(0),
                    self.pio_refuse[i].eq(0),
                    self.pio_spoiled[i].eq(0),
                    self.pio_staged[i].eq(0),
                    self.pio_clear[i].eq(1),
                ).Else(
                    If(self.pio_cleared.hit(i), self.pio_clear[i].eq(0)),
                    If(self.rx_head_wr.hit(i), self.rx_head[i].eq(self.rx_head_wr.data)),
                    If(self.rx_inc.hit(i), self.rx_tail[i].eq(self.rx_tail[i] + 1)),
                    If(self.tx_tail_wr.hit(i), self.tx_tail[i].eq(self.tx_tail_wr.data)),
                    If(self.tx_fetch_inc.hit(i), self.tx_fetch[i].eq(self.tx_fetch[i] + 1)),
                    If(tx_fin, self.tx_done[i].eq(self.tx_done[i] + 1)),
                    self.pio_done[i].eq(self.pio_done[i] + pio_fin + db_ref),
                    If(bar, self.barrier_done[i].eq(self.barrier_done[i] + 1)),
                    self.errors[i].eq(self.errors[i] + (pio_fin & self.pio_fin.data[0]) + db_ref
                                      + (tx_fin & self.tx_fin.data[0]) + perr),
                    If(self.pio_db.hit(i),
                        self.pio_pending[i].eq(1),
                        self.pio_after[i].eq(self.tx_tail[i]),
                        self.pio_refuse[i].eq(self.pio_spoiled[i]),
                        self.pio_spoiled[i].eq(0),
                    ).Else(
                        If(pio_fin, self.pio_pending[i].eq(0)),
                        If(self.pio_spoil.hit(i), self.pio_spoiled[i].eq(1)),
                    ),
                    # Window writes are refused while a packet is pending, so the staged
                    # count is stable from the doorbell to the engine's check; the packet's
                    # end (sent or refused) starts the next staging.
                    If(pio_fin,
                        self.pio_staged[i].eq(0),
                    ).Elif(self.pio_stage.hit(i) & (self.pio_stage.data > self.pio_staged[i]),
                        self.pio_staged[i].eq(self.pio_stage.data),
                    ),
                    If(self.arm_set.hit(i), self.irq_armed[i].eq(1)
                    ).Elif(self.arm_clr.hit(i), self.irq_armed[i].eq(0)),
                ),
            ]

    def arr(self, name: str) -> Array:
        """The per-context list ``name`` as an Array (for indexing by a Signal)."""
        return Array(getattr(self, name))
