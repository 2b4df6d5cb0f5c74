"""cocotb bench of the generated Verilog of one BarrierUnit (n_ctx=4).

The test plays the unit's parent, children (tree mode) or peers (all-to-all mode) and
host; packets are built with paranic.spec.protocol. It checks the Verilog against the
behaviour the Migen tests establish: exact packets, fan-out 8 child decoding, the
all-to-all send order and next-episode arrives, bad input, random garbage.
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from paranic.spec import protocol as P
from paranic.hw.barrier import MODE_A2A, MODE_TREE, a2a_order

BAR = int(P.PacketType.BARRIER)
REL = int(P.Flags.BAR_RELEASE)
COUNTERS = ("episodes", "tx_packets", "rx_packets", "err_format", "err_protocol",
            "enter_merged", "enter_dropped")


def pkt(dst, src, release=False, tag=0, payload=(), **kw):
    f = dict(dst_node=dst, src_node=src, type=BAR, flags=REL if release else 0, tag=tag)
    f.update(kw)
    return list(P.header_words(**f)) + list(payload)


class Env:
    def __init__(self, dut):
        self.dut = dut
        self.tx = []       # word lists of packets that left source
        self.done = []     # done_ctx values
        self.cycle = 0

    async def start(self, node_id, nodes, radix_log2, mode=MODE_TREE):
        d = self.dut
        cocotb.start_soon(Clock(d.sys_clk, 8, unit="ns").start())
        for s, v in (("node_id", node_id), ("nodes", nodes), ("radix_log2", radix_log2),
                     ("mode", mode), ("enable", 1), ("participants", 0), ("enter", 0), ("enter_ctx", 0),
                     ("sink_valid", 0), ("sink_first", 0), ("sink_last", 0),
                     ("sink_payload_data", 0), ("sink_payload_error", 0),
                     ("source_ready", 1), ("sys_rst", 1)):
            getattr(d, s).value = v
        await RisingEdge(d.sys_clk)
        await RisingEdge(d.sys_clk)
        d.sys_rst.value = 0
        cocotb.start_soon(self._monitor())
        await self.wait(3)

    async def _monitor(self):
        d = self.dut
        words = []
        while True:
            await RisingEdge(d.sys_clk)
            await ReadOnly()
            self.cycle += 1
            assert int(d.sink_ready.value) == 1
            if int(d.source_valid.value) and int(d.source_ready.value):
                words.append(int(d.source_payload_data.value))
                assert int(d.source_first.value) == (len(words) == 1)
                if int(d.source_last.value):
                    self.tx.append(words)
                    words = []
            if int(d.done.value):
                self.done.append(int(d.done_ctx.value))

    async def wait(self, n=8):
        for _ in range(n):
            await RisingEdge(self.dut.sys_clk)

    async def send(self, words, error=False):
        d = self.dut
        for i, w in enumerate(words):
            d.sink_valid.value = 1
            d.sink_payload_data.value = w
            d.sink_first.value = int(i == 0)
            d.sink_last.value = int(i == len(words) - 1)
            d.sink_payload_error.value = int(error and i == len(words) - 1)
            await RisingEdge(d.sys_clk)
        d.sink_valid.value = 0
        d.sink_last.value = 0
        d.sink_payload_error.value = 0
        await self.wait(2)

    async def enter(self, ctx):
        d = self.dut
        d.enter.value = 1
        d.enter_ctx.value = ctx
        await RisingEdge(d.sys_clk)
        d.enter.value = 0
        await self.wait(2)

    def counters(self):
        return {c: int(getattr(self.dut, c).value) for c in COUNTERS}


@cocotb.test()
async def tree_exact_flow(dut):
    """Node 1 of 8, fan-out 2: arrive after both children and the host, releases after
    the parent's release, one done; two episodes."""
    env = Env(dut)
    await env.start(1, 8, 1)
    for ep in range(2):
        base = len(env.tx)
        await env.send(pkt(1, 3, tag=ep))
        await env.enter(2)
        await env.wait()
        assert len(env.tx) == base
        await env.send(pkt(1, 4, tag=ep))
        await env.wait()
        assert env.tx[base:] == [pkt(0, 1, tag=ep)]
        await env.send(pkt(1, 0, release=True, tag=ep))
        await env.wait()
        assert env.tx[base + 1:] == [pkt(3, 1, True, ep), pkt(4, 1, True, ep)]
        assert env.done == [2] * (ep + 1)
    assert int(dut.episode.value) == 2
    assert env.counters() == dict(episodes=2, tx_packets=6, rx_packets=6, err_format=0,
                                  err_protocol=0, enter_merged=0, enter_dropped=0)


