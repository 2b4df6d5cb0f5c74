"""cocotb scoreboard test of a router-only network through its local ports.

Toplevel: ``paranic.sim.testnet.RouterNetwork(topo, with_traffic=False)`` (ports
``n<i>_sink``/``n<i>_source``). Every node injects random packets (random
destination including itself, random length, random pauses) and its ejection port
is read with random back-pressure. A Python scoreboard keeps, per
(source, destination) pair, the queue of packets in flight: every arriving packet
must equal the head of its queue, so loss, duplication, corruption and
reordering are all detected; at the end every queue must be empty.

Environment: ``TOPO`` (``ring:4``, ``torus:2x2`` ...), ``PACKETS`` (per node),
``MAX_LEN`` (bytes), ``SEED``, ``READY_P`` (probability a sink is ready).
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge

from paranic.bench.router_tb import reset_until_ready
from paranic.spec import protocol as P
from paranic.spec.topo import Topology


class _Node:
    def __init__(self, dut, i: int, packets: list[list[int]]):
        self.i = i
        self.packets = packets
        self.cur = None
        self.k = 0
        self.gap = 0
        self.accepted = False
        g = lambda n: getattr(dut, f"n{i}_{n}")  # noqa: E731
        self.s_valid, self.s_ready, self.s_first = g("sink_valid"), g("sink_ready"), g("sink_first")
        self.s_last, self.s_data, self.s_err = g("sink_last"), g("sink_payload_data"), g("sink_payload_error")
        self.r_valid, self.r_ready, self.r_last = g("source_valid"), g("source_ready"), g("source_last")
        self.r_first, self.r_data = g("source_first"), g("source_payload_data")
        self.rx: list[int] = []

    def drive(self, rng: random.Random, started: list) -> None:
        if self.cur is not None and self.accepted:
            self.k += 1
            if self.k == len(self.cur):
                self.cur = None
                if rng.random() < 0.2:
                    self.gap = rng.randrange(1, 30)
        if self.cur is None:
            if self.gap:
                self.gap -= 1
            elif self.packets:
                self.cur, self.k = self.packets.pop(0), 0
                started.append(self.cur)
        if self.cur is not None:
            self.s_valid.value = 1
            self.s_data.value = self.cur[self.k]
            self.s_first.value = int(self.k == 0)
            self.s_last.value = int(self.k == len(self.cur) - 1)
            self.s_err.value = 0
            self.accepted = bool(int(self.s_ready.value))  # independent of valid
        else:
            self.s_valid.value = 0
            self.accepted = False


@cocotb.test()
async def test_scoreboard(dut):
    topo = Topology.parse(os.environ["TOPO"])
    n = topo.nodes
    npk = int(os.environ.get("PACKETS", "300"))
    max_len = int(os.environ.get("MAX_LEN", "256"))
    ready_p = float(os.environ.get("READY_P", "0.8"))
    rng = random.Random(int(os.environ.get("SEED", "1")))
    cocotb.start_soon(Clock(dut.sys_clk, 8, unit="ns").start())
    dut.bubble_en.value = 1
    for i in range(n):
        getattr(dut, f"n{i}_sink_valid").value = 0
        getattr(dut, f"n{i}_source_ready").value = 0
    await reset_until_ready(dut)

    queues: dict[tuple[int, int], list[list[int]]] = {(s, d): [] for s in range(n) for d in range(n)}
    nodes = []
    seq = [[0] * n for _ in range(n)]
    for s in range(n):
        pk = []
        for _ in range(npk):
            d = rng.randrange(n)
            length = rng.choice([0, 8, rng.randrange(0, max_len + 1), max_len])
            w0, _ = P.header_words(dst_node=d, src_node=s, length=length)
            tag = (s << 48) | (d << 32) | seq[s][d]
            seq[s][d] += 1
            pk.append([w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))])
        nodes.append(_Node(dut, s, pk))
    total = n * npk
    received = 0
    idle = 0
    errors: list[str] = []
    while received < total and idle < 50_000:
        await FallingEdge(dut.sys_clk)
        idle += 1
        started: list = []
        for nd in nodes:
            nd.drive(rng, started)
        for w in started:  # the packet is in flight from its first word on
            queues[((w[1] >> 48) & 0xFFFF, (w[1] >> 32) & 0xFFFF)].append(w)
        for nd in nodes:
            r = int(rng.random() < ready_p)
            nd.r_ready.value = r
            if r and int(nd.r_valid.value):
                if not nd.rx:
                    assert int(nd.r_first.value), f"node {nd.i}: first flag missing"
                nd.rx.append(int(nd.r_data.value))
                if int(nd.r_last.value):
                    pkt, nd.rx = nd.rx, []
                    received += 1
                    idle = 0
                    if len(pkt) < P.HEADER_WORDS:
                        errors.append(f"node {nd.i}: runt packet {pkt}")
                        continue
                    h = P.unpack_header(pkt[0].to_bytes(8, "little") + pkt[1].to_bytes(8, "little"))
                    src, dst = (pkt[1] >> 48) & 0xFFFF, (pkt[1] >> 32) & 0xFFFF
                    if h["dst_node"] != nd.i or dst != nd.i or h["src_node"] != src:
                        errors.append(f"node {nd.i} got a packet for {h['dst_node']}")
                        continue
                    q = queues[(src, dst)]
                    if not q:
                        errors.append(f"{src}->{dst}: unexpected packet (duplicate?) tag {pkt[1]:#x}")
                    elif q[0] != pkt:
                        exp = q[0]
                        kind = "reordered/lost" if exp[1] != pkt[1] else "corrupted"
                        errors.append(f"{src}->{dst}: {kind}: expected tag {exp[1]:#x} got {pkt[1]:#x}")
                        if pkt in q:
                            q.remove(pkt)
                    else:
                        q.pop(0)
        if len(errors) > 10:
            break
    left = {k: len(v) for k, v in queues.items() if v}
    dut._log.info("%d/%d packets received, %d errors, left in flight %s", received, total,
                  len(errors), left)
    assert not errors, errors[:10]
    assert received == total and not left
    for _ in range(200):
        await FallingEdge(dut.sys_clk)
    assert all(not int(nd.r_valid.value) for nd in nodes), "extra packets arrived"
    assert int(dut.router_errors.value) == 0
