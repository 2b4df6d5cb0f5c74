"""64b/66b PCS for a link lane (SFP+ at 10.3125 Gb/s, a QSFP28 lane at 25.78125 Gb/s).

A ``dw``-bit beat of the link (``phy_layout(dw)``) goes on the line as K = dw/64
66-bit blocks, one per 64-bit word of the beat, every block with the beat's header:

=============  ============================  =====================================
beat           sync header (line order)      64-bit payload (scrambled)
=============  ============================  =====================================
data beat      ``01`` (HDR_DATA)             word k of the beat
control beat   ``10`` (HDR_CTRL)             word k of the beat (the control word
                                             in word 0, zeros above it)
idle beat      ``10``                        IDLE_FIRST in block 0, IDLE_NEXT in
                                             the others
=============  ============================  =====================================

Blocks go out header first, then payload bit 0 first; the 66-bit value of a block is
``hdr | payload << 2`` (bit 0 first on the line) and a beat is block 0 in its low 66
bits. The payloads pass a self-synchronising scrambler x^58 + x^39 + 1 (IEEE 802.3
clause 49.2.6), headers are not scrambled.

Modules (all in one clock domain, written as ``sys``; the adapter renames them):

* :class:`Scrambler` / :class:`Descrambler`: n payload bits per enabled cycle.
* :class:`Pcs66Tx`: beats from a FIFO, idle beats when it is empty (and every
  ``idle_interval`` beats when K > 1: they mark the beat boundary), scrambled blocks.
* :class:`TxGearbox` / :class:`RxGearbox`: B = 66 K bit beats to / from the
  transceiver's G-bit parallel words (G <= B; e.g. 64 per block at 10.3125 Gb/s,
  128 per two blocks at 25.78125 Gb/s); the receive one slips one bit on request.
* :class:`BlockLock`: clause-49 style lock on the sync headers.
* :class:`Pcs66Rx`: gearbox, lock, descrambler, beat alignment (K > 1) and decode.

``docs/phy.md`` ("64b/66b lanes") has the rules, latencies and figures.
"""

from __future__ import annotations

from migen import Case, Cat, If, Mux, Replicate, Signal

from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from . import phy_layout

#: Sync headers as 2-bit values, bit 0 first on the line: "01" data, "10" control.
HDR_DATA = 0b10
HDR_CTRL = 0b01
#: Idle payloads (before scrambling). IDLE_FIRST is IEEE 802.3's idle control block
#: (block type 0x1E, eight /I/ = 0); neither is a valid link control word (its CRC-16
#: fails, ``paranic.spec.link.unpack_ctl``), so a control beat is never taken for idle.
IDLE_FIRST = 0x1E
IDLE_NEXT = 0x2D
#: Scrambler polynomial taps (x^58 + x^39 + 1).
SCR_TAPS = (39, 58)
SCR_BITS = 58
#: Block lock (IEEE 802.3 clause 49.2.13): valid headers in a row to lock, headers per
#: window and invalid headers in a window that lose the lock.
LOCK_HEADERS = 64
LOCK_WINDOW = 64
LOCK_BAD = 16


def blocks_per_beat(dw: int) -> int:
    """64b/66b blocks per ``dw``-bit beat."""
    return P.beat_words(dw)


class Scrambler(LiteXModule):
    """Self-synchronising scrambler x^58 + x^39 + 1 over ``n`` bits (bit 0 first).

    ``i`` -> ``o`` combinatorially; the state (the last 58 line bits) advances when
    ``ce`` is high. Bit by bit ``s_j = d_j ^ s_(j-39) ^ s_(j-58)``; in words, with
    ``X = Cat(state, o)``: ``o = i ^ X[19:19+n] ^ X[0:n]``, computed in 39-bit chunks
    (each chunk needs only line bits at least 39 back).
    """

    def __init__(self, n: int) -> None:
        self.i = Signal(n)
        self.o = Signal(n)
        self.ce = Signal(reset=1)
        state = Signal(SCR_BITS)            # state[57] = the latest line bit
        x = Cat(state, self.o)
        lag = SCR_BITS - SCR_TAPS[0]        # 19
        for c in range(0, n, SCR_TAPS[0]):
            e = min(c + SCR_TAPS[0], n)
            chunk = Signal(e - c, name=f"scr_chunk{c}")
            self.comb += [
                chunk.eq(self.i[c:e] ^ x[c + lag:e + lag] ^ x[c:e]),
                self.o[c:e].eq(chunk),
            ]
        self.sync += If(self.ce, state.eq(x[n:n + SCR_BITS]))