@cocotb.test()
async def tree_fanout8(dut):
    """Root of 9 nodes with fan-out 8: children 8..1 arrive in reverse order, releases
    leave in child order 1..8."""
    env = Env(dut)
    await env.start(0, 9, 3)
    for c in range(8, 0, -1):
        await env.send(pkt(0, c))
    await env.send(pkt(0, 9))  # not a node: protocol error
    await env.wait()
    assert env.done == [] and env.tx == []
    await env.enter(3)
    await env.wait(30)
    assert env.tx == [pkt(c, 0, True, 0) for c in range(1, 9)]
    assert env.done == [3]
    c = env.counters()
    assert (c["episodes"], c["err_protocol"], c["tx_packets"]) == (1, 1, 8)


@cocotb.test()
async def tree_bad_input(dut):
    """Malformed and unexpected packets are counted and dropped."""
    env = Env(dut)
    await env.start(1, 8, 1)
    fmt = [pkt(1, 3, length=8, payload=[7]), pkt(1, 3, payload=[0]), pkt(1, 3)[:1],
           pkt(1, 3, type=int(P.PacketType.DATA)), pkt(2, 3)]
    proto = [pkt(1, 5), pkt(1, 0), pkt(1, 3, release=True), pkt(1, 0, release=True),
             pkt(1, 3, tag=1)]
    for w in fmt + proto:
        await env.send(w)
    await env.send(pkt(1, 4), error=True)
    await env.wait()
    c = env.counters()
    assert (c["err_format"], c["err_protocol"], c["rx_packets"]) == (6, 5, 11)
    assert env.tx == [] and env.done == []
    await env.send(pkt(1, 3))
    await env.send(pkt(1, 4))
    await env.enter(0)
    await env.send(pkt(1, 0, release=True))
    await env.wait()
    assert env.done == [0] and len(env.tx) == 3


@cocotb.test()
async def tree_garbage(dut):
    """2000 cycles of random sink traffic: never stalls, nothing sent, then a barrier works."""
    env = Env(dut)
    await env.start(1, 8, 1)
    rng = random.Random(11)
    d = dut
    for _ in range(2000):
        d.sink_valid.value = int(rng.random() < 0.7)
        d.sink_first.value = int(rng.random() < 0.3)
        d.sink_last.value = int(rng.random() < 0.3)
        d.sink_payload_error.value = int(rng.random() < 0.1)
        w = rng.getrandbits(64)
        if rng.random() < 0.3:
            w = pkt(1, rng.randrange(8), release=rng.random() < 0.5)[0]
        d.sink_payload_data.value = w
        await RisingEdge(d.sys_clk)
    d.sink_valid.value = 0
    await env.wait()
    c = env.counters()
    assert c["rx_packets"] > 200
    assert c["err_format"] + c["err_protocol"] == c["rx_packets"]
    assert env.tx == [] and env.done == []
    await env.send(pkt(1, 3))
    await env.send(pkt(1, 4))
    await env.enter(1)
    await env.send(pkt(1, 0, release=True))
    await env.wait()
    assert env.done == [1] and len(env.tx) == 3


# ---- all-to-all mode ----------------------------------------------------------------------


@cocotb.test()
async def a2a_exact_flow(dut):
    """Node 2 of 8: one arrive to each peer in a2a_order, done only after the 7th peer;
    a peer's next-episode arrive received early counts in the next episode only."""
    env = Env(dut)
    await env.start(2, 8, 2, MODE_A2A)
    order = a2a_order(2, 8)
    await env.enter(1)
    await env.wait(20)
    assert env.tx == [pkt(d, 2, tag=0) for d in order]
    for s in (0, 1, 3, 4, 5, 7):
        await env.send(pkt(2, s, tag=0))
    await env.send(pkt(2, 0, tag=1))           # node 0 is already in episode 1
    await env.wait()
    assert env.done == []
    await env.send(pkt(2, 6, tag=0))
    await env.wait()
    assert env.done == [1] and int(dut.episode.value) == 1
    await env.enter(3)
    for s in (1, 3, 4, 5, 6, 7):
        await env.send(pkt(2, s, tag=1))
    await env.wait(20)
    assert env.done == [1, 3]
    assert env.tx[7:] == [pkt(d, 2, tag=1) for d in order]
    assert env.counters() == dict(episodes=2, tx_packets=14, rx_packets=14, err_format=0,
                                  err_protocol=0, enter_merged=0, enter_dropped=0)


