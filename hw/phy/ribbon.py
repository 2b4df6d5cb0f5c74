"""Ribbon PHY: source-synchronous LVDS lanes (FMC) carrying one line word per sys cycle.

Nine lanes at 8 bits per word clock (8:1 DDR serdes, 1 Gb/s per lane at sys = 125 MHz)
carry the 65-bit line word (64 data bits on 8 scrambled lanes, the ctrl flag and a
framing pattern on the ninth) plus a forwarded clock. ``docs/phy.md`` ("ribbon") has the
line code, training, skew limits, clock compensation and bring-up.

Blocks (one concern each):

* :class:`RibbonTX`   (sys)   training blocks, then scrambled words; lane bytes out.
* :class:`RibbonRX`   (rx)    bit slip per lane, lane deskew, training handshake,
  descrambling, loss detection; words out in the forwarded clock's domain.
* :class:`FillerHold` (sys)   raises ``hold`` so a filler leaves at least every K words.
* :class:`RibbonCore`         the three above + :class:`~.elastic.ElasticBuffer` into sys,
  status crossed into sys and the CSRs; its lane ports are the serdes' parallel ports
  (the bench's model boundary).
* :class:`RibbonPHY`          RibbonCore + the 7-series primitives (:mod:`.serdes7`): what
  a board instantiates.
"""

from __future__ import annotations

from functools import reduce
from operator import and_, or_

from migen import Cat, ClockDomain, Constant, ClockDomainsRenamer, If, Mux, Replicate, \
    ResetSignal, Signal
from migen.genlib.cdc import BusSynchronizer, MultiReg
from migen.genlib.fsm import FSM, NextState, NextValue
from migen.genlib.resetsync import AsyncResetSynchronizer

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSR, CSRField, CSRStatus, CSRStorage

from paranic.spec import protocol as P
from paranic.spec.link import frame_words

from ..link.ctl import is_filler
from . import connect_phy, phy_layout
from .elastic import ElasticBuffer
from .ribbon_lane import (DATA_LANES, FRAMING, LANES, MARK_LAST, MARK_READY, MARK_WAIT, MARKERS,
                          TRAIN, TRAIN_SET, LaneAligner, LaneDelay, Scrambler, StuckMonitor)
from .serdes7 import (IDELAY_BITS, SERDES_RATIO, S7ClockRx, S7IdelayCtrl, S7LvdsRx, S7LvdsTx)

#: Default training block length in words (a marker word, then TRAIN words).
DEFAULT_BLOCK = 32
#: Default largest lane-to-lane skew the deskew absorbs, in whole words (8 bits each).
DEFAULT_MAX_SKEW = 8
#: Default K: the TX sends a filler at least once every K words (clock compensation).
DEFAULT_FILLER_EVERY = 2048
#: Oscillator tolerance the default K is sized for (each end), and the resulting worst
#: case frequency difference between the two ends.
PPM_TOLERANCE = 100
#: Highest lane bit rate of 7-series HR-bank OSERDESE2/ISERDESE2 (-2 speed grade, DS181/182).
MAX_LANE_RATE = 1.25e9
#: States of :class:`RibbonRX` (``state`` CSR field).
RX_STATES = ("RESET", "LOCK", "VERIFY", "ALIGNED", "PREDATA", "DATA")


def max_filler_every(ppm_each_end: float = PPM_TOLERANCE) -> int:
    """Largest K that still compensates two oscillators ``ppm_each_end`` off in opposite
    directions: the fast end writes ``2 * ppm * 1e-6`` extra words per word, so one
    droppable filler is needed at least every ``1 / (2 * ppm * 1e-6)`` words."""
    return int(1 / (2 * ppm_each_end * 1e-6))


def _lane(sig, i: int):
    return sig[i * SERDES_RATIO:(i + 1) * SERDES_RATIO]


# ---------------------------------------------------------------------------------------


