"""gt link PHY adapter: a LinkLayer over one 8b/10b transceiver byte lane.

:class:`GTAdapter` follows the PHY adapter contract (``sink``/``source``/``hold``/``up``
in sys; ``paranic.hw.phy.connect_phy``) and talks to any transceiver that moves
``nbytes`` (2 or 4) 8b/10b characters per clock with K flags:

* transmit: sys -> :class:`~.gt_tx.GTTxRateMatch` -> :class:`~.cdc.WordAsyncFIFO`
  -> (``tx`` domain) :class:`~.gt_tx.GTTxPacker` -> ``tx_data``/``tx_k``;
* receive: (``rx`` domain) ``rx_data``/``rx_k``/``rx_err`` ->
  :class:`~.gt_rx.GTRxParser` -> :class:`~.elastic.ElasticBuffer` -> sys, and
  :class:`~.gt_rx.GTLaneMonitor` -> ``up``.

The framing is in :mod:`.gt_framing`, the rate matching and clock compensation
arithmetic in ``docs/phy.md``. :class:`paranic.hw.phy.gt_glue.GTLinkPHY` wires an
adapter to a LiteICLink transceiver.
"""

from __future__ import annotations

from migen import ClockDomainsRenamer, ResetInserter, Signal
from migen.genlib.cdc import BusSynchronizer, MultiReg

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P
from paranic.spec.link import frame_words

from . import phy_layout
from .elastic import ElasticBuffer
from .gt_framing import LANE_BYTES
from .gt_rx import GTLaneMonitor, GTRxParser
from .cdc import WordAsyncFIFO
from .gt_tx import GTTxPacker, GTTxRateMatch

#: Counters and status of a GTAdapter: (name, width, description), all in sys.
COUNTERS: tuple[tuple[str, int, str], ...] = (
    ("up", 1, "lane up: receiver ready, commas arriving, no error burst"),
    ("downs", 32, "up -> down transitions of the lane (cable pulled, error bursts)"),
    ("rx_code_errors", 32, "received bytes not in the 8b/10b table / disparity errors / unknown K"),
    ("rx_dropped_words", 32, "partial line words dropped by the receiver (K or error inside)"),
    ("rx_fillers_dropped", 32, "fillers the elastic buffer dropped (clock compensation)"),
    ("rx_overflow", 1, "sticky: a word met a full elastic buffer (should stay 0)"),
    ("tx_fillers_dropped", 32, "fillers the transmitter dropped while the line was the bottleneck"),
    ("tx_fillers_forced", 32, "fillers forced onto the line for the far end's clock compensation"),
    ("tx_lost", 32, "words that met a full transmit FIFO (should stay 0)"),
)

#: Words of slack above the FIFO threshold besides one MTU frame (hold latency).
TX_SLACK_WORDS = 8
#: Default FIFO level (words) above which the link is held.
TX_THRESHOLD = 16


def tx_fifo_depth(mtu: int, threshold: int = TX_THRESHOLD) -> int:
    """Transmit FIFO depth: the threshold plus one MTU frame plus slack, a power of two."""
    need = threshold + frame_words(mtu) + TX_SLACK_WORDS
    return 1 << (need - 1).bit_length()


