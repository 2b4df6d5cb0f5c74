"""The host model (:class:`model.pcie.PcieHost`) driving a Verilog top under cocotb.

:class:`HostModel` binds the model's ports to ``<prefix><port>`` signals of the DUT
(``prefix="n0_"`` drives node 0 of a multi-node top) and steps it in one coroutine,
once per rising edge of the clock: the NIC's outputs are read when the model asks for
them (few per cycle), and only changed inputs are written. MMIO accesses are
coroutines that queue on the model's Wishbone master.
"""

from __future__ import annotations

from typing import Callable

import cocotb
from cocotb.triggers import Event, RisingEdge

from model.hostclock import HostClock
from model.hostmem import HostMemory
from model.pcie import DMA_INPUTS, DMA_OUTPUTS, MMIO_INPUTS, MMIO_OUTPUTS, PcieHost


class _Tied0:
    """A port the top does not have: reads as 0."""
    value = 0


class _Sampled:
    """The DUT's outputs at this edge, read on demand."""

    __slots__ = ("_h",)

    def __init__(self, handles: dict) -> None:
        self._h = handles

    def __getitem__(self, name: str) -> int:
        return int(self._h[name].value)


class HostModel(PcieHost, HostClock):
    """:class:`~model.pcie.PcieHost` on ``dut``'s ``<prefix>`` ports (see
    :mod:`model.pcie` for the names and the parameters).

    ``clk``: default ``dut.sys_clk``. ``rst``: the reset input (default ``dut.sys_rst``
    if there is one). ``bus_err`` is optional. Call :meth:`start` once the clock runs or
    before; then ``write32``/``write64``/``read32``/``mmio_idle``, ``cycles`` and
    ``wait_for`` are the bench's view of the host.
    """

    def __init__(self, dut, prefix: str = "", clk=None, mem: HostMemory | None = None,
                 read_latency: int = 60, rcb: int = 64, max_request_bytes: int = 512,
                 max_payload_bytes: int = 256,
                 rd_ready: Callable[[int], bool] | None = None, rst=None) -> None:
        super().__init__(mem, read_latency=read_latency, rcb=rcb,
                         max_request_bytes=max_request_bytes,
                         max_payload_bytes=max_payload_bytes, rd_ready=rd_ready)
        self.dut = dut
        self.prefix = prefix
        self.clk = clk if clk is not None else dut.sys_clk
        optional = {"bus_err": getattr(dut, prefix + "bus_err", None),
                    "rst": rst if rst is not None else getattr(dut, "sys_rst", None)}
        inputs = {}
        for n in MMIO_INPUTS + DMA_INPUTS:
            h = optional[n] if n in optional else getattr(dut, prefix + n)
            inputs[n] = h if h is not None else _Tied0()
        self._sampled = _Sampled(inputs)
        self._outputs = {n: getattr(dut, prefix + n) for n in MMIO_OUTPUTS + DMA_OUTPUTS}
        self._task = None

    def start(self) -> None:
        self._apply({**self.mmio.drive, **self.drive})
        self._task = cocotb.start_soon(self._run())

    def _apply(self, values: dict[str, int]) -> None:
        out = self._outputs
        for n, v in values.items():
            out[n].value = v

    async def _run(self) -> None:
        clk = self.clk
        while True:
            await RisingEdge(clk)
            self._apply(self.step(self._sampled))

    # -- MMIO ----------------------------------------------------------------------------
    async def _done(self, op) -> None:
        ev = Event()
        op.on_done = ev.set
        await ev.wait()

    async def write32(self, addr: int, value: int, wait: bool = True, sel: int = 0xF) -> None:
        op = self.mmio.submit(addr, value, True, sel)
        if wait:
            await self._done(op)

    async def write64(self, addr: int, value: int, wait: bool = True) -> None:
        """A 64-bit store: two 32-bit writes, low word (lower address) first."""
        await self.write32(addr, value & 0xFFFFFFFF, wait=False)
        await self.write32(addr + 4, (value >> 32) & 0xFFFFFFFF, wait=wait)

    async def read32(self, addr: int) -> int:
        op = self.mmio.submit(addr)
        await self._done(op)
        return op.result

    async def mmio_idle(self) -> None:
        """Wait until every queued MMIO access has been acknowledged."""
        while not self.mmio.idle:
            await RisingEdge(self.clk)