class RibbonTX(LiteXModule):
    """Transmit logic (sys): training blocks until both receivers are aligned, then words.

    ``sink``: line words (one per cycle; discarded while training: the link layer is not
    up then and repeats its TRAIN words anyway). ``rx_aligned``/``far_ready``/``rx_up``:
    from the local receiver. ``lanes``: LANES bytes for the serializers (registered).
    ``data_mode``: sending words.
    """

    def __init__(self, block: int = DEFAULT_BLOCK) -> None:
        self.sink = sink = stream.Endpoint(phy_layout())
        self.rx_aligned = Signal()
        self.far_ready = Signal()
        self.rx_up = Signal()
        self.lanes = Signal(LANES * SERDES_RATIO)
        self.data_mode = Signal()

        self.scrambler = scr = Scrambler()
        pos = Signal(max=block)
        last = Signal()
        marker = Signal(SERDES_RATIO)
        self.comb += [
            sink.ready.eq(1),
            scr.reset.eq(~self.data_mode),
            scr.ce.eq(self.data_mode),
            marker.eq(Mux(self.rx_aligned & self.far_ready, MARK_LAST,
                          Mux(self.rx_aligned, MARK_READY, MARK_WAIT))),
        ]
        self.sync += If(~self.data_mode,
            pos.eq(Mux(pos == block - 1, 0, pos + 1)),
            If(pos == 0,
                last.eq(self.rx_aligned & self.far_ready),
                self.lanes.eq(Replicate(marker, LANES)),
            ).Else(
                self.lanes.eq(Replicate(Constant(TRAIN, SERDES_RATIO), LANES)),
            ),
            If((pos == block - 1) & last, self.data_mode.eq(1)),
        ).Else(
            self.lanes.eq(Cat(sink.data ^ scr.key, sink.ctrl, self.rx_up, Constant(FRAMING, 6))),
            If(~self.rx_aligned, self.data_mode.eq(0), pos.eq(0), last.eq(0)),
        )


