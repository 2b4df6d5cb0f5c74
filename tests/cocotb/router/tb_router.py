"""cocotb test of one Router (paranic.sim.testnet.RouterTop) under Verilator.

``test_random``: random packets on all inputs to all outputs (table: dst d -> port d),
link outputs with a far end that returns credits after a random delay, random
back-pressure on the ejection port; a scoreboard checks that every packet arrives
exactly once, intact, in order per (input, output). The hop-latency bench is the
benchmark's (:mod:`paranic.bench.router_tb`).
"""

from __future__ import annotations

import os
import random

import cocotb
from cocotb.triggers import FallingEdge

from paranic.bench.router_tb import NAMES, load_table, nports, packet, setup
from paranic.spec import protocol as P


class _Input:
    """Drives ``<name>_sink``; for link inputs never exceeds the buffer: word credits
    and packet slots (``slots`` packets at a time, a slot given back when the words
    of the oldest packet sent have all been drained), as an upstream router does."""

    def __init__(self, dut, name: str, packets: list[list[int]], free: int | None,
                 slots: int | None = None):
        self.dut, self.name = dut, name
        self.packets = packets
        self.free = free          # None: local port (back-pressure by ready)
        self.slots = slots
        self.lens: list[int] = []  # lengths of the packets holding a slot, oldest first
        self.acc = 0               # drained words not yet matched to a whole packet
        self.cur: list[int] | None = None
        self.i = 0
        self.gap = 0
        self.sig = {f: getattr(dut, f"{name}_sink_{f}") for f in
                    ("valid", "ready", "first", "last", "payload_data", "payload_error")}

    def step(self, rng: random.Random) -> None:
        """Called at a falling edge: settle the previous beat, present the next."""
        if self.cur is not None and self.accepted:
            self.i += 1
            if self.i == len(self.cur):
                self.cur = None
                if rng.random() < 0.3:
                    self.gap = rng.randrange(1, 12)
        self.presented = False
        if self.cur is None and self.gap:
            self.gap -= 1
        elif self.cur is None and self.packets:
            w = self.packets[0]
            if self.free is None or (self.free >= len(w) and len(self.lens) < self.slots):
                self.cur, self.i = self.packets.pop(0), 0
                if self.free is not None:
                    self.free -= len(w)
                    self.lens.append(len(w))
        if self.cur is not None:
            self.sig["valid"].value = 1
            self.sig["payload_data"].value = self.cur[self.i]
            self.sig["first"].value = int(self.i == 0)
            self.sig["last"].value = int(self.i == len(self.cur) - 1)
            self.sig["payload_error"].value = 0
            self.presented = True
            # ready does not depend on this cycle's valid/data: sample it now
            self.accepted = bool(int(self.sig["ready"].value))
        else:
            self.sig["valid"].value = 0
            self.accepted = False

    def drained(self) -> None:
        """One word of this input's buffer was drained (a credit)."""
        self.free += 1
        self.acc += 1
        while self.lens and self.acc >= self.lens[0]:
            self.acc -= self.lens.pop(0)

    presented = False
    accepted = False


@cocotb.test()
async def test_random(dut):
    """Random traffic, credits returned late, random back-pressure: scoreboard."""
    await setup(dut)
    n = nports(dut)
    rng = random.Random(int(os.environ.get("SEED", "5")))
    npk = int(os.environ.get("PACKETS", "150"))
    await load_table(dut, {d: d for d in range(n)})
    buf = int(dut.credits_xp.value)
    expected = {(s, o): [] for s in range(n) for o in range(n)}
    streams = {s: [] for s in range(n)}
    for s in range(n):
        for i in range(npk):
            o = rng.randrange(n)
            w = packet(o, s, rng.choice([0, 8, 16, 64, 200, 1024, rng.randrange(0, 1025)]),
                       (s << 32) | i, rng)
            streams[s].append(w)
            expected[(s, o)].append(w)
    slots = buf // P.packet_words(P.DEFAULT_MTU)
    inputs = [_Input(dut, NAMES[s], streams[s], None if s == 0 else buf, slots) for s in range(n)]
    far_level = {p: 0 for p in range(1, n)}
    got = {o: [] for o in range(n)}
    cur = {o: [] for o in range(n)}
    total = sum(len(v) for v in expected.values())
    received = 0
    idle = 0
    while received < total and idle < 20_000:
        await FallingEdge(dut.sys_clk)
        idle += 1
        for inp in inputs:
            inp.step(rng)
        for p in range(1, n):  # upstream credits: words drained from our input buffers
            if int(getattr(dut, f"{NAMES[p]}_drained").value):
                inputs[p].drained()
        r = int(rng.random() < 0.7)
        dut.local_source_ready.value = r
        for o in range(n):
            name = NAMES[o]
            ready = r if o == 0 else 1
            if ready and int(getattr(dut, f"{name}_source_valid").value):
                cur[o].append(int(getattr(dut, f"{name}_source_payload_data").value))
                if o:
                    far_level[o] += 1
                    assert far_level[o] <= buf, f"credit overrun on {name}"
                if int(getattr(dut, f"{name}_source_last").value):
                    got[o].append(cur[o])
                    cur[o] = []
                    received += 1
                    idle = 0
        for o in range(1, n):  # far ends drain slowly and return credits in bursts
            cv = getattr(dut, f"{NAMES[o]}_credit_valid")
            cv.value = 0
            if far_level[o] and rng.random() < 0.5:
                k = min(far_level[o], rng.choice([1, 1, 2, 8, 32]))
                far_level[o] -= k
                cv.value = 1
                getattr(dut, f"{NAMES[o]}_credit_words").value = k
    where = {}
    for o in range(n):
        for w in got[o]:
            where.setdefault(w[1], []).append((o, len(w)))
    exp_where = {w[1]: (o, len(w)) for (s_, o), lst in expected.items() for w in lst}
    missing = sorted(t for t in exp_where if t not in where)
    dup = {t: v for t, v in where.items() if len(v) > 1}
    dut._log.info("missing (tag, out, words): %s", [(t >> 32, t & 0xFFFF, exp_where[t]) for t in missing][:20])
    dut._log.info("dups: %s", list(dup.items())[:10])
    dut._log.info("errors: %s", {nm: int(getattr(dut, nm).value) for nm in ("err_unknown", "err_length", "err_aborted")})
    for o in range(n):
        for s in range(n):
            mine = [w for w in got[o] if (w[1] >> 32) == s]
            if mine != expected[(s, o)]:
                gt = [w[1] & 0xFFFF for w in mine]
                et = [w[1] & 0xFFFF for w in expected[(s, o)]]
                bad = [(a, b) for a, b in zip(mine, expected[(s, o)]) if a != b][:1]
                raise AssertionError(f"input {NAMES[s]} -> output {NAMES[o]}: got tags {gt}, "
                                     f"expected {et}; first bad {bad}")
    assert received == total
    for nm in ("err_unknown", "err_length", "err_aborted"):
        assert int(getattr(dut, nm).value) == 0, nm
