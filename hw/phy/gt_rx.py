"""gt adapter, receive side: byte-stream parser and lane monitor in the transceiver's rx clock.

:class:`GTRxParser` turns ``nbytes`` decoded bytes per clock (+ K flags + per-byte
decode errors) back into line words (:mod:`.gt_framing`). It does not care in which
byte lane a word starts: it walks the bytes in order with a small state machine

* ``BOUND`` (at a word boundary): K28.5/K28.0 = idle, K27.7 = a control word
  follows, a D character = byte 0 of a data word;
* ``WORD`` (inside a word): D characters fill bytes 0..7; the 8th emits the word;
* ``HUNT`` (after an error): D characters are discarded until a K character.

A K character or a decode error inside a word drops the partial word (the link
layer's length and CRC checks then NAK and replay). A known K character anywhere
resynchronises (it is taken as the word boundary it marks); a decode error or an
unknown K character sends the parser to ``HUNT``. At most one word completes per
clock (a word has at least 8 bytes, a clock at most 4).

:class:`GTLaneMonitor` decides whether the lane is up: the transceiver says its
receiver is ready, commas arrive at least every ``comma_timeout`` clocks, and
``up_clocks`` consecutive clocks went by without a decode error. It goes down when
the receiver is not ready, when commas stop, or on ``err_max`` clocks with errors
within ``err_window`` clocks (a burst; single bit errors are the link layer's job).
"""

from __future__ import annotations

from migen import Cat, If, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from . import phy_layout
from .gt_framing import COMMA, LANE_BYTES, MARKER, PAD

HUNT, BOUND, WORD = 0, 1, 2


class GTRxParser(LiteXModule):
    """Transceiver bytes (``rx`` domain) into line words.

    Inputs (rx): ``data`` (8 x nbytes, lane 0 = first byte), ``k``, ``err`` (per byte:
    not in the 8b/10b table or disparity error). Output (rx): ``source``, registered,
    ``valid`` at most once per clock, no back-pressure. Status (rx): ``comma`` (a
    K28.5 this clock), ``error`` (an error byte this clock), counters ``dropped``
    (partial words dropped) and ``code_errors`` (error bytes and unknown K characters).
    """

    def __init__(self, nbytes: int = 4) -> None:
        if nbytes not in LANE_BYTES:
            raise ValueError(f"nbytes must be one of {LANE_BYTES}")
        W = nbytes
        self.data = Signal(8 * W)
        self.k = Signal(W)
        self.err = Signal(W)
        self.source = source = stream.Endpoint(phy_layout())
        self.comma = Signal()
        self.error = Signal()
        self.dropped = Signal(32)
        self.code_errors = Signal(32)

        st = Signal(2, reset=HUNT)
        cnt = Signal(3)
        ctl = Signal()
        buf = Signal(64)

        s, c, t, b = st, cnt, ctl, buf
        emits, drops, cerrs = [], [], []
        out_data = Signal(64)
        out_ctrl = Signal()
        for i in range(W):
            byte = self.data[8 * i:8 * (i + 1)]
            kk, ee = self.k[i], self.err[i]
            s1, c1, t1, b1 = Signal(2), Signal(3), Signal(), Signal(64)
            emit, drop, cerr = Signal(), Signal(), Signal()
            write = Signal()
            widx = Signal(3)
            self.comb += [
                write.eq(~ee & ~kk & (s != HUNT)),
                widx.eq(0),
                If(s == WORD, widx.eq(c)),   # byte 0 of a data word starts at BOUND
            ]
            self.comb += [
                s1.eq(s), c1.eq(c), t1.eq(t),
                If(ee,
                    cerr.eq(1), drop.eq(s == WORD), s1.eq(HUNT),
                ).Elif(kk,
                    drop.eq(s == WORD),
                    If((byte == COMMA) | (byte == PAD),
                        s1.eq(BOUND),
                    ).Elif(byte == MARKER,
                        s1.eq(WORD), c1.eq(0), t1.eq(1),
                    ).Else(
                        cerr.eq(1), s1.eq(HUNT),
                    ),
                ).Elif(s == BOUND,
                    s1.eq(WORD), c1.eq(1), t1.eq(0),
                ).Elif(s == WORD,
                    c1.eq(c + 1),
                    If(c == 7, emit.eq(1), s1.eq(BOUND)),
                ),
            ]
            for j in range(8):
                self.comb += [
                    b1[8 * j:8 * (j + 1)].eq(b[8 * j:8 * (j + 1)]),
                    If(write & (widx == j), b1[8 * j:8 * (j + 1)].eq(byte)),
                ]
            self.comb += If(emit, out_data.eq(b1), out_ctrl.eq(t))
            emits.append(emit)
            drops.append(drop)
            cerrs.append(cerr)
            s, c, t, b = s1, c1, t1, b1

        def popcount(sigs):
            out = 0
            for x in sigs:
                out = out + x
            return out

        self.comb += [
            self.comma.eq(Cat(*[(self.data[8 * i:8 * (i + 1)] == COMMA) & self.k[i] & ~self.err[i]
                                for i in range(W)]) != 0),
            self.error.eq(self.err != 0),
        ]
        self.sync.rx += [
            st.eq(s), cnt.eq(c), ctl.eq(t), buf.eq(b),
            source.valid.eq(Cat(*emits) != 0),
            source.data.eq(out_data),
            source.ctrl.eq(out_ctrl),
            self.dropped.eq(self.dropped + popcount(drops)),
            self.code_errors.eq(self.code_errors + popcount(cerrs)),
        ]


class GTLaneMonitor(LiteXModule):
    """``up`` (rx domain) from ``rx_ready``, ``comma`` and ``error`` (all rx domain).

    ``downs`` counts up -> down transitions.
    """

    def __init__(self, comma_timeout: int = 1024, up_clocks: int = 2048,
                 err_window: int = 1024, err_max: int = 8) -> None:
        if not (comma_timeout > 0 and up_clocks > 0 and err_window > 0 and 0 < err_max <= err_window):
            raise ValueError("monitor windows must be positive and err_max <= err_window")
        self.rx_ready = Signal()
        self.comma = Signal()
        self.error = Signal()
        self.up = Signal()
        self.downs = Signal(32)

        since_comma = Signal(max=comma_timeout + 1)
        no_comma = Signal()
        good = Signal(max=up_clocks + 1)
        win = Signal(max=err_window + 1)
        errs = Signal(max=err_max + 1)
        burst = Signal()
        self.comb += [
            no_comma.eq(since_comma == comma_timeout),
            burst.eq(errs == err_max),
        ]
        self.sync.rx += [
            If(self.comma, since_comma.eq(0)).Elif(~no_comma, since_comma.eq(since_comma + 1)),
            If(~self.rx_ready | no_comma | self.error,
                good.eq(0),
            ).Elif(good != up_clocks,
                good.eq(good + 1),
            ),
            If(win == err_window - 1,
                win.eq(0), errs.eq(0),
            ).Else(
                win.eq(win + 1),
                If(self.error & ~burst, errs.eq(errs + 1)),
            ),
            If(~self.rx_ready | no_comma | burst,
                self.up.eq(0),
                If(self.up, self.downs.eq(self.downs + 1)),
            ).Elif(good == up_clocks,
                self.up.eq(1),
            ),
        ]