class RibbonRX(LiteXModule):
    """Receive logic (one clock domain: the forwarded clock's; written as ``sys``).

    ``lanes``/``bitslip``: the deserializers' bytes and bit-slip requests. ``source``:
    the line words (valid in data mode; ``ready`` ignored, the elastic buffer takes
    every word). States :data:`RX_STATES`: RESET clears the lanes; LOCK waits until every
    lane found its boundary (:class:`LaneAligner`) and measures the skew at the latest
    lane's marker; VERIFY checks the deskewed lanes agree for 4 blocks; ALIGNED reads the
    far end's markers until MARK_LAST; PREDATA counts out that block; DATA descrambles.
    Data is lost (back to RESET, ``retrains`` + 1) after 4 framing errors in a row on the
    ctrl lane or a data lane without transitions (``dead``: which lanes).
    """

    def __init__(self, block: int = DEFAULT_BLOCK, max_skew: int = DEFAULT_MAX_SKEW,
                 window: int | None = None, settle: int = 16, max_errors: int = 4,
                 stuck_words: int = 16) -> None:
        if block < 2 * max_skew + 2:
            raise ValueError(f"block {block} must be at least 2*max_skew+2 = {2 * max_skew + 2}")
        window = 2 * block if window is None else window
        self.lanes = Signal(LANES * SERDES_RATIO)
        self.bitslip = Signal(LANES)
        self.source = source = stream.Endpoint(phy_layout())
        # Status.
        self.state = Signal(3)
        self.aligned = Signal()       # ALIGNED, PREDATA or DATA
        self.data_mode = Signal()
        self.far_ready = Signal()     # the far end's receiver is aligned (its markers/up bit)
        self.far_up = Signal()        # the far end's receiver is in data mode
        self.locked = Signal(LANES)
        self.skew = Signal(LANES * 4)
        self.slips = Signal(LANES * 8)
        self.dead = Signal(LANES)
        self.pattern_errors = Signal(32)
        self.frame_errors = Signal(32)
        self.retrains = Signal(32)

        # -- per lane: boundary, words since marker, deskew ---------------------------------
        enable = Signal()
        aligners = [LaneAligner(window, settle) for _ in range(LANES)]
        delays = [LaneDelay(max_skew) for _ in range(LANES)]
        sat = 2 * block
        since = [Signal(max=sat + 1, reset=sat) for _ in range(LANES)]
        eff = [Signal(max=sat + 1) for _ in range(LANES)]
        desk = [Signal(SERDES_RATIO) for _ in range(LANES)]
        for i in range(LANES):
            a, d = aligners[i], delays[i]
            self.add_module(f"align{i}", a)
            self.add_module(f"delay{i}", d)
            self.comb += [
                a.data.eq(_lane(self.lanes, i)),
                a.enable.eq(enable),
                self.bitslip[i].eq(a.bitslip),
                self.locked[i].eq(a.locked),
                self.slips[8 * i:8 * i + 8].eq(a.slips),
                d.i.eq(_lane(self.lanes, i)),
                desk[i].eq(d.o),
                eff[i].eq(Mux(a.marker, 0, Mux(since[i] == sat, sat, since[i] + 1))),
                self.skew[4 * i:4 * i + 4].eq(d.delay),
            ]
            self.sync += since[i].eq(Mux(a.locked, eff[i], sat))

        all_locked = Signal()
        capture = Signal()
        self.comb += [
            all_locked.eq(reduce(and_, [a.locked for a in aligners])),
            capture.eq(all_locked & reduce(or_, [a.marker for a in aligners]) &
                       reduce(and_, [e <= max_skew for e in eff])),
        ]

        # -- deskewed word checks -------------------------------------------------------------
        agree = Signal()       # every lane shows the same training byte
        is_mark = Signal()
        w0 = desk[LANES - 1]   # the ctrl lane's byte
        self.comb += [
            agree.eq(reduce(and_, [b == w0 for b in desk]) &
                     reduce(or_, [w0 == v for v in TRAIN_SET])),
            is_mark.eq(reduce(or_, [w0 == v for v in MARKERS])),
        ]

        # -- data -----------------------------------------------------------------------------
        self.scrambler = scr = Scrambler()
        ctl_lane = desk[LANES - 1]
        framing_ok = Signal()
        self.comb += [
            framing_ok.eq(ctl_lane[2:] == FRAMING),
            source.data.eq(Cat(*desk[:DATA_LANES]) ^ scr.key),
            source.ctrl.eq(ctl_lane[0]),
            scr.ce.eq(self.data_mode),
        ]
        stuck = Signal(DATA_LANES)
        for i in range(DATA_LANES):
            m = StuckMonitor(stuck_words)
            self.add_module(f"stuck{i}", m)
            self.comb += [m.data.eq(desk[i]), m.ce.eq(self.data_mode), stuck[i].eq(m.stuck)]

        # -- state machine --------------------------------------------------------------------
        cnt = Signal(max=max(4 * block, sat) + 1)
        err_run = Signal(max=max(max_errors, 8) + 1)
        self.fsm = fsm = FSM(reset_state="RESET")
        fsm.act("RESET",
            NextValue(cnt, 0), NextValue(err_run, 0), NextValue(self.far_ready, 0),
            NextValue(self.far_up, 0),
            NextState("LOCK"),
        )
        fsm.act("LOCK",
            enable.eq(1),
            If(~all_locked,
                NextValue(cnt, 0),
            ).Elif(capture,
                [NextValue(delays[i].delay, eff[i]) for i in range(LANES)],
                NextValue(cnt, 0), NextState("VERIFY"),
            ).Elif(cnt == 4 * block,   # locked lanes but no consistent skew: start over
                NextValue(self.pattern_errors, self.pattern_errors + 1),
                NextState("RESET"),
            ).Else(NextValue(cnt, cnt + 1)),
        )
        fsm.act("VERIFY",
            enable.eq(1),
            If(~agree,
                NextValue(self.pattern_errors, self.pattern_errors + 1),
                NextState("RESET"),
            ).Elif(cnt == 4 * block,
                NextValue(cnt, 0), NextState("ALIGNED"),
            ).Else(NextValue(cnt, cnt + 1)),
        )
        fsm.act("ALIGNED",
            enable.eq(1), self.aligned.eq(1), scr.reset.eq(1),
            If(~agree,
                NextValue(self.pattern_errors, self.pattern_errors + 1),
                NextValue(err_run, err_run + 1),
                If(err_run == 7, NextState("RESET")),
            ).Elif(is_mark,
                NextValue(err_run, 0),
                NextValue(self.far_ready, (w0 == MARK_READY) | (w0 == MARK_LAST)),
                If(w0 == MARK_LAST, NextValue(cnt, block - 1), NextState("PREDATA")),
            ),
        )
        fsm.act("PREDATA",
            enable.eq(1), self.aligned.eq(1), scr.reset.eq(1),
            If(~agree | is_mark,
                NextValue(self.pattern_errors, self.pattern_errors + 1),
                NextState("RESET"),
            ).Elif(cnt == 1,
                NextValue(err_run, 0), NextState("DATA"),
            ).Else(NextValue(cnt, cnt - 1)),
        )
        fsm.act("DATA",
            enable.eq(1), self.aligned.eq(1), self.data_mode.eq(1), source.valid.eq(1),
            NextValue(self.far_up, ctl_lane[1]),
            If(~framing_ok,
                NextValue(self.frame_errors, self.frame_errors + 1),
                NextValue(err_run, err_run + 1),
            ).Else(NextValue(err_run, 0)),
            If((stuck != 0) | (~framing_ok & (err_run == max_errors - 1)),
                NextValue(self.dead, stuck),
                NextValue(self.retrains, self.retrains + 1),
                NextState("RESET"),
            ),
        )
        for k, name in enumerate(RX_STATES):
            self.comb += If(fsm.ongoing(name), self.state.eq(k))


