"""NicCore's host interface: contexts, PIO TX, DMA TX, RX rings, status blocks, MSI.

:class:`HostInterface` joins the pieces (one concern per file):

========================  =========================================================
``host_ctx.py``           per-context configuration (driver) and state (counters)
``host_pages.py``         Wishbone slave: context pages, doorbells, PIO window
``host_pio.py``           PIO transmit engine (window -> packet)
``host_tx.py``            DMA transmit engine (descriptor ring -> packets)
``host_rx.py``            receive engine (packet -> RX ring slot, valid word, MSI)
``host_status.py``        status-block writer
``dma.py``                LitePCIe master-port helpers (write splitter, realigner)
========================  =========================================================

See ``docs/host-interface.md`` for the software view and ``docs/architecture.md``
("Host interface") for parameters, latencies and CSRs.
"""

from __future__ import annotations

from migen import Array, Case, If, Memory, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import packet, stream, wishbone
from litex.soc.interconnect.csr import CSR, CSRStatus, CSRStorage

from paranic.spec import protocol as P

from .common import packet_layout
from .dma import DmaPort
from .host_ctx import ContextConfig, ContextState
from .host_pages import HostPages
from .host_pio import PioClear, PioEngine, pio_buffer_words, pio_max_length
from .host_rx import RxEngine
from .host_status import StatusWriter
from .host_tx import DmaTxEngine

#: Global counters (32-bit, wrapping), in CSR order.
COUNTERS = (
    ("err_unknown_ctx", "received packets for a context >= n_ctx or disabled (dropped)"),
    ("err_length", "PIO headers with length > min(mtu, window - 16), or needing words not staged "
                   "since the last PIO packet (refused)"),
    ("err_desc", "DMA descriptors refused (window, length, type, fetch error)"),
    ("err_pio", "window writes refused (PIO busy), doorbells on disabled/absent contexts, "
                "PIO doorbells while busy, PIO headers with a type users may not send"),
    ("err_ptr", "TX_TAIL/RX_HEAD writes refused (beyond ring size or backwards)"),
    ("err_rx", "received packets malformed (length > mtu, beat count, error flag): not committed"),
    ("err_dma", "read completions with error, short, long or unexpected"),
    ("rx_packets", "packets committed into RX rings"),
    ("tx_packets", "packets sent (PIO and DMA)"),
    ("status_writes", "status blocks written"),
)


class _WritePort:
    """The signals of a memory write port (one writer's side of a shared port)."""

    def __init__(self, adr_bits: int, data_bits: int, we_bits: int) -> None:
        self.adr = Signal(adr_bits)
        self.dat_w = Signal(data_bits)
        self.we = Signal(we_bits)

    def drive(self, port) -> list:
        return [port.adr.eq(self.adr), port.dat_w.eq(self.dat_w), port.we.eq(self.we)]


class PacketArbiter(LiteXModule):
    """Round-robin packet arbiter that grants an idle ``slave`` in the cycle a master
    offers a packet.

    LiteX's ``packet.Arbiter`` moves its (registered) grant a cycle after a new master
    asks, so a packet from the master that was not served last waits one cycle. Here
    the grant is chosen combinationally among the masters' ``valid`` while no packet is
    part-way through (round robin from the one after the master served last), and held
    from the cycle a beat is offered until the packet's last beat is taken: an offered
    beat is never withdrawn. The choice adds a priority pick over ``len(masters)``
    ``valid`` bits (one or two LUT levels) in front of the output multiplexer.
    """

    def __init__(self, masters, slave) -> None:
        n = len(masters)
        self.grant = grant = Signal(max=max(2, n))
        last = Signal(max=max(2, n))    # the master whose packet ended last
        held = Signal(max=max(2, n))
        locked = Signal()               # a packet is offered or part-way through
        pick = Signal(max=max(2, n))
        cases = {}
        for i in range(n):
            chain = pick.eq(i)
            for t in reversed([(i + k) % n for k in range(1, n)]):
                chain = If(masters[t].valid, pick.eq(t)).Else(chain)
            cases[i] = chain
        self.comb += [
            Case(last, cases),
            grant.eq(Mux(locked, held, pick)),
            Case(grant, {i: m.connect(slave) for i, m in enumerate(masters)}),
        ]
        self.sync += If(slave.valid,
            held.eq(grant),
            locked.eq(~(slave.ready & slave.last)),
            If(slave.ready & slave.last, last.eq(grant)),
        )


