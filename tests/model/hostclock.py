"""Waiting on the NIC's clock, shared by the cocotb host models (the Migen-port host of
``pcie_cocotb``, the cocotbext-pcie host of ``pcie_rc``, the 7-series root port's host of
``pcie_s7``)."""

from __future__ import annotations

from typing import Callable

from cocotb.triggers import RisingEdge
from cocotb.utils import get_sim_time


class HostClock:
    """``cycles``/``wait_for`` on ``self.clk``; the class using it provides ``cycle``
    (an attribute counting cycles, or :class:`SimTimeClock`'s property)."""

    async def cycles(self, n: int) -> None:
        for _ in range(n):
            await RisingEdge(self.clk)

    async def wait_for(self, pred: Callable[[], bool], timeout: int = 20000, every: int = 8,
                       what: str = "condition") -> int:
        """Poll ``pred`` (host-side, free) every ``every`` cycles; returns the cycle."""
        start = self.cycle
        while not pred():
            if self.cycle - start > timeout:
                raise TimeoutError(f"{what} not reached after {timeout} cycles")
            await self.cycles(every)
        return self.cycle


class SimTimeClock(HostClock):
    """``cycle`` from the simulation time and the clock's period ``self.clk_ns``."""

    clk_ns = 8.0

    @property
    def cycle(self) -> int:
        return int(get_sim_time("ns") // self.clk_ns)