class Descrambler(LiteXModule):
    """The scrambler's inverse, feed-forward: ``d_j = s_j ^ s_(j-39) ^ s_(j-58)``.

    A line bit error corrupts that bit and the bits 39 and 58 later (three errors).
    """

    def __init__(self, n: int) -> None:
        self.i = Signal(n)
        self.o = Signal(n)
        self.ce = Signal(reset=1)
        state = Signal(SCR_BITS)
        x = Cat(state, self.i)
        lag = SCR_BITS - SCR_TAPS[0]
        self.comb += self.o.eq(self.i ^ x[lag:lag + n] ^ x[0:n])
        self.sync += If(self.ce, state.eq(x[n:n + SCR_BITS]))


class Pcs66Tx(LiteXModule):
    """Beats into scrambled 66-bit blocks.

    ``sink``: ``phy_layout(64 K)`` (first-word-fall-through, e.g. a FIFO); ``ce``: the
    gearbox takes a beat this cycle (then a beat is popped, or an idle beat goes out).
    ``block``: K blocks (66 K bits, block 0 low), combinatorial. ``idle_interval``
    (K > 1: required): at most this many beats between idle beats; 0 = only when empty.
    ``idles``: idle beats sent (counter).
    """

    def __init__(self, k: int = 1, idle_interval: int = 0) -> None:
        if k > 1 and not idle_interval:
            raise ValueError("K > 1 needs idle beats (idle_interval) to mark beat boundaries")
        self.sink = sink = stream.Endpoint(phy_layout(64 * k))
        self.ce = Signal()
        self.block = Signal(66 * k)
        self.idles = Signal(32)

        self.scrambler = scr = Scrambler(64 * k)
        force = Signal()
        idle = Signal()
        if idle_interval:
            since = Signal(max=idle_interval + 1)
            self.comb += force.eq(since == idle_interval)
            self.sync += If(self.ce, If(idle, since.eq(0)).Else(since.eq(since + 1)))
        idle_words = Cat(Signal(64, reset=IDLE_FIRST), *[Signal(64, reset=IDLE_NEXT)
                                                         for _ in range(k - 1)])
        hdr = Signal(2)
        self.comb += [
            idle.eq(~sink.valid | force),
            sink.ready.eq(self.ce & ~force),
            hdr.eq(Mux(idle | sink.ctrl, HDR_CTRL, HDR_DATA)),
            scr.i.eq(Mux(idle, idle_words, sink.data)),
            scr.ce.eq(self.ce),
            self.block.eq(Cat(*[Cat(hdr, scr.o[64 * j:64 * (j + 1)]) for j in range(k)])),
        ]
        self.sync += If(self.ce & idle, self.idles.eq(self.idles + 1))


class TxGearbox(LiteXModule):
    """``B``-bit beats into ``G``-bit transceiver words (G <= B), bit 0 first.

    ``take`` (comb): ``din`` is consumed this cycle (``B - G`` of every B cycles idle
    for it: 32 of 33 at B = 66, G = 64). ``data``: registered, one word every cycle.
    """

    def __init__(self, b: int, g: int) -> None:
        if not 0 < g <= b:
            raise ValueError("the gearbox needs 0 < G <= B")
        self.din = Signal(b)
        self.take = Signal()
        self.data = Signal(g)
        buf = Signal(b)                 # bits held, bit 0 next on the line
        cnt = Signal(max=b + 1)         # how many (always < B)
        comb = Signal(b + g)
        self.comb += [
            self.take.eq(cnt < g),
            comb.eq(buf),
            If(self.take, comb.eq(buf | (Cat(self.din, Replicate(0, g)) << cnt))),
        ]
        self.sync += [
            self.data.eq(comb[:g]),
            buf.eq(comb[g:]),
            cnt.eq(Mux(self.take, cnt + b - g, cnt - g)),
        ]


class RxGearbox(LiteXModule):
    """``G``-bit transceiver words into ``B``-bit beats, with a one-bit slip.

    ``din``: one word every cycle (bit 0 first on the line). ``slip`` (pulse): the
    beat boundary moves one bit later; it applies to the next beat emitted (the one
    visible one cycle after ``slip``). ``valid``/``data``: registered beats.
    """

    def __init__(self, b: int, g: int) -> None:
        if not 0 < g <= b:
            raise ValueError("the gearbox needs 0 < G <= B")
        self.din = Signal(g)
        self.slip = Signal()
        self.valid = Signal()
        self.data = Signal(b)
        buf = Signal(b + 1)
        cnt = Signal(max=b + 2)
        pend = Signal()
        s = Signal()
        comb = Signal(b + g + 1)
        avail = Signal(max=b + g + 2)
        emit = Signal()
        self.comb += [
            s.eq(pend | self.slip),
            comb.eq(buf | (Cat(self.din, Replicate(0, b + 1)) << cnt)),
            avail.eq(cnt + g),
            emit.eq(avail >= b + s),
        ]
        self.sync += [
            self.valid.eq(emit),
            If(emit,
                self.data.eq(Mux(s, comb[1:b + 1], comb[:b])),
                buf.eq(Mux(s, comb >> (b + 1), comb >> b)),
                cnt.eq(avail - b - s),
                pend.eq(0),
            ).Else(
                buf.eq(comb),
                cnt.eq(avail),
                pend.eq(s),
            ),
        ]


