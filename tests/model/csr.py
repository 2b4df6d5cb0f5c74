"""The privileged side of a standalone NicCore, as a driver sees it: CSRs over MMIO.

:class:`CsrBus` reads and writes CSRs by name through a :class:`HostModel`'s MMIO,
using the register map generated with the Verilog (``<top>.csr.json``, from
``paranic.hw.standalone``). :class:`CsrConfig` is the per-context registers as those
CSRs (the context sequences run on them, like on ``tests.model.host.PortConfig``'s
ports), and :class:`Driver` does a node's bring-up: node id, routing table, barrier tree.
"""

from __future__ import annotations

from paranic.spec import protocol as P
from paranic.hw.standalone import CsrReg
from paranic.spec.topo import Topology

from model.ctxseq import CtxRegs


class CsrBus:
    def __init__(self, host, regs: dict[str, CsrReg]) -> None:
        self.host = host
        self.regs = regs

    async def wait_link_up(self, port: int, timeout: int = 20000) -> None:
        """Poll link ``port``'s state until UP (every 64 cycles, at most ``timeout``)."""
        from paranic.spec.link import LinkState

        for _ in range(timeout // 64):
            if await self.read(f"link{port}_link_state") == LinkState.UP:
                return
            await self.host.cycles(64)
        raise TimeoutError(f"link {port} did not come up")

    def reg(self, name: str) -> CsrReg:
        try:
            return self.regs[name]
        except KeyError:
            raise KeyError(f"no CSR {name!r}; have {sorted(self.regs)}") from None

    async def write(self, name: str, value: int) -> None:
        """Write a CSR; wide CSRs are 32-bit words, most significant first (LiteX 'big'
        ordering), and LiteX commits the storage on the last (least significant) word."""
        r = self.reg(name)
        n = r.words
        for i in range(n):
            shift = 32 * (n - 1 - i)
            await self.host.write32(r.addr + 4 * i, (value >> shift) & 0xFFFFFFFF)

    async def read(self, name: str) -> int:
        r = self.reg(name)
        v = 0
        for i in range(r.words):
            v = (v << 32) | await self.host.read32(r.addr + 4 * i)
        return v & ((1 << r.size) - 1)


class CsrConfig(CtxRegs):
    """The per-context registers as the host interface's CSRs ``host_ctx_<name>``; the
    context sequences run on them (:class:`tests.model.ctxseq.CtxRegs`)."""

    def __init__(self, csr: CsrBus) -> None:
        self.csr = csr

    async def reg_write(self, name: str, value: int) -> None:
        await self.csr.write(f"host_ctx_{name}", value)

    async def reg_read(self, name: str) -> int:
        return await self.csr.read(f"host_ctx_{name}")

    async def cycles(self, n: int) -> None:
        await self.csr.host.cycles(n)


class Driver:
    """Bring-up of one node as the driver/firmware does it."""

    def __init__(self, csr: CsrBus, node: int, topo: Topology) -> None:
        self.csr = csr
        self.node = node
        self.topo = topo
        self.cfg = CsrConfig(csr)

    async def bring_up(self, table_nodes: int | None = None, radix_log2: int = 1) -> None:
        await self.csr.write("node", self.node)
        depth = table_nodes or self.topo.nodes
        for dst, port in enumerate(self.topo.table(self.node, depth)):
            await self.load_route(dst, port)
        await self.csr.write("barrier_enable", 0)
        await self.csr.write("barrier_nodes", self.topo.nodes)
        await self.csr.write("barrier_radix_log2", radix_log2)
        await self.csr.write("barrier_enable", 1)

    async def load_route(self, dst: int, port: int) -> None:
        await self.csr.write("router_route_adr", dst)
        await self.csr.write("router_route_port", int(port))
        await self.csr.write("router_route_write", 1)

    async def read_route(self, dst: int) -> int:
        await self.csr.write("router_route_adr", dst)
        return await self.csr.read("router_route_read")

    async def counters(self, *names: str) -> dict[str, int]:
        return {n: await self.csr.read(n) for n in names}


__all__ = ["CsrBus", "CsrConfig", "Driver", "P"]
