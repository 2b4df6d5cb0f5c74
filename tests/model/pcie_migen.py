"""The host model (:class:`model.pcie.PcieHost`) in Migen's simulator.

:class:`MigenHost` binds the model's ports to the gateware's own signals: a Wishbone
interface, the LitePCIe request/completion endpoints, the MSI lines (any may be absent:
a bench of a DMA writer alone has only ``wr_source``). Put :meth:`MigenHost.generator`
in ``run_simulation``'s list after the test's own generators: each cycle it samples the
NIC's outputs with ``(yield sig)`` at the clock edge (the values the gateware's
registers see there), steps the DMA servers and the MSI monitor, and drives the
completions and ready signals with ``yield sig.eq(v)`` for the next cycle.

MMIO is stepped by the generator that asks for it (``yield from host.write32(...)``):
the test's own thread is the bus master, as with LiteX's Wishbone helpers, so an access
takes the same cycles as theirs and the test continues in the cycle of the ``ack``.
"""

from __future__ import annotations

from migen.sim import passive

from model.pcie import CPL, DMA_INPUTS, DMA_OUTPUTS, MMIO_INPUTS, RD, WR, MmioOp, PcieHost

_WB = ("adr", "dat_w", "dat_r", "sel", "cyc", "stb", "we", "ack", "err")


def _endpoint_ports(prefix: str, ep) -> dict:
    ports = {prefix + n: getattr(ep, n) for n in ("valid", "ready", "first", "last")}
    for name, _ in ep.description.payload_layout:
        ports[prefix + "payload_" + name] = getattr(ep.payload, name)
    return ports


class MigenHost(PcieHost):
    """:class:`~model.pcie.PcieHost` on Migen signals (``**kw``: its parameters).

    ``bus``: a Wishbone interface (the NIC's MMIO slave); ``rd_source``/``rd_sink``:
    the read request and completion endpoints; ``wr_source``: the write request
    endpoint; ``irq``: the MSI lines. :meth:`for_nic` takes them from a module with
    ``bus``, ``dma_rd``, ``dma_wr`` and ``irq`` (``HostInterface``, ``NicCore``).
    """

    def __init__(self, bus=None, rd_source=None, rd_sink=None, wr_source=None, irq=None,
                 **kw) -> None:
        super().__init__(**kw)
        ports = {}
        if bus is not None:
            ports.update({"bus_" + n: getattr(bus, n) for n in _WB})
        for prefix, ep in ((RD, rd_source), (CPL, rd_sink), (WR, wr_source)):
            if ep is not None:
                ports.update(_endpoint_ports(prefix, ep))
        if irq is not None:
            ports["irq"] = irq
        self.ports = ports
        self._dma_in = [(n, ports[n]) for n in DMA_INPUTS if n in ports]
        self._absent = {n: 0 for n in DMA_INPUTS if n not in ports}
        self._mmio_in = [(n, ports[n]) for n in MMIO_INPUTS if n in ports]

    @classmethod
    def for_nic(cls, nic, **kw) -> "MigenHost":
        return cls(nic.bus, nic.dma_rd.source, nic.dma_rd.sink, nic.dma_wr.source, nic.irq, **kw)

    def _drive(self, values: dict[str, int]):
        ports = self.ports
        for n, v in values.items():
            s = ports.get(n)
            if s is not None:
                yield s.eq(v)

    @passive
    def generator(self):
        """The DMA servers and the MSI monitor, one step per cycle."""
        yield from self._drive({n: v for n, v in self.drive.items() if n in DMA_OUTPUTS})
        while True:
            yield
            inp = dict(self._absent)
            for n, s in self._dma_in:
                inp[n] = yield s
            yield from self._drive(self.step(inp, mmio=False))

    # -- MMIO (generators for the test's thread) -----------------------------------------
    def _access(self, op: MmioOp):
        """Step the MMIO master until ``op`` is acknowledged."""
        absent = {n: 0 for n in MMIO_INPUTS}
        while True:
            inp = dict(absent)
            for n, s in self._mmio_in:
                inp[n] = yield s
            self.mmio.step(inp)
            yield from self._drive(self.mmio.drive.take())
            if op.done:
                break
            yield
        if op.error:
            raise ValueError(f"MMIO {'write' if op.write else 'read'} {op.addr:#x}: bus error")
        return op

    def write32(self, addr: int, value: int, sel: int = 0xF):
        yield from self._access(self.mmio.submit(addr, value, True, sel))

    def write64(self, addr: int, value: int):
        """A 64-bit store: two 32-bit writes, low word (lower address) first."""
        yield from self.write32(addr, value & 0xFFFFFFFF)
        yield from self.write32(addr + 4, (value >> 32) & 0xFFFFFFFF)

    def read32(self, addr: int):
        op = yield from self._access(self.mmio.submit(addr))
        return op.result