class BlockLock(LiteXModule):
    """Block lock on the sync headers (IEEE 802.3 clause 49 style), K headers per beat.

    Unlocked: every beat whose K headers are all valid (``01`` or ``10``) adds K to a
    count; ``LOCK_HEADERS`` in a row lock; an invalid header slips the boundary one
    bit (``slip`` pulse) and restarts the count. Locked: invalid headers are counted in
    windows of ``LOCK_WINDOW`` headers; ``LOCK_BAD`` in one window lose the lock (and
    slip). ``slips`` and ``losses`` count (this domain).
    """

    def __init__(self, k: int = 1, lock_headers: int = LOCK_HEADERS,
                 window: int = LOCK_WINDOW, bad_max: int = LOCK_BAD) -> None:
        self.valid = Signal()
        self.hdrs = [Signal(2) for _ in range(k)]
        self.slip = Signal()
        self.locked = Signal()
        self.slips = Signal(32)
        self.losses = Signal(32)
        ok = [Signal() for _ in range(k)]
        nbad = Signal(max=k + 1)
        good = Signal(max=lock_headers + k + 1)
        win = Signal(max=window + k + 1)
        bad = Signal(max=bad_max + k + 1)
        self.comb += [o.eq(h[0] ^ h[1]) for o, h in zip(ok, self.hdrs)]
        self.comb += nbad.eq(sum(~o for o in ok) if k > 1 else ~ok[0])
        self.comb += self.slip.eq(self.valid & (
            (~self.locked & (nbad != 0)) | (self.locked & (bad + nbad >= bad_max))))
        self.sync += [
            If(self.slip, self.slips.eq(self.slips + 1)),
            If(self.valid,
                If(~self.locked,
                    If(nbad != 0,
                        good.eq(0),
                    ).Elif(good + k >= lock_headers,
                        self.locked.eq(1), good.eq(0), win.eq(0), bad.eq(0),
                    ).Else(
                        good.eq(good + k),
                    ),
                ).Else(
                    If(bad + nbad >= bad_max,
                        self.locked.eq(0), self.losses.eq(self.losses + 1),
                    ).Elif(win + k >= window,
                        win.eq(0), bad.eq(0),
                    ).Else(
                        win.eq(win + k), bad.eq(bad + nbad),
                    ),
                ),
            ),
        ]


