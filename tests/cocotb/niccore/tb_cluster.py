"""cocotb benches of whole NicCores: a simulated cluster driven by one host model per node.

Environment (set by test_niccore_cocotb.py): CLUSTER_TOPO (e.g. ring:4), CLUSTER_CSR
(the generated CSR map), CLUSTER_MTU, CLUSTER_CTX.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from model.csr import CsrBus, Driver
from model.host import NicContext, reassemble
from model.pcie_cocotb import HostModel
from paranic.spec import protocol as P
from paranic.spec.sim import ber_to_threshold
from paranic.hw.standalone import read_csr_json
from paranic.spec.topo import Topology

TOPO = Topology.parse(os.environ.get("CLUSTER_TOPO", "ring:4"))
MTU = int(os.environ.get("CLUSTER_MTU", P.DEFAULT_MTU))
N_CTX = int(os.environ.get("CLUSTER_CTX", P.DEFAULT_CONTEXTS))
REGS = read_csr_json(os.environ["CLUSTER_CSR"])


class Cluster:
    """Hosts, drivers and contexts of every node."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.hosts = [HostModel(dut, prefix=f"n{i}_") for i in range(TOPO.nodes)]
        self.csr = [CsrBus(h, REGS) for h in self.hosts]
        self.drivers = [Driver(c, i, TOPO) for i, c in enumerate(self.csr)]
        self.ctx: dict[tuple[int, int], NicContext] = {}

    async def start(self, ber: float = 0.0) -> None:
        dut = self.dut
        dut.ber_threshold.value = ber_to_threshold(ber)
        cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
        dut.sys_rst.value = 1
        for h in self.hosts:
            h.start()
        for _ in range(5):
            await RisingEdge(dut.sys_clk)
        dut.sys_rst.value = 0
        await RisingEdge(dut.sys_clk)
        await cocotb.triggers.gather(*(d.bring_up() for d in self.drivers))
        # Links train by themselves; wait until every link port of every node is up.
        for c in self.csr:
            for port in range(TOPO.link_ports):
                await c.wait_link_up(port)


    async def context(self, node: int, ctx: int, **kw) -> NicContext:
        c = NicContext(self.hosts[node], self.drivers[node].cfg, ctx, mtu=MTU, **kw)
        await c.setup()
        self.ctx[(node, ctx)] = c
        return c

    def check_hosts(self) -> None:
        errs = [f"node {i}: {e}" for i, h in enumerate(self.hosts) for e in h.errors]
        assert not errs, "\n".join(errs[:20])