class FillerHold(LiteXModule):
    """Clock compensation at the sender: ``hold`` rises once ``hold_at`` words passed
    without a filler (:func:`is_filler`) on ``data``/``ctrl``; the link layer then sends a
    filler at its next frame boundary, at most one frame later. Hence a filler leaves at
    least every ``hold_at + frame + 1`` words. ``holds`` counts the holds raised."""

    def __init__(self, hold_at: int) -> None:
        self.data = Signal(P.WORD_BITS)
        self.ctrl = Signal()
        self.hold = Signal()
        self.holds = Signal(32)
        cnt = Signal(max=hold_at + 1)
        filler = Signal()
        self.comb += [filler.eq(is_filler(self.data, self.ctrl)), self.hold.eq(cnt == hold_at)]
        self.sync += [
            If(filler, cnt.eq(0)).Elif(~self.hold, cnt.eq(cnt + 1)),
            If(~self.hold & (cnt == hold_at - 1) & ~filler, self.holds.eq(self.holds + 1)),
        ]


# ---------------------------------------------------------------------------------------


class RibbonCore(LiteXModule):
    """Ribbon PHY logic: the PHY adapter contract in sys, the serdes' parallel ports below.

    Adapter side (sys): ``sink`` (words from the LinkLayer), ``source`` (words to it),
    ``hold``, ``up``. Lane side: ``tx_lanes`` (sys; LANES bytes, lane ``i`` in bits
    ``8i..8i+7``, bit 0 first on the wire), ``rx_lanes`` and ``rx_bitslip`` (domain
    ``cd_rx``, clocked by the forwarded clock divided to the word rate).

    Parameters: ``mtu`` (sizes the hold threshold), ``block``/``max_skew`` (training
    block and deskew range in words), ``filler_every`` (K: a filler at least every K
    words; at most :func:`max_filler_every`), ``elastic_depth``.
    Status (sys): see :meth:`add_csrs`.
    """

    def __init__(self, mtu: int = P.DEFAULT_MTU, *, cd_rx: str = "ribbon_rx",
                 block: int = DEFAULT_BLOCK, max_skew: int = DEFAULT_MAX_SKEW,
                 filler_every: int = DEFAULT_FILLER_EVERY, elastic_depth: int = 64,
                 elastic_high: int | None = None, **rx_kwargs) -> None:
        hold_at = filler_every - frame_words(mtu) - 1
        if hold_at < 1:
            raise ValueError(f"filler_every {filler_every} must exceed an MTU frame "
                             f"({frame_words(mtu)} words) + 1")
        self.filler_every = filler_every
        self.sink = stream.Endpoint(phy_layout())
        self.source = stream.Endpoint(phy_layout())
        self.hold = Signal()
        self.up = Signal()
        self.tx_lanes = Signal(LANES * SERDES_RATIO)
        self.rx_lanes = Signal(LANES * SERDES_RATIO)
        self.rx_bitslip = Signal(LANES)

        self.tx = tx = RibbonTX(block)
        self.rx = rx = ClockDomainsRenamer(cd_rx)(RibbonRX(block, max_skew, **rx_kwargs))
        self.eb = eb = ElasticBuffer(cd_rx, depth=elastic_depth, high=elastic_high)
        self.holdgen = hg = FillerHold(hold_at)

        # Status crossed into sys.
        self.rx_state = Signal(3)
        self.rx_aligned = Signal()
        self.rx_up = Signal()
        self.far_ready = Signal()
        self.far_up = Signal()
        self.locked = Signal(LANES)
        self.skew = Signal(LANES * 4)
        self.dead = Signal(LANES)
        for src, dst in ((rx.state, self.rx_state), (rx.aligned, self.rx_aligned),
                         (rx.data_mode, self.rx_up), (rx.far_ready, self.far_ready),
                         (rx.far_up, self.far_up), (rx.locked, self.locked),
                         (rx.skew, self.skew), (rx.dead, self.dead)):
            self.specials += MultiReg(src, dst)   # levels that change rarely
        self.slips = Signal(LANES * 8)
        self.pattern_errors = Signal(32)
        self.frame_errors = Signal(32)
        self.retrains = Signal(32)
        self.fillers_dropped = Signal(32)
        for src, dst in ((rx.slips, self.slips), (rx.pattern_errors, self.pattern_errors),
                         (rx.frame_errors, self.frame_errors), (rx.retrains, self.retrains),
                         (eb.dropped_w, self.fillers_dropped)):
            bs = BusSynchronizer(len(src), cd_rx, "sys")
            self.submodules += bs
            self.comb += [bs.i.eq(src), dst.eq(bs.o)]
        self.elastic_overflow = eb.overflow
        self.holds = hg.holds

        self.comb += [
            self.sink.connect(tx.sink),
            tx.rx_aligned.eq(self.rx_aligned),
            tx.far_ready.eq(self.far_ready),
            tx.rx_up.eq(self.rx_up),
            self.tx_lanes.eq(tx.lanes),
            rx.lanes.eq(self.rx_lanes),
            self.rx_bitslip.eq(rx.bitslip),
            rx.source.connect(eb.sink),
            eb.source.connect(self.source),
            hg.data.eq(self.sink.data), hg.ctrl.eq(self.sink.ctrl),
            self.hold.eq(hg.hold),
            self.up.eq(self.rx_up & tx.data_mode),
        ]

    def add_csrs(self) -> None:
        """Status CSRs: state, per-lane lock/skew/slips, error and compensation counters."""
        self._status = CSRStatus(fields=[
            CSRField("up", size=1, description="Both directions in data mode (to LinkLayer.phy_up)."),
            CSRField("tx_data", size=1, description="Transmitter sends words (not training)."),
            CSRField("rx_data", size=1, description="Receiver delivers words."),
            CSRField("far_up", size=1, description="The far receiver reports data mode."),
            CSRField("rx_state", size=3, offset=4,
                     description="Receiver state: " + ", ".join(f"{k} {n}" for k, n in
                                                                enumerate(RX_STATES))),
            CSRField("overflow", size=1, offset=7, description="Elastic buffer overflowed (sticky)."),
        ])
        self.comb += [
            self._status.fields.up.eq(self.up),
            self._status.fields.tx_data.eq(self.tx.data_mode),
            self._status.fields.rx_data.eq(self.rx_up),
            self._status.fields.far_up.eq(self.far_up),
            self._status.fields.rx_state.eq(self.rx_state),
            self._status.fields.overflow.eq(self.elastic_overflow),
        ]
        regs = (
            ("lanes_locked", self.locked, "Lanes whose word boundary is found (bit per lane)."),
            ("lane_skew", self.skew, "Whole-word delay applied per lane (4 bits per lane)."),
            ("lane_slips", self.slips, "Bit slips requested per lane (8 bits per lane, wrap)."),
            ("dead_lanes", self.dead, "Data lanes without transitions at the last loss."),
            ("pattern_errors", self.pattern_errors,
             "Training words that broke the pattern after lock (and skew timeouts)."),
            ("frame_errors", self.frame_errors, "Data words with a bad ctrl-lane framing pattern."),
            ("retrains", self.retrains, "Losses of data mode (back to training)."),
            ("fillers_dropped", self.fillers_dropped,
             "Fillers the elastic buffer dropped (clock compensation)."),
            ("holds", self.holds, "Holds raised to force a filler (every K words under load)."),
        )
        for name, sig, desc in regs:
            csr = CSRStatus(len(sig), name=name, description=desc)
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(sig)