@cocotb.test()
async def a2a_sixteen(dut):
    """Node 9 of 16: 15 arrives in a2a_order; peers arrive in random order."""
    env = Env(dut)
    await env.start(9, 16, 2, MODE_A2A)
    peers = [s for s in range(16) if s != 9]
    random.Random(4).shuffle(peers)
    for s in peers[:10]:
        await env.send(pkt(9, s))
    await env.enter(0)
    for s in peers[10:]:
        assert env.done == []
        await env.send(pkt(9, s))
    await env.wait(40)
    assert env.tx == [pkt(d, 9) for d in a2a_order(9, 16)]
    assert env.done == [0]


@cocotb.test()
async def a2a_bad_input(dut):
    """Releases, arrives from itself or no member, tags other than this or the next
    episode, duplicates, malformed packets: counted and dropped."""
    env = Env(dut)
    await env.start(1, 4, 2, MODE_A2A)
    fmt = [pkt(1, 0, length=8, payload=[7]), pkt(1, 0, payload=[0]), pkt(1, 0)[:1],
           pkt(1, 0, type=int(P.PacketType.DATA)), pkt(2, 0)]
    proto = [pkt(1, 0, release=True), pkt(1, 1), pkt(1, 4), pkt(1, 33), pkt(1, 0, tag=2),
             pkt(1, 0, tag=0xFFFFFFFF), pkt(1, 0, tag=1 << 32)]
    for w in fmt + proto:
        await env.send(w)
    await env.send(pkt(1, 0), error=True)
    await env.send(pkt(1, 0))
    await env.send(pkt(1, 0))                  # duplicate
    await env.wait()
    c = env.counters()
    assert (c["err_format"], c["err_protocol"], c["rx_packets"]) == (6, 8, 15)
    assert env.tx == [] and env.done == []
    await env.send(pkt(1, 2))
    await env.send(pkt(1, 3))
    await env.enter(0)
    await env.wait(10)
    assert env.done == [0] and env.tx == [pkt(d, 1) for d in a2a_order(1, 4)]


@cocotb.test()
async def a2a_garbage(dut):
    """2000 cycles of random sink traffic in all-to-all mode: never stalls, nothing sent,
    nothing completes; then a barrier works."""
    env = Env(dut)
    await env.start(1, 4, 2, MODE_A2A)
    rng = random.Random(12)
    d = dut
    for _ in range(2000):
        d.sink_valid.value = int(rng.random() < 0.7)
        d.sink_first.value = int(rng.random() < 0.3)
        d.sink_last.value = int(rng.random() < 0.3)
        d.sink_payload_error.value = int(rng.random() < 0.1)
        w = rng.getrandbits(64)
        if rng.random() < 0.3:
            w = pkt(1, rng.randrange(8), release=rng.random() < 0.5)[0]
        d.sink_payload_data.value = w
        await RisingEdge(d.sys_clk)
    d.sink_valid.value = 0
    await env.wait()
    c = env.counters()
    assert c["rx_packets"] > 200
    assert env.tx == [] and env.done == []
    # Random words may have formed well-formed arrives (accepted) but no duplicates.
    ok = c["rx_packets"] - c["err_format"] - c["err_protocol"]
    assert 0 <= ok <= 6
    d.enable.value = 0                         # forget whatever the garbage left
    await env.wait(3)
    d.enable.value = 1
    await env.wait(3)
    for s in (0, 2, 3):
        await env.send(pkt(1, s))
    await env.enter(1)
    await env.wait(10)
    assert env.done == [1] and env.tx == [pkt(dd, 1) for dd in a2a_order(1, 4)]