def _payload(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


@cocotb.test()
async def test_bring_up_and_routes(dut):
    """Routing tables load over CSRs and read back; every link trains."""
    cl = Cluster(dut)
    await cl.start()
    for i, d in enumerate(cl.drivers):
        for dst in range(TOPO.nodes):
            assert await d.read_route(dst) == TOPO.route(i, dst)
        assert await d.csr.read("node") == i


@cocotb.test()
async def test_all_pairs_pio_and_dma(dut):
    """Every node sends PIO and DMA messages to every other node: delivered intact, in
    order per pair, src stamped (a forged src in the PIO header is overridden)."""
    cl = Cluster(dut)
    await cl.start()
    rng = random.Random(7)
    ctxs = [await cl.context(n, 1, rx_log2=6, window_bytes=1 << 16) for n in range(TOPO.nodes)]
    sent: dict[tuple[int, int], list[bytes]] = {}
    msgs_per_pair = 3

    async def sender(src: int) -> None:
        c = ctxs[src]
        for k in range(msgs_per_pair):
            for dst in range(TOPO.nodes):
                if dst == src:
                    continue
                n = rng.choice([0, 1, 8, 63, MTU - 1, MTU])
                data = _payload(rng, n)
                sent.setdefault((src, dst), []).append(data)
                await c.pio_send(dst, 1, data, tag=(src << 16) | k,
                                 src_node=(src + 1) % TOPO.nodes, src_ctx=5)
            dst = (src + 1 + k) % TOPO.nodes
            if dst != src:
                n = rng.choice([MTU + 1, 3 * MTU + 5])
                data = _payload(rng, n)
                off = (k % 4) * (1 << 14)
                sent.setdefault((src, dst), []).append(data)
                await c.dma_send(dst, 1, data, offset=off, tag=(src << 16) | 0x8000 | k)
        await c.wait_status(timeout=200000, pio_done=c.pio_rung, tx_done=c.tx_tail)

    async def receiver(dst: int) -> dict[int, list[bytes]]:
        expect = sum(len(v) for (s, d), v in sent.items() if d == dst)
        c = ctxs[dst]
        got: dict[int, list[bytes]] = {}
        partial: dict[int, list] = {}
        msgs = 0
        trace: dict[int, list] = {}
        start = c.host.cycle
        while msgs < expect or any(partial.values()):
            for p in c.poll():
                h = p.header
                assert h["dst_node"] == dst and h["dst_ctx"] == 1, h
                assert h["src_ctx"] == 1, f"src_ctx not stamped: {h}"
                src = h["src_node"]
                assert h["type"] == P.PacketType.DATA
                trace.setdefault(src, []).append((h["flags"], h["length"], hex(h["tag"])))
                if h["flags"] & P.Flags.SOM:
                    assert not partial.get(src), \
                        f"SOM inside a message from {src}: last packets {trace[src][-6:]}"
                    partial[src] = []
                partial.setdefault(src, []).append(p)
                if h["flags"] & P.Flags.EOM:
                    got.setdefault(src, []).append(reassemble(partial[src]))
                    partial[src] = []
                    msgs += 1
            await c.consume()
            if c.host.cycle - start > 400000:
                raise TimeoutError(f"node {dst}: {msgs} of {expect} messages")
            await c.host.cycles(16)
            expect = sum(len(v) for (s, d), v in sent.items() if d == dst)
        return got

    senders = [cocotb.start_soon(sender(n)) for n in range(TOPO.nodes)]
    for t in senders:
        await t
    results = [await receiver(n) for n in range(TOPO.nodes)]
    for (src, dst), msgs in sent.items():
        assert results[dst].get(src, []) == msgs, f"{src}->{dst}: lost, corrupted or reordered"
    cl.check_hosts()


@cocotb.test()
async def test_barrier(dut):
    """Hardware barrier: nobody completes before the last node entered; completion
    appears in each node's status block; latency reported."""
    cl = Cluster(dut)
    await cl.start()
    ctxs = [await cl.context(n, 2) for n in range(TOPO.nodes)]
    rng = random.Random(3)
    lat = []
    for ep in range(1, 6):
        order = list(range(TOPO.nodes))
        rng.shuffle(order)
        last_enter = 0
        for n in order:
            await ctxs[n].host.cycles(rng.randrange(0, 200))
            assert all(c.status()["barrier_done"] == ep - 1 for c in ctxs), \
                "a node completed the barrier before everybody entered"
            await ctxs[n].host.write32(ctxs[n].page + P.CtxReg.BARRIER, 1)
            last_enter = ctxs[n].host.cycle
        done = []
        for c in ctxs:
            await c.wait_status(timeout=20000, barrier_done=ep)
        # the status block write time of the slowest node
        done = max(c.host.cycle for c in ctxs)
        lat.append(done - last_enter)
    dut._log.info(f"barrier {TOPO}: cycles from last enter to all done (polling granularity "
                  f"8): {lat}")
    cl.check_hosts()


@cocotb.test()
async def test_bad_input(dut):
    """Unknown node, unknown/disabled context, bad PIO length, descriptor outside the
    window: counted and dropped or refused; the other traffic goes on."""
    cl = Cluster(dut)
    await cl.start()
    a = await cl.context(0, 1)
    b = await cl.context(1, 1)
    d0, d1 = cl.drivers[0], cl.drivers[1]
    base0 = await d0.counters("router_err_unknown", "host_err_length", "host_err_desc")
    base1 = await d1.counters("host_err_unknown_ctx")
    # 1. unknown destination node (beyond the cluster): dropped by the router, counted.
    await a.pio_send(TOPO.nodes + 3, 1, b"lost")
    # 2. context 9 on node 1 is not enabled: dropped by the receiving host interface.
    await a.pio_send(1, 9, b"nobody home")
    # 3. length beyond the MTU in a PIO header: refused at the source.
    await a.pio_send(1, 1, b"x" * 16, length=MTU + 8)
    # 4. a descriptor pointing outside the context's DMA window: refused, nothing read.
    reads_before = len(a.host.read_requests)
    await a.dma_send(1, 1, b"", addr=a.window.base + a.window.size - 8, length=64)
    await a.wait_status(timeout=50000, tx_done=1, pio_done=a.pio_rung)
    stray = [r for r in a.host.read_requests[reads_before:]
             if not (a.tx_ring.base <= r.adr < a.tx_ring.base + a.tx_ring.size)]
    assert not stray, f"DMA reads outside the TX ring for a refused descriptor: {stray}"
    # 5. good traffic still flows.
    await a.pio_send(1, 1, b"still alive", tag=42)
    got = await b.recv(1, timeout=20000)
    assert got[0].payload == b"still alive" and got[0].header["tag"] == 42
    c0 = await d0.counters("router_err_unknown", "host_err_length", "host_err_desc")
    c1 = await d1.counters("host_err_unknown_ctx")
    assert c0["router_err_unknown"] == base0["router_err_unknown"] + 1
    assert c0["host_err_length"] == base0["host_err_length"] + 1
    assert c0["host_err_desc"] == base0["host_err_desc"] + 1
    assert c1["host_err_unknown_ctx"] == base1["host_err_unknown_ctx"] + 1
    assert a.status()["errors"] == 2
    assert b.poll() == [], "a refused or misdirected packet arrived"
    cl.check_hosts()


@cocotb.test()
async def test_bit_errors(dut):
    """With bit errors on every cable, every message arrives exactly once and intact;
    the link layers count CRC errors and replays."""
    cl = Cluster(dut)
    await cl.start(ber=0.0)
    ctxs = [await cl.context(n, 1, rx_log2=6) for n in range(TOPO.nodes)]
    dut.ber_threshold.value = ber_to_threshold(float(os.environ.get("CLUSTER_BER", "1e-4")))
    rng = random.Random(11)
    n_msgs = int(os.environ.get("CLUSTER_BER_MSGS", "40"))
    sent: dict[tuple[int, int], list[bytes]] = {}
    plan = []
    for k in range(n_msgs):
        for src in range(TOPO.nodes):
            dst = (src + 1 + k) % TOPO.nodes
            if dst != src:
                data = _payload(rng, rng.choice([8, 100, MTU]))
                sent.setdefault((src, dst), []).append(data)
                plan.append((src, dst, data))
    got: dict[tuple[int, int], list[bytes]] = {}

    async def receiver(dst: int) -> None:
        # Receive while the others send: a receiver that waited for the senders would
        # let its ring fill, and back-pressure (never loss) would stall them.
        expect = sum(len(v) for (s, d), v in sent.items() if d == dst)
        for p in await ctxs[dst].recv(expect, timeout=2_000_000):
            got.setdefault((p.header["src_node"], dst), []).append(p.payload)

    async def sender(src: int) -> None:
        for s, dst, data in plan:
            if s == src:
                await ctxs[src].pio_send(dst, 1, data, wait_window=True)

    rx = [cocotb.start_soon(receiver(n)) for n in range(TOPO.nodes)]
    tx = [cocotb.start_soon(sender(n)) for n in range(TOPO.nodes)]
    for t in tx + rx:
        await t
    assert got == sent
    dut.ber_threshold.value = 0
    assert int(dut.errors_injected.value) > 0
    crc = 0
    for c in cl.csr:
        for port in range(TOPO.link_ports):
            crc += await c.read(f"link{port}_crc_errors")
    dut._log.info(f"bits flipped {int(dut.errors_injected.value)}, CRC errors {crc}")
    assert crc > 0
    for ctx in ctxs:
        await ctx.host.cycles(10)
        assert ctx.poll() == [], "duplicate delivered"
    cl.check_hosts()