class Pcs66Rx(LiteXModule):
    """Transceiver words (G bits per cycle) into beats: gearbox, block lock,
    descrambler, beat alignment (K > 1) and decode.

    ``data``: the transceiver's word. ``source``: ``phy_layout(64 K)``, registered,
    ``valid`` whenever a data or control beat arrived (idle beats are dropped here).
    Status: ``locked``, ``aligned`` (locked and, for K > 1, the beat boundary found
    from an idle beat), ``idle`` (an idle beat this cycle). Counters: ``bad_headers``
    (invalid sync headers while locked), ``bad_beats`` (dropped: an invalid header or
    mixed headers in a beat), ``realigns`` (beat boundary moved), and the lock's
    ``slips``/``losses``.
    """

    def __init__(self, k: int = 1, g: int | None = None) -> None:
        b = 66 * k
        g = 64 * k if g is None else g
        self.data = Signal(g)
        self.source = source = stream.Endpoint(phy_layout(64 * k))
        self.aligned = Signal()
        self.idle = Signal()
        self.bad_headers = Signal(32)
        self.bad_beats = Signal(32)
        self.realigns = Signal(32)

        self.gearbox = gb = RxGearbox(b, g)
        self.lock = lock = BlockLock(k)
        self.descrambler = dsc = Descrambler(64 * k)
        self.locked = lock.locked
        self.slips, self.losses = lock.slips, lock.losses
        hdrs = [gb.data[66 * j:66 * j + 2] for j in range(k)]
        self.comb += [
            gb.din.eq(self.data),
            gb.slip.eq(lock.slip),
            lock.valid.eq(gb.valid),
            *[h.eq(x) for h, x in zip(lock.hdrs, hdrs)],
            dsc.i.eq(Cat(*[gb.data[66 * j + 2:66 * (j + 1)] for j in range(k)])),
            dsc.ce.eq(gb.valid),
        ]
        cur_h = hdrs
        cur_p = [dsc.o[64 * j:64 * (j + 1)] for j in range(k)]
        nbad = Signal(max=k + 1)
        self.comb += nbad.eq(sum((h[0] == h[1]) for h in cur_h) if k > 1
                             else cur_h[0][0] == cur_h[0][1])

        # The beat: K blocks starting at block `phase` of (previous window, this window).
        if k == 1:
            beat_h, beat_p = cur_h, cur_p
            realign = Signal()
            self.comb += self.aligned.eq(lock.locked)
        else:
            prev_h = [Signal(2) for _ in range(k)]
            prev_p = [Signal(64) for _ in range(k)]
            phase = Signal(max=k)
            self.sync += If(gb.valid, *[a.eq(x) for a, x in zip(prev_h + prev_p, cur_h + cur_p)])
            both_h, both_p = prev_h + cur_h, prev_p + cur_p
            beat_h = [Signal(2) for _ in range(k)]
            beat_p = [Signal(64) for _ in range(k)]
            self.comb += Case(phase, {p: [*[beat_h[j].eq(both_h[p + j]) for j in range(k)],
                                          *[beat_p[j].eq(both_p[p + j]) for j in range(k)]]
                                      for p in range(k)})
            idle_at = [Signal() for _ in range(k)]
            self.comb += [x.eq((h == HDR_CTRL) & (p == IDLE_FIRST))
                          for x, h, p in zip(idle_at, cur_h, cur_p)]
            realign = Signal()
            new_phase = Signal(max=k)
            for j in reversed(range(k)):
                self.comb += If(idle_at[j], new_phase.eq(j))
            self.comb += realign.eq(gb.valid & lock.locked & (Cat(*idle_at) != 0)
                                    & (new_phase != phase))
            self.sync += [
                If(realign, phase.eq(new_phase), self.realigns.eq(self.realigns + 1)),
                If(~lock.locked,
                    self.aligned.eq(0),
                ).Elif(gb.valid & (Cat(*idle_at) != 0),
                    self.aligned.eq(1),
                ),
            ]

        hdr_ok = Signal()
        same = Signal()
        is_idle = Signal()
        take = Signal()
        self.comb += [
            hdr_ok.eq(Cat(*[h[0] ^ h[1] for h in beat_h]) == (1 << k) - 1),
            same.eq(Cat(*[h == beat_h[0] for h in beat_h]) == (1 << k) - 1),
            is_idle.eq((beat_h[0] == HDR_CTRL) & (beat_p[0] == IDLE_FIRST)),
            take.eq(gb.valid & self.aligned & ~realign),
        ]
        self.sync += [
            source.valid.eq(take & hdr_ok & same & ~is_idle),
            source.data.eq(Cat(*beat_p)),
            source.ctrl.eq(beat_h[0] == HDR_CTRL),
            self.idle.eq(take & hdr_ok & same & is_idle),
            If(take & ~(hdr_ok & same), self.bad_beats.eq(self.bad_beats + 1)),
            If(gb.valid & lock.locked, self.bad_headers.eq(self.bad_headers + nbad)),
        ]


class Pcs66Monitor(LiteXModule):
    """``up`` from ``rx_ready`` and the receiver's ``aligned``: up after ``up_cycles``
    cycles in a row with both, down at once when either drops (the lock falls on an
    error burst: 16 invalid headers in 64). ``downs`` counts up -> down."""

    def __init__(self, up_cycles: int = 1024) -> None:
        if up_cycles < 1:
            raise ValueError("up_cycles must be positive")
        self.rx_ready = Signal()
        self.aligned = Signal()
        self.up = Signal()
        self.downs = Signal(32)
        good = Signal(max=up_cycles + 1)
        ok = Signal()
        self.comb += ok.eq(self.rx_ready & self.aligned)
        self.sync += [
            If(~ok, good.eq(0)).Elif(good != up_cycles, good.eq(good + 1)),
            If(~ok,
                self.up.eq(0),
                If(self.up, self.downs.eq(self.downs + 1)),
            ).Elif(good == up_cycles,
                self.up.eq(1),
            ),
        ]


__all__ = ["BlockLock", "Descrambler", "HDR_CTRL", "HDR_DATA", "IDLE_FIRST", "IDLE_NEXT",
           "Pcs66Monitor", "Pcs66Rx", "Pcs66Tx", "RxGearbox", "Scrambler", "TxGearbox",
           "blocks_per_beat"]
