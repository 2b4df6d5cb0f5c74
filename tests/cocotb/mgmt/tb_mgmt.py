"""cocotb benches of the management port on a Verilated NicCore cluster, driven through
the CSRs as the firmware does (on the SoC the CPU reaches the same CSRs).

Environment (set by test_mgmt_cocotb.py): CLUSTER_TOPO, CLUSTER_CSR, CLUSTER_MTU, CLUSTER_CTX.
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge

from model.csr import CsrBus, Driver
from model.host import NicContext
from model.pcie_cocotb import HostModel
from paranic.hw.standalone import read_csr_json
from paranic.spec import fw as FW
from paranic.spec import protocol as P
from paranic.spec.sim import sim_dna
from paranic.spec.topo import Topology

TOPO = Topology.parse(os.environ.get("CLUSTER_TOPO", "ring:4"))
MTU = int(os.environ.get("CLUSTER_MTU", P.DEFAULT_MTU))
N_CTX = int(os.environ.get("CLUSTER_CTX", P.DEFAULT_CONTEXTS))
REGS = read_csr_json(os.environ["CLUSTER_CSR"])
CONTROL = P.PacketType.CONTROL
DIRECT = P.HEADER_FIELD["direct"]


class Mgmt:
    """The firmware's side of one node's management port, over its CSRs."""

    def __init__(self, csr: CsrBus) -> None:
        self.csr = csr

    async def send(self, words: list[int]) -> None:
        free = 0
        for w in words:
            while free == 0:
                free = await self.csr.read("mgmt_tx_free")
                if free == 0:
                    await self.csr.host.cycles(32)
            await self.csr.write("mgmt_tx_data", w)
            await self.csr.write("mgmt_tx_push", 1)
            free -= 1
        await self.csr.write("mgmt_tx_send", 1)

    async def waiting(self) -> int:
        return await self.csr.read("mgmt_rx_packets")

    async def recv(self, timeout: int = 200000) -> list[int]:
        for _ in range(timeout // 64):
            if await self.waiting():
                break
            await self.csr.host.cycles(64)
        else:
            raise TimeoutError("no CONTROL packet arrived")
        n = await self.csr.read("mgmt_rx_len")
        out = []
        for _ in range(n):
            out.append(await self.csr.read("mgmt_rx_data"))
            await self.csr.write("mgmt_rx_pop", 1)
        return out


def ctl(direct: int, dst: int, src: int, tag: int, length: int, rng: random.Random) -> list[int]:
    w0, _ = P.header_words(dst_node=dst, src_node=src, type=CONTROL, length=length, direct=direct)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def direct_of(w0: int) -> int:
    return (w0 >> DIRECT.offset) & ((1 << DIRECT.width) - 1)


def without_direct(w0: int) -> int:
    return w0 & ~(((1 << DIRECT.width) - 1) << DIRECT.offset)


class Cluster:
    def __init__(self, dut) -> None:
        self.dut = dut
        self.hosts = [HostModel(dut, prefix=f"n{i}_") for i in range(TOPO.nodes)]
        self.csr = [CsrBus(h, REGS) for h in self.hosts]
        self.mgmt = [Mgmt(c) for c in self.csr]
        self.drivers = [Driver(c, i, TOPO) for i, c in enumerate(self.csr)]

    async def start(self, routes: bool) -> None:
        dut = self.dut
        cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
        dut.sys_rst.value = 1
        for h in self.hosts:
            h.start()
        for _ in range(5):
            await RisingEdge(dut.sys_clk)
        dut.sys_rst.value = 0
        await RisingEdge(dut.sys_clk)
        if routes:
            await cocotb.triggers.gather(*(d.bring_up() for d in self.drivers))
        for c in self.csr:
            for port in range(TOPO.link_ports):
                await c.wait_link_up(port)


@cocotb.test()
async def test_link_local_every_port(dut):
    """No node ids, no routes (every table entry DROP): each node sends a link-local
    CONTROL packet on every port; the node at the other end of that cable gets it on its
    management port with ``direct`` = its own arrival port. Identity and fw_* read back."""
    cl = Cluster(dut)
    await cl.start(routes=False)
    rng = random.Random(3)
    expect: dict[int, dict[int, tuple[int, list[int]]]] = {m: {} for m in range(TOPO.nodes)}
    far = {(n, pn): (m, pm) for n, pn, m, pm in TOPO.links()}
    for n in range(TOPO.nodes):
        for p in range(1, TOPO.link_ports + 1):
            tag = (n << 8) | p
            pk = ctl(p, dst=0x7FF, src=0x100 + n, tag=tag, length=rng.choice([0, 8, 24, MTU]), rng=rng)
            m, pm = far[(n, p)]
            expect[m][tag] = (pm, pk)
            await cl.mgmt[n].send(pk)
    for m in range(TOPO.nodes):
        got = {}
        for _ in range(TOPO.link_ports):
            w = await cl.mgmt[m].recv()
            got[w[1]] = w
        assert sorted(got) == sorted(expect[m]), (m, sorted(got), sorted(expect[m]))
        for tag, (pm, pk) in expect[m].items():
            w = got[tag]
            assert direct_of(w[0]) == pm, (m, tag, direct_of(w[0]), pm)
            assert without_direct(w[0]) == without_direct(pk[0]) and w[1:] == pk[1:]
        assert await cl.mgmt[m].waiting() == 0
        c = cl.csr[m]
        assert await c.read("mgmt_rx_packets_total") == TOPO.link_ports
        assert await c.read("mgmt_tx_packets") == TOPO.link_ports
        assert await c.read("mgmt_tx_dropped") == 0
        assert await c.read("id_dna") == sim_dna(m)
        assert await c.read("id_cfg_node") == 0
        for name in FW.FW_STATUS_NAMES:
            assert await c.read(f"fw_{name}") == 0, name
    # fw_* are storage: the firmware writes them, the host reads them back.
    await cl.csr[0].write("fw_state", FW.FwState.ROUTED)
    await cl.csr[0].write("fw_topo", TOPO.x | TOPO.y << 16)
    assert await cl.csr[0].read("fw_topo") == TOPO.x | TOPO.y << 16
    assert await cl.csr[0].read("fw_state") == FW.FwState.ROUTED


@cocotb.test()
async def test_routed_control_and_slow_cpu(dut):
    """Routed CONTROL packets (direct = 0) from every node reach the management port of
    their dst_node. Then node 0 floods node 1 while node 1's CPU reads nothing: the RX
    FIFO fills and back-pressures; read slowly later, every packet arrives, in order."""
    cl = Cluster(dut)
    await cl.start(routes=True)
    rng = random.Random(9)
    sent = {}
    for n in range(TOPO.nodes):
        for d in range(TOPO.nodes):
            if d != n:
                pk = ctl(0, dst=d, src=n, tag=(n << 8) | d, length=rng.choice([0, 16, MTU]), rng=rng)
                sent[(n, d)] = pk
                await cl.mgmt[n].send(pk)
    for d in range(TOPO.nodes):
        got = [await cl.mgmt[d].recv() for _ in range(TOPO.nodes - 1)]
        assert sorted(w[1] for w in got) == sorted((n << 8) | d for n in range(TOPO.nodes) if n != d)
        for w in got:
            n = w[1] >> 8
            assert w == sent[(n, d)]

    # Slow CPU: more packets than node 1's RX FIFO holds.
    dst = 1
    pkts = [ctl(0, dst=dst, src=0, tag=0x5000 + i, length=rng.choice([8, 64, MTU]), rng=rng)
            for i in range(12)]
    for pk in pkts:
        await cl.mgmt[0].send(pk)
    await cl.hosts[0].cycles(3000)
    held = await cl.mgmt[dst].waiting()
    assert 0 < held < len(pkts), held
    got = []
    for _ in pkts:
        got.append(await cl.mgmt[dst].recv())
        await cl.hosts[dst].cycles(200)
    assert got == pkts
    for c in cl.csr:
        assert await c.read("router_err_aborted") == 0
        assert await c.read("router_err_unknown") == 0


@cocotb.test()
async def test_host_cannot_send_control(dut):
    """A host context's CONTROL packet (PIO) is refused and counted; none reaches a
    management port, and a DATA packet carrying ``direct`` is routed as DATA."""
    cl = Cluster(dut)
    await cl.start(routes=True)
    c0 = NicContext(cl.hosts[0], cl.drivers[0].cfg, 1, mtu=MTU, rx_log2=4, window_bytes=1 << 14)
    c1 = NicContext(cl.hosts[1], cl.drivers[1].cfg, 1, mtu=MTU, rx_log2=4, window_bytes=1 << 14)
    await c0.setup()
    await c1.setup()
    await c0.pio_send(1, 1, b"\1" * 8, type=CONTROL)
    await c0.pio_send(1, 1, b"\2" * 8, tag=7, direct=P.Port.XM)
    (p,) = await c1.recv(1)
    assert p.header["tag"] == 7 and p.header["direct"] == 0
    s = await c0.wait_status(pio_done=2)
    assert s["errors"] == 1
    for c in cl.csr:
        assert await c.read("mgmt_rx_packets_total") == 0
        assert await c.read("mgmt_rx_packets") == 0


@cocotb.test()
async def test_tx_target_link_input(dut):
    """``mgmt_tx_target`` through the CSRs (docs/mgmt.md, "Replayed packets"): node 0
    targets its XP input while that link is UP: the packet waits (``tx_idle`` 0, nothing
    arrives). Once software takes the link down it enters the router through XP's input
    buffer and is routed by the table: the U-turn out XM to the neighbour there, and a
    packet for node 0 itself to its own management port. Target 0 as before afterwards."""
    from paranic.spec.link import LinkState

    cl = Cluster(dut)
    await cl.start(routes=True)
    far = {(n, pn): (m, pm) for n, pn, m, pm in TOPO.links()}
    west = far[(0, P.Port.XM)][0]
    c0, m0 = cl.csr[0], cl.mgmt[0]
    rng = random.Random(11)
    a = ctl(0, dst=west, src=0, tag=0xA, length=MTU, rng=rng)
    b = ctl(0, dst=0, src=0, tag=0xB, length=16, rng=rng)
    c = ctl(0, dst=west, src=0, tag=0xC, length=8, rng=rng)
    assert await c0.read("mgmt_tx_idle") == 1
    await c0.write("mgmt_tx_target", P.Port.XP)
    assert await c0.read("mgmt_tx_target") == P.Port.XP
    await m0.send(a)
    await cl.hosts[0].cycles(2000)
    assert await c0.read("mgmt_tx_idle") == 0
    assert await c0.read("mgmt_tx_busy") == 1
    assert await cl.mgmt[west].waiting() == 0
    await c0.write("link0_take_down", 1)
    assert await c0.read("link0_link_state") == LinkState.DOWN
    for _ in range(100):
        if await c0.read("mgmt_tx_idle"):
            break
        await cl.hosts[0].cycles(32)
    else:
        raise TimeoutError("mgmt_tx_idle stayed 0")
    assert await cl.mgmt[west].recv() == a
    await m0.send(b)
    assert await m0.recv() == b
    await c0.write("mgmt_tx_target", 0)
    await m0.send(c)
    assert await cl.mgmt[west].recv() == c
    assert await c0.read("mgmt_tx_dropped") == 0
    assert await c0.read("router_err_aborted") == 0
    assert await c0.read("link0_rx_overflows") == 0