# ---------------------------------------------------------------------------------------


class RibbonPHY(LiteXModule):
    """The ribbon PHY a board instantiates: :class:`RibbonCore` on 7-series serdes.

    ``RibbonPHY(pads, sys_clk_freq, lanes=9)``: ``pads`` is the record of
    :func:`paranic.hw.phy.ribbon_pads.ribbon_io` (``tx_clk_p/n``, ``tx_data_p/n``,
    ``rx_clk_p/n``, ``rx_data_p/n``). Needs the clock domains ``sys`` (word clock) and
    ``sys4x`` (4x, phase-aligned: the serial DDR clock), and an IDELAYCTRL on 200 MHz:
    pass ``with_idelayctrl=True`` (and a ``cd_idelay`` domain) unless the CRG has one.
    Creates the domain ``cd_rx`` (forwarded clock / 4).

    Adapter streams per the PHY contract: ``sink``, ``source``, ``hold``, ``up``;
    :meth:`connect` gives the statements joining a LinkLayer.
    """

    def __init__(self, pads, sys_clk_freq: float, *, lanes: int = LANES, mtu: int = P.DEFAULT_MTU,
                 cd_sys4x: str = "sys4x", cd_rx: str = "ribbon_rx",
                 with_idelayctrl: bool = False, cd_idelay: str = "idelay",
                 idelay_taps: int | None = None, **core_kwargs) -> None:
        if lanes != LANES:
            raise ValueError(f"the ribbon carries a 65-bit word on {LANES} lanes of "
                             f"{SERDES_RATIO} bits per cycle; lanes={lanes} is not supported")
        rate = SERDES_RATIO * sys_clk_freq
        if rate > MAX_LANE_RATE:
            raise ValueError(f"lane rate {rate / 1e9:.3g} Gb/s (8 x sys_clk_freq) exceeds the "
                             f"7-series serdes limit of {MAX_LANE_RATE / 1e9:.3g} Gb/s")
        for name in ("tx_clk_p", "tx_clk_n", "tx_data_p", "tx_data_n", "rx_clk_p", "rx_clk_n",
                     "rx_data_p", "rx_data_n"):
            if not hasattr(pads, name):
                raise ValueError(f"ribbon pads lack '{name}' (build them with ribbon_io())")
        for name in ("tx_data_p", "tx_data_n", "rx_data_p", "rx_data_n"):
            if len(getattr(pads, name)) != lanes:
                raise ValueError(f"pads.{name} has {len(getattr(pads, name))} pins, need {lanes}")
        self.lane_rate = rate
        if idelay_taps is None:
            # Centre the data eye on the forwarded clock's edge: half a bit of delay.
            idelay_taps = min(31, round(0.5 / rate / 78.125e-12))
        self.core = core = RibbonCore(mtu, cd_rx=cd_rx, **core_kwargs)
        self.sink, self.source, self.hold, self.up = core.sink, core.source, core.hold, core.up

        # Transmit: 9 lanes + the forwarded clock (pattern 1010..: a clock at 4x the word rate).
        for i in range(lanes):
            o = S7LvdsTx(pads.tx_data_p[i], pads.tx_data_n[i], "sys", cd_sys4x)
            self.add_module(f"tx{i}", o)
            self.comb += o.data.eq(core.tx_lanes[8 * i:8 * i + 8])
        self.txclk = txclk = S7LvdsTx(pads.tx_clk_p, pads.tx_clk_n, "sys", cd_sys4x)
        self.comb += txclk.data.eq(0b01010101)

        # Receive: forwarded clock -> BUFIO/BUFR, lanes through IDELAY + ISERDES.
        setattr(self, f"cd_{cd_rx}", ClockDomain(cd_rx))
        self.rxclk = rxclk = S7ClockRx(pads.rx_clk_p, pads.rx_clk_n, cd_rx)
        self.specials += AsyncResetSynchronizer(getattr(self, f"cd_{cd_rx}"), ResetSignal("sys"))
        self.delay = Signal(lanes * IDELAY_BITS, reset=sum(idelay_taps << (IDELAY_BITS * i)
                                                            for i in range(lanes)))
        self.delay_load = Signal()
        self.rx_lanes = []
        for i in range(lanes):
            r = S7LvdsRx(pads.rx_data_p[i], pads.rx_data_n[i], rxclk.clk_io, cd_rx, "sys",
                         default_delay=idelay_taps)
            self.add_module(f"rx{i}", r)
            self.rx_lanes.append(r)
            self.comb += [
                core.rx_lanes[8 * i:8 * i + 8].eq(r.data),
                r.bitslip.eq(core.rx_bitslip[i]),
                r.delay.eq(self.delay[IDELAY_BITS * i:IDELAY_BITS * (i + 1)]),
                r.delay_load.eq(self.delay_load),
            ]
        if with_idelayctrl:
            self.idelayctrl = S7IdelayCtrl(cd_idelay)

    def connect(self, link_layer) -> list:
        """Statements joining ``link_layer`` (a LinkLayer) to this PHY (the PHY contract)."""
        return connect_phy(link_layer, self)

    def add_csrs(self) -> None:
        """The core's status CSRs, plus ``idelay`` (taps per lane) and ``idelay_load``."""
        self.core.add_csrs()
        self._idelay = CSRStorage(len(self.delay), reset=self.delay.reset.value,
            description=f"IDELAYE2 taps per lane ({IDELAY_BITS} bits each, 78 ps/tap); "
                        "applied by a write to idelay_load.")
        self._idelay_load = CSR()
        self.comb += [self.delay.eq(self._idelay.storage), self.delay_load.eq(self._idelay_load.re)]


__all__ = ["RibbonTX", "RibbonRX", "FillerHold", "RibbonCore", "RibbonPHY", "RX_STATES",
           "DEFAULT_BLOCK", "DEFAULT_MAX_SKEW", "DEFAULT_FILLER_EVERY", "PPM_TOLERANCE",
           "MAX_LANE_RATE", "max_filler_every"]
