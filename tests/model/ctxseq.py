"""The context sequences (open, close, window) in cocotb benches, run by libparanic's C
code: the step machine of ``paranic/pn_ctxseq.h`` (the driver's and the simulator's,
which describes the sequences), called through cffi.

:class:`CtxRegs` is what a bench's privileged side offers: the per-context registers
by their ``pn_ctxreg_name()`` (``sel``, ``enable`` ... ``write``, ``reset``, ``state``),
written and read asynchronously, and a wait of some cycles. Its subclasses map them to
the CSRs ``host_ctx_<name>`` (:class:`tests.model.csr.CsrConfig`) or to the
HostInterface's ``cfg_*`` ports (:class:`tests.model.host.PortConfig`; in Migen benches
:class:`MigenPorts`). :meth:`CtxRegs.run`
carries a sequence's accesses out on them; ``write_ctx``/``reset_ctx``/``state`` are the
single accesses tests use to poke a context directly.

libparanic is built (``make -C userlib``, a no-op when it is current) and loaded on first
use only, so importing this module (and the host model) costs nothing where no sequence
runs.
"""

from __future__ import annotations

import abc
import errno
from functools import lru_cache

#: Cycles between two reads of a busy context (the simulator's rule), and waited after
#: it went quiet before the reset (the model applies DMA writes when their last beat
#: arrives; this covers the NIC's own write pipeline).
POLL_CYCLES = 32
SETTLE_CYCLES = 64


@lru_cache(maxsize=None)
def _c():
    from paranic.launch import build_userlib
    build_userlib()   # make brings libparanic up to date: the sequence run is the current C code
    from paranic.clib import ffi, lib
    regs = tuple(ffi.string(lib.pn_ctxreg_name(i)).decode() for i in range(lib.PN_CTXREG_COUNT))
    kinds = {"open": lib.PN_CTXSEQ_OPEN, "close": lib.PN_CTXSEQ_CLOSE, "window": lib.PN_CTXSEQ_WINDOW,
             "window_shrink": lib.PN_CTXSEQ_WINDOW_SHRINK}
    giveup = {"keep": lib.PN_CTXSEQ_KEEP, "reset_anyway": lib.PN_CTXSEQ_RESET_ANYWAY}
    return ffi, lib, regs, kinds, giveup


def registers() -> tuple[str, ...]:
    """The per-context registers in the C enum's order: ``sel``, ``enable`` ... ``state``."""
    return _c()[2]


def fields() -> tuple[str, ...]:
    """The configuration fields a ``write`` strobe stores: ``enable`` .. ``win_size``."""
    r = registers()
    return r[r.index("enable"):r.index("write")]


class CtxRegs(abc.ABC):
    """The per-context registers of one node; subclasses implement the three accesses."""

    @abc.abstractmethod
    async def reg_write(self, name: str, value: int) -> None:
        """Write register ``name`` (``write``/``reset``: the strobe)."""

    @abc.abstractmethod
    async def reg_read(self, name: str) -> int:
        """Read register ``name`` (only ``state`` is readable)."""

    @abc.abstractmethod
    async def cycles(self, n: int) -> None:
        """Let ``n`` clock cycles pass."""

    # -- single accesses ------------------------------------------------------------------
    async def write_ctx(self, ctx: int, **values: int) -> None:
        """Select ``ctx``, write every field (those not given: 0) and strobe ``write``."""
        unknown = set(values) - set(fields())
        if unknown:
            raise ValueError(f"no context field {sorted(unknown)}; have {fields()}")
        await self.reg_write("sel", ctx)
        for k in fields():
            await self.reg_write(k, int(values.get(k, 0)))
        await self.reg_write("write", 1)

    async def reset_ctx(self, ctx: int) -> None:
        await self.reg_write("sel", ctx)
        await self.reg_write("reset", 1)

    async def state(self, ctx: int) -> int:
        """``ctx``'s ``PN_CTX_STATE_*`` bits."""
        await self.reg_write("sel", ctx)
        return await self.reg_read("state")

    # -- sequences ------------------------------------------------------------------------
    async def run(self, kind: str, ctx: int, timeout: int = 200_000, give_up: str | None = None,
                  **config: int) -> int:
        """Run sequence ``kind`` (``open``, ``close``, ``window``, ``window_shrink``) on
        context ``ctx`` with its configuration (``rx_base``, ``rx_log2``, ``tx_base``,
        ``tx_log2``, ``status_addr``, ``win_base``, ``win_size``; missing ones 0).

        Returns DONE's status: 0, ``-ENODEV`` (a read of all ones) or, when the context
        stayed busy for ``timeout`` cycles of polling and ``give_up`` is ``"keep"`` or
        ``"reset_anyway"``, ``-ETIMEDOUT``. Without ``give_up`` that raises TimeoutError.
        """
        g = steps(kind, ctx, timeout, give_up, config)
        value = None
        try:
            while True:
                what, *args = g.send(value)
                value = None
                if what == "write":
                    await self.reg_write(*args)
                elif what == "read":
                    value = await self.reg_read(*args)
                else:
                    await self.cycles(*args)
        except StopIteration as done:
            return done.value


