"""The ribbon's wired-AND sync line: a hardware barrier across every board on the cable.

One open-drain line, pulled up once, shared by all boards. A board drives it low while
it has not arrived and releases it when it has, so the line is high exactly when every
board has arrived. ``docs/phy.md`` ("Sync line") has the protocol and its timing.

Episodes are separated by edges, not levels: after a board sees the line high it keeps
releasing for ``hold`` cycles (so every board, whatever its synchroniser phase, sees the
high), then drives low for at least ``min_low`` cycles (so every board sees the line low
again before the next episode can complete), and only then releases again if its next
arrival is already pending. Received levels pass a two-flop synchroniser and a glitch
filter: the filtered level follows the line only after ``filter`` equal samples.
"""

from __future__ import annotations

from migen import If, Signal, TSTriple
from migen.genlib.cdc import MultiReg
from migen.genlib.fsm import FSM, NextState, NextValue

from litex.gen import LiteXModule
from litex.soc.interconnect.csr import CSRStatus

from paranic.spec import protocol as P

from ..barrier import BarrierDone


class GlitchFilter(LiteXModule):
    """``o`` follows ``i`` once ``i`` held the new level for ``cycles`` cycles.
    ``glitches`` counts changes of ``i`` that reverted before that."""

    def __init__(self, cycles: int, reset: int = 0) -> None:
        if cycles < 1:
            raise ValueError("filter cycles must be at least 1")
        self.i = Signal()
        self.o = Signal(reset=reset)
        self.glitches = Signal(32)
        cnt = Signal(max=cycles + 1)
        self.sync += If(self.i == self.o,
            If(cnt != 0, self.glitches.eq(self.glitches + 1)),
            cnt.eq(0),
        ).Elif(cnt == cycles - 1,
            self.o.eq(self.i), cnt.eq(0),
        ).Else(cnt.eq(cnt + 1))


class SyncLine(LiteXModule):
    """One board's end of the wired-AND sync line.

    Interface (sys): ``arrive`` (pulse: this board arrived; remembered while an episode
    is still finishing), ``done`` (pulse: every board arrived), ``waiting`` (arrived,
    not yet done), ``line`` (filtered line level). Pad side: ``pad`` (an IO record's pin,
    driven through a tristate: low or released), or, without a pad, ``drive_low``
    (output) and ``line_in`` (input, asynchronous) for simulation and other glue.
    Counters: ``episodes``, ``glitches``.
    """

    def __init__(self, pad=None, filter: int = 8, hold: int | None = None,
                 min_low: int | None = None) -> None:
        # Latency from the line to ``line``: 2 synchroniser flops + filter + 1.
        latency = filter + 3
        hold = 2 * latency if hold is None else hold
        min_low = 2 * latency if min_low is None else min_low
        if hold < latency or min_low < latency + 1:
            raise ValueError(f"hold ({hold}) and min_low ({min_low}) must cover the line's "
                             f"latency of {latency} cycles")
        self.arrive = Signal()
        self.done = Signal()
        self.waiting = Signal()
        self.line = Signal()
        self.drive_low = Signal()
        self.line_in = Signal()
        self.episodes = Signal(32)

        if pad is not None:
            t = TSTriple()
            self.specials += t.get_tristate(pad)
            self.comb += [t.o.eq(0), t.oe.eq(self.drive_low), self.line_in.eq(t.i)]

        sync_in = Signal()
        self.specials += MultiReg(self.line_in, sync_in)
        self.filt = filt = GlitchFilter(filter)
        self.glitches = filt.glitches
        self.comb += [filt.i.eq(sync_in), self.line.eq(filt.o)]

        pending = Signal()
        cnt = Signal(max=max(hold, min_low) + 1)
        self.fsm = fsm = FSM(reset_state="LOW")
        fsm.act("LOW",
            self.drive_low.eq(1),
            If(cnt != min_low, NextValue(cnt, cnt + 1)).Elif(pending | self.arrive,
                NextValue(cnt, 0), NextState("RELEASED"),
            ),
        )
        fsm.act("RELEASED",
            self.waiting.eq(1),
            If(self.line,
                self.done.eq(1),
                NextValue(self.episodes, self.episodes + 1),
                NextState("HOLD"),
            ),
        )
        fsm.act("HOLD",
            If(cnt == hold - 1, NextValue(cnt, 0), NextState("LOW")).Else(NextValue(cnt, cnt + 1)),
        )
        # An arrival outside RELEASED (or in the cycle it completes) is for the next
        # episode: remember it until LOW has lasted min_low cycles.
        go = Signal()
        self.comb += go.eq(fsm.ongoing("LOW") & (cnt == min_low) & (pending | self.arrive))
        self.sync += If(go,
            pending.eq(0),
        ).Elif(self.arrive & (~fsm.ongoing("RELEASED") | self.done),
            pending.eq(1),
        )

    def add_csrs(self) -> None:
        """Status: line level, waiting; counters episodes and glitches."""
        self._state = CSRStatus(2, description="bit 0: filtered line level, bit 1: waiting.")
        self._episodes = CSRStatus(32, description="Sync-line episodes completed.")
        self._glitches = CSRStatus(32, description="Line pulses shorter than the filter (noise).")
        self.comb += [
            self._state.status.eq(self.line | (self.waiting << 1)),
            self._episodes.status.eq(self.episodes),
            self._glitches.status.eq(self.glitches),
        ]


class SyncLineBarrier(LiteXModule):
    """The barrier's enter/done interface (as :class:`paranic.hw.barrier.BarrierUnit`)
    completed by a :class:`SyncLine` instead of barrier packets.

    ``enter``/``enter_ctx`` (pulse, context): a context enters. Once the contexts in
    ``participants`` (0: any one) have entered, the board arrives on the line; when the
    line completes, ``done``/``done_ctx`` pulse once per context of the episode (one per
    cycle). Contexts entering after the arrival go into the next episode.
    """

    def __init__(self, line: SyncLine, n_ctx: int = P.DEFAULT_CONTEXTS) -> None:
        self.enter = Signal()
        self.enter_ctx = Signal(P.CTX_BITS)
        self.participants = Signal(n_ctx)
        self.done = Signal()
        self.done_ctx = Signal(P.CTX_BITS)
        self.dn = dn = BarrierDone(n_ctx)
        cur = Signal(n_ctx)
        nxt = Signal(n_ctx)
        arrived = Signal()
        enter_oh = Signal(n_ctx)
        local_ok = Signal()
        for c in range(n_ctx):
            self.comb += enter_oh[c].eq(self.enter & (self.enter_ctx == c))
        self.comb += [
            local_ok.eq(((self.participants == 0) & (cur != 0)) |
                        ((self.participants != 0) &
                         ((cur & self.participants) == self.participants))),
            line.arrive.eq(local_ok & ~arrived),
            self.done.eq(dn.done), self.done_ctx.eq(dn.done_ctx),
        ]
        self.comb += If(line.done, dn.add.eq(cur))
        self.sync += If(line.done,
            cur.eq(nxt | enter_oh), nxt.eq(0), arrived.eq(0),
        ).Else(
            If(arrived, nxt.eq(nxt | enter_oh)).Else(cur.eq(cur | enter_oh)),
            If(line.arrive, arrived.eq(1)),
        )


__all__ = ["GlitchFilter", "SyncLine", "SyncLineBarrier"]
