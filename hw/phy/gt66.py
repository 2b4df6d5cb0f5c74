"""gt66 link PHY adapter: a LinkLayer of width ``dw`` over one 64b/66b transceiver lane.

:class:`Pcs66Adapter` follows the PHY adapter contract (``sink``/``source``/``hold``/
``up`` in sys, ``phy_layout(dw)``; ``paranic.hw.phy.connect_phy``) and talks to a
transceiver in raw mode that moves ``gt_width`` (G) line bits per clock, bit 0 first,
in its ``tx`` and ``rx`` clock domains:

* transmit: sys -> :class:`~.gt_tx.GTTxRateMatch` -> :class:`~.cdc.WordAsyncFIFO`
  -> (``tx``) :class:`~.pcs66.Pcs66Tx` -> :class:`~.pcs66.TxGearbox` -> ``tx_data``;
* receive: (``rx``) ``rx_data`` -> :class:`~.pcs66.Pcs66Rx` (gearbox, block lock,
  descrambler, decode) -> :class:`~.elastic.ElasticBuffer` -> sys, and
  :class:`~.pcs66.Pcs66Monitor` -> ``up``.

Rate matching (``hold``) and clock compensation (fillers dropped by the elastic
buffer, forced every ``filler_period`` beats) are the 8b/10b adapter's
(:class:`~.gt.GTAdapter`, ``docs/phy.md``), reused, not copied; the line code is
:mod:`.pcs66`. :class:`paranic.hw.phy.gt66_glue.GTY66LinkPHY` wires an adapter to a
GTY at 25.78125 Gb/s.
"""

from __future__ import annotations

from migen import ClockDomainsRenamer, ResetInserter, Signal
from migen.genlib.cdc import BusSynchronizer, MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P

from . import phy_layout
from .cdc import WordAsyncFIFO
from .elastic import ElasticBuffer
from .gt import TX_THRESHOLD, tx_fifo_depth
from .gt_tx import GTTxRateMatch
from .pcs66 import Pcs66Monitor, Pcs66Rx, Pcs66Tx, TxGearbox, blocks_per_beat

#: Counters and status of a Pcs66Adapter: (name, width, description), all in sys.
COUNTERS: tuple[tuple[str, int, str], ...] = (
    ("up", 1, "lane up: receiver ready, block lock and beat alignment held for up_cycles"),
    ("downs", 32, "up -> down transitions of the lane"),
    ("rx_slips", 32, "one-bit slips of the block boundary (lock search, lock losses)"),
    ("rx_lock_losses", 32, "block lock lost (16 invalid sync headers in a window of 64)"),
    ("rx_bad_headers", 32, "invalid sync headers (00, 11) while locked"),
    ("rx_bad_beats", 32, "beats dropped: an invalid or mixed sync header"),
    ("rx_realigns", 32, "beat boundary moved (K > 1: an idle beat at another block)"),
    ("rx_fillers_dropped", 32, "fillers the elastic buffer dropped (clock compensation)"),
    ("rx_overflow", 1, "sticky: a beat met a full elastic buffer (should stay 0)"),
    ("tx_fillers_dropped", 32, "fillers the transmitter dropped while the line was the bottleneck"),
    ("tx_fillers_forced", 32, "fillers forced onto the line for the far end's clock compensation"),
    ("tx_lost", 32, "beats that met a full transmit FIFO (should stay 0)"),
)

#: Idle beats at least this often when K > 1 (they mark the beat boundary): 0.1 % of the line.
IDLE_INTERVAL = 1024