class HostInterface(LiteXModule):
    """The host side of one NicCore.

    Parameters: ``n_ctx`` contexts (1..P.MAX_CONTEXTS), ``mtu`` payload bytes per
    packet, ``dma_data_width`` (64 only), ``address_width`` of host addresses,
    ``max_request_bytes`` (largest DMA read), ``max_payload_bytes`` (largest DMA
    write), ``max_outstanding`` DMA reads in flight, ``tx_fifo_words`` payload FIFO
    of the DMA transmit engine (default: a packet plus two read requests).

    Interface (plain signals; :meth:`add_csrs` adds the privileged CSRs):

    * ``bus``: Wishbone slave, the context pages, ``bus_width`` bits wide. 64 (the
      board's BAR0 path and the simulator): a 64-bit store is one beat
      (:class:`~paranic.hw.host_pages.HostPages`). 32 (the default, a 32-bit SoC bus):
      a combinational up-converter in front of the 64-bit pages, each 32-bit access one
      beat on its half, so a 64-bit store takes two.
    * ``tx_source``/``rx_sink``: packet_layout streams to/from the router.
    * ``dma_rd``/``dma_wr``: :class:`~paranic.hw.dma.DmaPort` (LitePCIe master ports;
      wire their ``channel``/``req_id`` on a board).
    * ``irq``: Signal(n_ctx), one-cycle MSI pulses.
    * ``node_id``: this node's id (stamped into every header sent).
    * ``barrier_enter``/``barrier_enter_ctx`` out, ``barrier_done_pulse``/
      ``barrier_done_ctx`` in.
    * Configuration: ``cfg_ctx``, ``cfg_enable``, ``cfg_rx_base``, ``cfg_rx_log2``,
      ``cfg_tx_base``, ``cfg_tx_log2``, ``cfg_status_addr``, ``cfg_win_base``,
      ``cfg_win_size``; strobes ``cfg_write`` (store into context ``cfg_ctx``) and
      ``cfg_reset`` (zero its pointers and counters, and its PIO buffer); ``cfg_state`` (``P.CTX_STATE_BITS`` of
      context ``cfg_ctx``).
    * ``counters``: dict name -> Signal(32) (see :data:`COUNTERS`).
    """

    def __init__(self, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
                 dma_data_width: int = 64, address_width: int = 64,
                 max_request_bytes: int = 512, max_payload_bytes: int = 256,
                 max_outstanding: int = 8, tx_fifo_words: int | None = None,
                 bus_width: int = 32) -> None:
        if bus_width not in (32, 64):
            raise ValueError(f"HostInterface: bus_width must be 32 or 64, not {bus_width}")
        if dma_data_width != 64:
            raise ValueError("HostInterface: only dma_data_width=64 is supported")
        if not 1 <= n_ctx <= P.MAX_CONTEXTS:
            raise ValueError(f"n_ctx must be 1..{P.MAX_CONTEXTS}")
        P.rx_slot_bytes(mtu)  # validates the MTU
        for name, v, lo in (("max_request_bytes", max_request_bytes, P.TX_DESC_BYTES),
                            ("max_payload_bytes", max_payload_bytes, P.STATUS_BLOCK_BYTES)):
            if not lo <= v <= 2048 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two in {lo}..2048")
        self.n_ctx = n_ctx
        self.mtu = mtu
        aw = address_width

        self.node_id = Signal(P.NODE_BITS)
        self.tx_source = stream.Endpoint(packet_layout())
        self.rx_sink = stream.Endpoint(packet_layout())
        self.dma_rd = DmaPort(dma_data_width, aw)
        self.dma_wr = DmaPort(dma_data_width, aw)
        self.irq = Signal(n_ctx)
        self.barrier_enter = Signal()
        self.barrier_enter_ctx = Signal(P.CTX_BITS)
        self.barrier_done_pulse = Signal()
        self.barrier_done_ctx = Signal(P.CTX_BITS)

        # Configuration and state --------------------------------------------------------------
        self.cfg = cfg = ContextConfig(n_ctx, aw)
        for name in ("cfg_ctx", "cfg_enable", "cfg_rx_base", "cfg_rx_log2", "cfg_tx_base",
                     "cfg_tx_log2", "cfg_status_addr", "cfg_win_base", "cfg_win_size",
                     "cfg_write", "cfg_reset"):
            setattr(self, name, getattr(cfg, name))
        self.pio_words = pio_words = pio_buffer_words(mtu)
        self.state = st = ContextState(n_ctx, pio_words)
        self.comb += [
            st.cfg_wr.stb.eq(cfg.cfg_write & cfg.valid_ctx),
            st.cfg_wr.ctx.eq(cfg.cfg_ctx),
            st.cfg_enable.eq(cfg.cfg_enable),
            st.cfg_rx_log2.eq(cfg.cfg_rx_log2),
            st.cfg_tx_log2.eq(cfg.cfg_tx_log2),
            st.cfg_rst.stb.eq(cfg.cfg_reset & cfg.valid_ctx),
            st.cfg_rst.ctx.eq(cfg.cfg_ctx),
            st.barrier_inc.stb.eq(self.barrier_done_pulse),
            st.barrier_inc.ctx.eq(self.barrier_done_ctx),
        ]

        # PIO buffer: one region of pio_words 64-bit words per context ------------------------
        self.pio_max_length = pio_max_length(mtu)
        self.specials.pio_mem = pio_mem = Memory(64, n_ctx * pio_words, name="pio_buffer")
        pio_wp = pio_mem.get_port(write_capable=True, we_granularity=8)
        pio_rp = pio_mem.get_port()
        self.specials += pio_wp, pio_rp
        self.pio_wport = pio_wp   # (benches watch the window writes on it)
        # One write port, two writers: the MMIO window writes, and the clearing of a reset
        # context's region on the cycles the MMIO side leaves free.
        pages_wp = _WritePort(len(pio_wp.adr), len(pio_wp.dat_w), len(pio_wp.we))
        clear_wp = _WritePort(len(pio_wp.adr), len(pio_wp.dat_w), len(pio_wp.we))
        self.comb += If(pages_wp.we != 0, *pages_wp.drive(pio_wp)).Else(*clear_wp.drive(pio_wp))

        # Blocks ---------------------------------------------------------------------------------
        self.pages = pages = HostPages(n_ctx, st, pages_wp, pio_words)
        if bus_width == 64:
            self.bus = pages.bus
        else:
            self.bus = wishbone.Interface(data_width=32, address_width=32, addressing="word")
            self.bus_up = wishbone.Converter(self.bus, pages.bus)
        self.pio_clear = PioClear(n_ctx, st, clear_wp, pio_words, busy_in=pages_wp.we != 0)
        self.pio = pio = PioEngine(n_ctx, mtu, st, pio_rp, pio_words)
        self.dmatx = dmatx = DmaTxEngine(n_ctx, mtu, cfg, st, self.dma_rd,
                                         max_request_bytes=max_request_bytes,
                                         max_outstanding=max_outstanding,
                                         fifo_words=tx_fifo_words)
        self.rx = rx = RxEngine(n_ctx, mtu, cfg, st, aw, max_payload_bytes)
        self.status = status = StatusWriter(n_ctx, cfg, st, aw, max_payload_bytes)

        self.comb += [
            pio.node_id.eq(self.node_id),
            pio.byp_stb.eq(pages.send_full),
            pio.byp_data.eq(pages.send_word),
            pio.byp_ctx.eq(st.pio_db.ctx),
            dmatx.node_id.eq(self.node_id),
            self.rx_sink.connect(rx.rx_sink),
            self.irq.eq(pages.irq | rx.irq),
            self.barrier_enter.eq(pages.barrier_enter),
            self.barrier_enter_ctx.eq(pages.barrier_enter_ctx),
            *[pages.rx_inc_now[i].eq(st.rx_inc.hit(i)) for i in range(n_ctx)],
            self.dma_wr.sink.ready.eq(1),  # writes are posted: no completions expected
        ]
        for w in (rx.writer, status.writer):
            self.comb += [w.channel.eq(self.dma_wr.channel), w.req_id.eq(self.dma_wr.req_id)]
        self.tx_arb = packet.Arbiter([pio.source, dmatx.source], self.tx_source)
        # The RX engine's slot writes and the status writer's share the DMA write port; an
        # idle port is granted in the cycle a writer asks (PacketArbiter), so a received
        # packet's write after a status write loses no cycle.
        self.wr_arb = PacketArbiter([rx.writer.source, status.writer.source], self.dma_wr.source)

        # Counters -------------------------------------------------------------------------------
        tx = self.tx_source
        incs = {
            "err_unknown_ctx": rx.err_unknown_ctx,
            "err_length": pio.err_length,
            "err_desc": dmatx.err_desc,
            "err_pio": pages.err_pio + pio.err_type,
            "err_ptr": pages.err_ptr,
            "err_rx": rx.err_rx,
            "err_dma": dmatx.err_dma,
            "rx_packets": rx.rx_packet,
            "tx_packets": tx.valid & tx.ready & tx.first,
            "status_writes": status.writes,
        }
        self.counters = {}
        for name, _ in COUNTERS:
            c = Signal(32, name=f"cnt_{name}")
            self.sync += c.eq(c + incs[name])
            self.counters[name] = c

        # Selected context's state (driver view) ------------------------------------------------
        self.cfg_state = Signal(len(P.CTX_STATE_BITS))
        sel = cfg.cfg_ctx
        bits = {
            "enabled": Array(list(st.enable))[sel],
            "pio_busy": Array(list(st.pio_pending))[sel] | Array(list(st.pio_clear))[sel],
            "tx_inflight": Array(st.tx_fetch)[sel] != Array(st.tx_done)[sel],
            "tx_pending": Array(st.tx_tail)[sel] != Array(st.tx_done)[sel],
            "rx_active": rx.active & (rx.active_ctx == sel),
            "rx_full": (Array(st.rx_tail)[sel] - Array(st.rx_head)[sel])[:32] > Array(st.rx_mask)[sel],
            "irq_armed": Array(list(st.irq_armed))[sel],
            "status_dirty": Array(list(st.dirty))[sel],
        }
        self.comb += [self.cfg_state[i].eq(cfg.valid_ctx & bits[name])
                      for i, (name, _) in enumerate(P.CTX_STATE_BITS)]

    # CSRs -----------------------------------------------------------------------------------------
    def add_csrs(self) -> None:
        """Privileged CSRs (LiteX AutoCSR): context configuration, state, counters."""
        aw = len(self.cfg_rx_base)
        self.ctx_sel = CSRStorage(P.CTX_BITS, description="Context selected for ctx_* accesses")
        self.ctx_enable = CSRStorage(1, description="Enable (1) or disable (0) the context")
        self.ctx_rx_base = CSRStorage(aw, description="RX ring base (64-byte aligned)")
        self.ctx_rx_log2 = CSRStorage(5, description="log2 of RX ring slots (0..16)")
        self.ctx_tx_base = CSRStorage(aw, description="TX descriptor ring base (32-byte aligned)")
        self.ctx_tx_log2 = CSRStorage(5, description="log2 of TX ring slots (0..16)")
        self.ctx_status_addr = CSRStorage(aw, description="Status block address (16-byte aligned, 0 = none)")
        self.ctx_win_base = CSRStorage(aw, description="DMA window base: TX payloads must lie in it")
        self.ctx_win_size = CSRStorage(aw, description="DMA window size in bytes")
        self.ctx_write = CSR()
        self.ctx_write.description = "Write: store the ctx_* fields into context ctx_sel"
        self.ctx_reset = CSR()
        self.ctx_reset.description = ("Write: zero context ctx_sel's pointers and counters and its PIO buffer "
                                      "(ctx_state.pio_busy until the buffer is zero)")
        self.ctx_state = CSRStatus(len(P.CTX_STATE_BITS),
                                   description="State of context ctx_sel: " + ", ".join(
                                       f"bit {i} {n}" for i, (n, _) in enumerate(P.CTX_STATE_BITS)))
        self.info_n_ctx = CSRStatus(8, reset=self.n_ctx, description="Number of contexts")
        self.info_mtu = CSRStatus(16, reset=self.mtu, description="MTU in bytes")
        self.comb += [
            self.cfg_ctx.eq(self.ctx_sel.storage),
            self.cfg_enable.eq(self.ctx_enable.storage),
            self.cfg_rx_base.eq(self.ctx_rx_base.storage),
            self.cfg_rx_log2.eq(self.ctx_rx_log2.storage),
            self.cfg_tx_base.eq(self.ctx_tx_base.storage),
            self.cfg_tx_log2.eq(self.ctx_tx_log2.storage),
            self.cfg_status_addr.eq(self.ctx_status_addr.storage),
            self.cfg_win_base.eq(self.ctx_win_base.storage),
            self.cfg_win_size.eq(self.ctx_win_size.storage),
            self.cfg_write.eq(self.ctx_write.re),
            self.cfg_reset.eq(self.ctx_reset.re),
            self.ctx_state.status.eq(self.cfg_state),
        ]
        for name, doc in COUNTERS:
            csr = CSRStatus(32, name=name, description=doc)
            setattr(self, name, csr)
            self.comb += csr.status.eq(self.counters[name])