class GTAdapter(LiteXModule):
    """LinkLayer <-> 8b/10b byte lane (``nbytes`` per transceiver clock).

    Parameters
    ----------
    nbytes : transceiver bytes per clock (2 or 4: LiteICLink data_width 20 / 40).
    mtu : the link's MTU (sizes the transmit FIFO: one whole frame above the threshold).
    comma_interval : after this many clocks without an idle clock (comma) the
        transmitter sends one as soon as the word on the line ends.
    filler_period : at most this many words go out between two fillers (clock
        compensation at the far end; 1024 covers 976 ppm, the need is 200 ppm).
    elastic_depth, elastic_high : the receive elastic buffer (:class:`ElasticBuffer`).
    up_clocks, err_window, err_max : lane monitor (:class:`GTLaneMonitor`);
        the comma timeout is ``4 * comma_interval``.
    cd_tx, cd_rx : the transceiver's clock domains.

    sys: ``sink``, ``source``, ``hold``, ``up`` (the contract), ``tx_ready`` and
    ``rx_ready`` (inputs, default 1). ``cd_tx``: ``tx_data``, ``tx_k``. ``cd_rx``:
    ``rx_data``, ``rx_k``, ``rx_err``. Counters: :data:`COUNTERS` (:meth:`add_csrs`).
    """

    def __init__(self, nbytes: int = 4, mtu: int = P.DEFAULT_MTU, comma_interval: int = 256,
                 filler_period: int = 1024, elastic_depth: int = 64,
                 elastic_high: int | None = None, up_clocks: int = 2048, err_window: int = 1024,
                 err_max: int = 8, cd_tx: str = "tx", cd_rx: str = "rx") -> None:
        if nbytes not in LANE_BYTES:
            raise ValueError(f"nbytes must be one of {LANE_BYTES}, not {nbytes}")
        self.nbytes = nbytes
        self.sink = stream.Endpoint(phy_layout())
        self.source = stream.Endpoint(phy_layout())
        self.hold = Signal()
        self.up = Signal()
        self.tx_ready = Signal(reset=1)
        self.rx_ready = Signal(reset=1)
        self.tx_data = Signal(8 * nbytes)
        self.tx_k = Signal(nbytes)
        self.rx_data = Signal(8 * nbytes)
        self.rx_k = Signal(nbytes)
        self.rx_err = Signal(nbytes)

        # -- transmit -----------------------------------------------------------------
        depth = tx_fifo_depth(mtu)
        self.tx_depth = depth
        self.rate = rate = GTTxRateMatch(depth, TX_THRESHOLD, filler_period)
        # The sys side of the FIFO restarts with the transmitter (its tx side is reset
        # by the transceiver's tx reset).
        fifo = ResetInserter(["sys"])(WordAsyncFIFO(depth, cd_read="tx"))
        self.fifo = fifo = ClockDomainsRenamer({"tx": cd_tx})(fifo)
        self.packer = packer = ClockDomainsRenamer({"tx": cd_tx})(
            GTTxPacker(nbytes, comma_interval))
        self.comb += [
            self.sink.connect(rate.sink),
            rate.source.connect(fifo.sink),
            rate.level.eq(fifo.level_w),
            rate.tx_ready.eq(self.tx_ready),
            fifo.reset_sys.eq(~self.tx_ready),
            fifo.source.connect(packer.sink),
            self.tx_data.eq(packer.data),
            self.tx_k.eq(packer.k),
            self.hold.eq(rate.hold),
        ]

        # -- receive ------------------------------------------------------------------
        self.parser = parser = ClockDomainsRenamer({"rx": cd_rx})(GTRxParser(nbytes))
        eb = ResetInserter(["sys"])(ElasticBuffer("rx", depth=elastic_depth, high=elastic_high))
        self.elastic = eb = ClockDomainsRenamer({"rx": cd_rx})(eb)
        self.monitor = mon = ClockDomainsRenamer({"rx": cd_rx})(
            GTLaneMonitor(4 * comma_interval, up_clocks, err_window, err_max))
        rx_ready_rx = Signal()
        up_sys = Signal()
        self.specials += [
            MultiReg(self.rx_ready, rx_ready_rx, odomain=cd_rx),
            MultiReg(mon.up, up_sys, odomain="sys"),
        ]
        self.comb += [
            parser.data.eq(self.rx_data),
            parser.k.eq(self.rx_k),
            parser.err.eq(self.rx_err),
            parser.source.connect(eb.sink),
            eb.reset_sys.eq(~self.rx_ready),
            eb.source.connect(self.source),
            mon.rx_ready.eq(rx_ready_rx),
            mon.comma.eq(parser.comma),
            mon.error.eq(parser.error),
            self.up.eq(up_sys & self.rx_ready),
        ]

        # -- counters into sys -------------------------------------------------------
        self.downs = Signal(32)
        self.rx_code_errors = Signal(32)
        self.rx_dropped_words = Signal(32)
        self.rx_fillers_dropped = Signal(32)
        self.rx_overflow = eb.overflow
        self.tx_fillers_dropped = rate.fillers_dropped
        self.tx_fillers_forced = rate.fillers_forced
        self.tx_lost = rate.lost
        for src, dst in ((mon.downs, self.downs), (parser.code_errors, self.rx_code_errors),
                         (parser.dropped, self.rx_dropped_words),
                         (eb.dropped_w, self.rx_fillers_dropped)):
            bs = BusSynchronizer(32, cd_rx, "sys")
            self.submodules += bs
            self.comb += [bs.i.eq(src), dst.eq(bs.o)]

    def add_csrs(self) -> None:
        """CSRStatus registers for every entry of :data:`COUNTERS`."""
        for name, width, desc in COUNTERS:
            csr = CSRStatus(width, name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(getattr(self, name))


__all__ = ["COUNTERS", "GTAdapter", "tx_fifo_depth"]