class Pcs66Adapter(LiteXModule):
    """LinkLayer (``dw`` bits) <-> 64b/66b lane (``gt_width`` raw bits per transceiver clock).

    Parameters
    ----------
    dw : link beat width (64, 128, 256): K = dw/64 blocks per beat.
    gt_width : transceiver bits per clock (at most 66 K; default 64 K, which gives
        32 beats in 33 clocks: 64 bits at 161.13 MHz for SFP+, 128 bits at 201.42 MHz
        for a 25.78125 Gb/s lane).
    mtu : the link's MTU (sizes the transmit FIFO: one whole frame above the threshold).
    idle_interval : at most this many beats between idle beats (K > 1 only; 0 for K = 1).
    filler_period : at most this many beats go out between two fillers (far-end clock
        compensation, as in :class:`~.gt.GTAdapter`).
    elastic_depth, elastic_high : the receive elastic buffer.
    up_cycles : rx clocks of lock and alignment before ``up``.
    cd_tx, cd_rx : the transceiver's clock domains.

    sys: ``sink``, ``source``, ``hold``, ``up`` (the contract), ``tx_ready``,
    ``rx_ready`` (inputs, default 1). ``cd_tx``: ``tx_data``. ``cd_rx``: ``rx_data``.
    Counters: :data:`COUNTERS` (:meth:`add_csrs`).
    """

    def __init__(self, dw: int = P.WORD_BITS, gt_width: int | None = None,
                 mtu: int = P.DEFAULT_MTU, idle_interval: int | None = None,
                 filler_period: int = 1024, elastic_depth: int = 64,
                 elastic_high: int | None = None, up_cycles: int = 1024,
                 cd_tx: str = "tx", cd_rx: str = "rx") -> None:
        k = blocks_per_beat(dw)
        g = 64 * k if gt_width is None else gt_width
        if not 0 < g <= 66 * k:
            raise ValueError(f"gt_width must lie in 1..{66 * k} for dw={dw}, not {g}")
        if idle_interval is None:
            idle_interval = IDLE_INTERVAL if k > 1 else 0
        self.dw, self.k, self.gt_width = dw, k, g
        self.sink = stream.Endpoint(phy_layout(dw))
        self.source = stream.Endpoint(phy_layout(dw))
        self.hold = Signal()
        self.up = Signal()
        self.tx_ready = Signal(reset=1)
        self.rx_ready = Signal(reset=1)
        self.tx_data = Signal(g)
        self.rx_data = Signal(g)

        # -- transmit -----------------------------------------------------------------
        depth = tx_fifo_depth(mtu)
        self.tx_depth = depth
        self.rate = rate = GTTxRateMatch(depth, TX_THRESHOLD, filler_period, dw=dw)
        fifo = ResetInserter(["sys"])(WordAsyncFIFO(depth, cd_read="tx", dw=dw))
        self.fifo = fifo = ClockDomainsRenamer({"tx": cd_tx})(fifo)
        self.pcs_tx = ptx = ClockDomainsRenamer(cd_tx)(Pcs66Tx(k, idle_interval))
        self.tx_gearbox = gb = ClockDomainsRenamer(cd_tx)(TxGearbox(66 * k, g))
        self.comb += [
            self.sink.connect(rate.sink),
            rate.source.connect(fifo.sink),
            rate.level.eq(fifo.level_w),
            rate.tx_ready.eq(self.tx_ready),
            fifo.reset_sys.eq(~self.tx_ready),
            fifo.source.connect(ptx.sink),
            ptx.ce.eq(gb.take),
            gb.din.eq(ptx.block),
            self.tx_data.eq(gb.data),
            self.hold.eq(rate.hold),
        ]

        # -- receive ------------------------------------------------------------------
        self.pcs_rx = prx = ClockDomainsRenamer(cd_rx)(Pcs66Rx(k, g))
        eb = ResetInserter(["sys"])(ElasticBuffer("rx", depth=elastic_depth, high=elastic_high,
                                                  dw=dw))
        self.elastic = eb = ClockDomainsRenamer({"rx": cd_rx})(eb)
        self.monitor = mon = ClockDomainsRenamer(cd_rx)(Pcs66Monitor(up_cycles))
        rx_ready_rx = Signal()
        up_sys = Signal()
        self.specials += [
            MultiReg(self.rx_ready, rx_ready_rx, odomain=cd_rx),
            MultiReg(mon.up, up_sys, odomain="sys"),
        ]
        self.comb += [
            prx.data.eq(self.rx_data),
            prx.source.connect(eb.sink),
            eb.reset_sys.eq(~self.rx_ready),
            eb.source.connect(self.source),
            mon.rx_ready.eq(rx_ready_rx),
            mon.aligned.eq(prx.aligned),
            self.up.eq(up_sys & self.rx_ready),
        ]

        # -- counters into sys -------------------------------------------------------
        self.rx_overflow = eb.overflow
        self.tx_fillers_dropped = rate.fillers_dropped
        self.tx_fillers_forced = rate.fillers_forced
        self.tx_lost = rate.lost
        for name, src in (("downs", mon.downs), ("rx_slips", prx.slips),
                          ("rx_lock_losses", prx.losses), ("rx_bad_headers", prx.bad_headers),
                          ("rx_bad_beats", prx.bad_beats), ("rx_realigns", prx.realigns),
                          ("rx_fillers_dropped", eb.dropped_w)):
            dst = Signal(32, name=name)
            setattr(self, name, dst)
            bs = BusSynchronizer(32, cd_rx, "sys")
            self.submodules += bs
            self.comb += [bs.i.eq(src), dst.eq(bs.o)]

    def add_csrs(self) -> None:
        """CSRStatus registers for every entry of :data:`COUNTERS`."""
        for name, width, desc in COUNTERS:
            csr = CSRStatus(width, name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(getattr(self, name))


__all__ = ["COUNTERS", "IDLE_INTERVAL", "Pcs66Adapter"]
