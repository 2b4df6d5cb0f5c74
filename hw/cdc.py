"""Crossings between NicCore's two clock domains, ``sys`` (host side, CSR bank) and
``nic`` (router, link layers, lanes, evacuation inputs): ``NicCore(nic_clock=True)``,
docs/boards.md "NIC clock domain".

* :class:`CsrCross`: what a block's ``add_csrs(cross=...)`` uses to keep its CSRs in
  the ``sys`` bank while its logic runs in ``nic``: configuration storages cross as
  levels (:meth:`~CsrCross.level`, two-flop ``MultiReg``), strobes as pulses
  (:meth:`~CsrCross.pulse`, ``PulseSynchronizer``), counters and status as whole words
  (:meth:`~CsrCross.status`, ``BusSynchronizer``: a value that was present at once in
  ``nic``, a few cycles late). :data:`NO_CROSS` (the default of ``add_csrs``) returns
  every signal unchanged, so one clock builds the same gateware as before.
* :class:`StreamCrossing`: a LiteX ``stream.ClockDomainCrossing`` (AsyncFIFO) plus
  ``pending`` on its write side: 1 while a beat written into it may not yet be visible
  as the far side's state (so an ``idle`` built from it is never early).
"""

from __future__ import annotations

from migen import If, Signal
from migen.genlib.cdc import BusSynchronizer, MultiReg, PulseSynchronizer
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

#: Beats of each packet stream's AsyncFIFO between ``sys`` and ``nic`` (wide side of
#: the converters).
CDC_DEPTH = 8

#: ``sys`` cycles a beat written into a crossing counts as pending: its way through the
#: AsyncFIFO (write pointer register, two flops in ``nic``) and back as a status bit
#: (two flops in ``sys``): about 8 ``sys`` cycles when ``sys`` is twice as fast as
#: ``nic``; 32 covers ``nic`` down to a quarter of ``sys``.
SETTLE_SYS_CYCLES = 32

#: ``nic`` cycles a :meth:`CsrCross.status`-style (``BusSynchronizer``) copy of a FIFO's
#: ``free`` may be late when ``sys`` is at least as fast as ``nic`` (the value in ``sys``
#: was sampled at most a ping in ``sys``, a pong in ``nic`` and the next ping ago: about
#: 8 ``sys`` + 3 ``nic`` cycles): the beats that may have entered the FIFO meanwhile,
#: which a room check against the copy adds to what must stay free.
FREE_LAG_NIC_CYCLES = 16


class _NoCross:
    """The one-clock case: every signal is used where it is."""

    @staticmethod
    def level(sig, reset: int = 0):
        return sig

    @staticmethod
    def pulse(sig):
        return sig

    @staticmethod
    def status(value):
        return value


#: ``add_csrs()``'s default: no crossing (the gateware of one clock domain).
NO_CROSS = _NoCross()


class CsrCross(LiteXModule):
    """Crossings for CSRs in ``csr_cd`` (the bank's domain) driving or showing logic in
    ``logic_cd``. Its submodules must stay outside the block renamed into ``logic_cd``
    (NicCore owns it), since a renamer would rename both of their domains."""

    def __init__(self, csr_cd: str = "sys", logic_cd: str = "nic") -> None:
        self.csr_cd, self.logic_cd = csr_cd, logic_cd
        self.n = {"level": 0, "pulse": 0, "status": 0}

    def level(self, sig, reset: int | None = None):
        """A storage (level, stable long before it is used) into ``logic_cd``."""
        if reset is None:
            reset = getattr(sig, "reset", 0)
            reset = reset.value if hasattr(reset, "value") else reset
        o = Signal(len(sig), reset=reset)
        self.specials += MultiReg(sig, o, odomain=self.logic_cd, reset=reset)
        self.n["level"] += 1
        return o

    def pulse(self, sig):
        """A one-cycle strobe (a CSR's ``re``) into ``logic_cd``: one pulse there. Two
        strobes must be a few ``logic_cd`` cycles apart (CSR writes are)."""
        ps = PulseSynchronizer(self.csr_cd, self.logic_cd)
        self.submodules += ps
        self.comb += ps.i.eq(sig)
        self.n["pulse"] += 1
        return ps.o

    def status(self, value):
        """A counter or status value of ``logic_cd`` into ``csr_cd`` as a whole word."""
        bs = BusSynchronizer(len(value), self.logic_cd, self.csr_cd)
        self.submodules += bs
        self.comb += bs.i.eq(value)
        self.n["status"] += 1
        return bs.o


class StreamCrossing(LiteXModule):
    """``stream.ClockDomainCrossing(layout, cd_from, cd_to, depth)`` (``sink`` in
    ``cd_from``, ``source`` in ``cd_to``) and ``pending`` (in ``cd_from``): a beat is
    offered to it, or was written into it less than :data:`SETTLE_SYS_CYCLES` cycles
    ago, or its ``source`` offered one two ``cd_from`` flops ago. ``far_busy`` (in
    ``cd_to``, default 0): more of the far side's state (the FIFO the crossing feeds
    not empty), seen through the same flops, so that ``pending | far_idle``-style checks
    see a beat somewhere all the way."""

    def __init__(self, layout, cd_from: str, cd_to: str, depth: int = CDC_DEPTH,
                 settle: int = SETTLE_SYS_CYCLES) -> None:
        self.cdc = stream.ClockDomainCrossing(layout, cd_from=cd_from, cd_to=cd_to, depth=depth)
        self.sink, self.source = self.cdc.sink, self.cdc.source
        self.pending = Signal()
        self.far_busy = Signal()

        # # #

        count = Signal(max=settle + 1)
        far = Signal()
        seen = Signal()
        self.comb += far.eq(self.source.valid | self.far_busy)
        self.specials += MultiReg(far, seen, odomain=cd_from)
        getattr(self.sync, cd_from).__iadd__(
            If(self.sink.valid & self.sink.ready, count.eq(settle)).Elif(count != 0, count.eq(count - 1)))
        self.comb += self.pending.eq(self.sink.valid | (count != 0) | seen)