def steps(kind: str, ctx: int, timeout: int, give_up: str | None, config: dict[str, int]):
    """The accesses of a sequence, one at a time, from the C step machine: yields
    ``("write", reg, value)``, ``("read", reg)`` (send the value read back) and
    ``("wait", cycles)``; returns DONE's status (see :meth:`CtxRegs.run`)."""
    ffi, lib, regs, kinds, giveup = _c()
    if kind not in kinds:
        raise ValueError(f"no sequence {kind!r}; have {sorted(kinds)}")
    if give_up is not None and give_up not in giveup:
        raise ValueError(f"give_up: {give_up!r}, not one of {sorted(giveup)}")
    seq = ffi.new("struct pn_ctxseq *")
    op = ffi.new("struct pn_ctxop *")
    lib.pn_ctxseq_init(seq, kinds[kind], ffi.new("struct pn_ctxseq_cfg *", {"ctx": ctx, **config}))
    value = waited = 0
    while True:
        k = lib.pn_ctxseq_next(seq, value, op)
        if k == lib.PN_CTXOP_WRITE:
            yield "write", regs[op.reg], op.value
        elif k == lib.PN_CTXOP_READ:
            value = (yield "read", regs[op.reg]) & 0xFFFFFFFF
        elif k == lib.PN_CTXOP_RETRY:
            if waited >= timeout:
                if give_up is None:
                    raise TimeoutError(f"{kind} of context {ctx}: still busy (state {op.value:#x}) "
                                       f"after {waited} cycles")
                lib.pn_ctxseq_give_up(seq, -errno.ETIMEDOUT, giveup[give_up])
            else:
                yield "wait", POLL_CYCLES
                waited += POLL_CYCLES
        elif k == lib.PN_CTXOP_SETTLE:
            yield "wait", SETTLE_CYCLES
        else:
            return op.status


class MigenPorts:
    """The same registers as :class:`tests.model.host.PortConfig` (the HostInterface's
    ``cfg_*`` ports), for Migen benches: :meth:`run` is a generator to ``yield from``."""

    def __init__(self, dut) -> None:
        self.dut = dut

    def reg_write(self, name: str, value: int):
        d = self.dut
        if name == "sel":
            yield d.cfg_ctx.eq(value)
        elif name in ("write", "reset"):
            strobe = getattr(d, "cfg_" + name)
            yield strobe.eq(1)
            yield
            yield strobe.eq(0)
        else:
            yield getattr(d, "cfg_" + name).eq(value)

    def reg_read(self, name: str):
        if name != "state":
            raise ValueError(f"only state is readable, not {name}")
        yield   # cfg_state follows cfg_ctx after two cycles, as for PortConfig
        yield
        return (yield self.dut.cfg_state)

    def run(self, kind: str, ctx: int, timeout: int = 200_000, give_up: str | None = None, **config: int):
        g = steps(kind, ctx, timeout, give_up, config)
        value = None
        try:
            while True:
                what, *args = g.send(value)
                value = None
                if what == "write":
                    yield from self.reg_write(*args)
                elif what == "read":
                    value = yield from self.reg_read(*args)
                else:
                    for _ in range(args[0]):
                        yield
        except StopIteration as done:
            return done.value


__all__ = ["CtxRegs", "MigenPorts", "steps", "registers", "fields", "POLL_CYCLES", "SETTLE_CYCLES"]
