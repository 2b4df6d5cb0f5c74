"""Migen simulations of the link layer: CRCs, control words, and a LinkLayer pair over
SimPhy wires with forced single-bit errors in every kind of word.

Every pair test checks that each packet arrives exactly once, intact and in order,
that the router-side buffer model never overflows and gets all its credits back, and
that the counters show the recovery the injected error calls for.
"""

from __future__ import annotations

import random
import zlib

import pytest
from migen import Module, run_simulation

from paranic.spec import protocol as P
from paranic.hw.common import LinkPortIf
from paranic.hw.link.crc import CRCEngine
from paranic.sim.cable import SimPhy
from paranic.sim.channels import LinkChannel
from paranic.spec.link import (
    CRC16_INIT, CRC16_POLY, CRC16_XOROUT, CRC32_INIT, CRC32_POLY, CRC32_XOROUT, CTL, CTL_FIELDS,
    CtlKind, LinkState, crc16, crc32, frame_words, link_efficiency, pack_ctl, unpack_ctl,
)
from paranic.spec.sim import ber_to_threshold

# ---------------------------------------------------------------------------
# Models of the two router ports around a LinkChannel, and a bit-flip injector
# ---------------------------------------------------------------------------


def make_packet(rng: random.Random, length: int, tag: int, src: int = 1, dst: int = 2) -> list[int]:
    """A packet's words: a NIC header whose length field is ``length``, random payload."""
    h0, h1 = P.header_words(dst_node=dst, src_node=src, length=length, tag=tag)
    payload = [rng.getrandbits(64) for _ in range(P.payload_words(length))]
    return [h0, h1] + payload


class PortModel:
    """One router port: sends packets under credits, receives and drains its buffer."""

    def __init__(self, port, packets: list[list[int]], buffer_words: int = 512,
                 rng: random.Random | None = None, gap: float = 0.0, drain: float = 1.0,
                 bad: set[int] = frozenset()):
        self.port = port
        self.bad = bad          # indices of packets sent with error on their last word
        self.n_started = 0
        self.words_seen: list[int] = []   # sink_words on each first word received
        self.to_send = list(packets)
        self.sent: list[list[int]] = []
        self.credits = buffer_words
        self.buffer_words = buffer_words
        self.rng = rng or random.Random(0)
        self.gap = gap          # probability of a bubble inside a packet
        self.drain = drain      # probability of draining one word per cycle
        self.cur: list[int] | None = None
        self.idx = 0
        self.received: list[list[int]] = []
        self.errored = 0
        self.partial: list[int] = []
        self.occupancy = 0      # committed words not yet drained
        self.max_words_in = 0

    def step(self):
        """One cycle (a Migen generator step, before the final ``yield``)."""
        p = self.port
        # -- transmit ---------------------------------------------------------
        valid = yield p.source.valid
        ready = yield p.source.ready
        if valid and ready:
            self.idx += 1
            if self.idx == len(self.cur):
                self.sent.append(self.cur)
                self.cur = None
        if self.cur is None and self.to_send and (yield p.up):
            nxt = self.to_send[0]
            if self.credits >= len(nxt):
                self.credits -= len(nxt)
                self.cur = self.to_send.pop(0)
                self.cur_bad = self.n_started in self.bad
                self.n_started += 1
                self.idx = 0
        if self.cur is not None and not (self.gap and self.rng.random() < self.gap):
            yield p.source.valid.eq(1)
            yield p.source.data.eq(self.cur[self.idx])
            yield p.source.first.eq(self.idx == 0)
            yield p.source.last.eq(self.idx == len(self.cur) - 1)
            yield p.source.error.eq(self.cur_bad and self.idx == len(self.cur) - 1)
        else:
            yield p.source.valid.eq(0)
        # -- credits ----------------------------------------------------------
        if (yield p.credit_valid):
            self.credits += (yield p.credit_words)
            assert self.credits <= self.buffer_words, "more credits than buffer"
        # -- receive ------------------------------------------------------------
        yield p.sink.ready.eq(1)
        if (yield p.sink.valid):
            first = yield p.sink.first
            if first:
                assert not self.partial, "new packet before the last one ended"
                # As the router's cut-through buffer: the SOF's length is reserved at
                # the first word, and every packet, good or bad, is drained whole.
                words = yield p.sink_words
                self.words_seen.append(words)
                self.occupancy += words
                assert self.occupancy <= self.buffer_words, "buffer overrun"
            self.partial.append((yield p.sink.data))
            self.max_words_in = max(self.max_words_in, len(self.partial))
            if (yield p.sink.last):
                if (yield p.sink.error):
                    self.errored += 1
                else:
                    self.received.append(self.partial)
                self.partial = []
        yield p.buf_free.eq(self.buffer_words - self.occupancy)
        # -- drain ----------------------------------------------------------------
        if self.occupancy and self.rng.random() < self.drain:
            self.occupancy -= 1
            yield p.drained.eq(1)
        else:
            yield p.drained.eq(0)


class Injector:
    """Flip chosen bits of words on one SimPhy, chosen by a rule on the word entering it.

    ``rule(info)`` gets a dict describing the word entering the PHY (``cycle``,
    ``data``, ``ctrl``, ``ctl`` = decoded control fields or None, ``frame`` = seq of
    the frame the word belongs to or None, ``index`` = packet-word index in the frame
    (-1 for the SOF, ``len`` for the trailer), ``trailer``, ``attempt`` = how many
    times this seq was sent before) and returns a bit number (0..64) to flip or None.
    """

    def __init__(self, phy, rule):
        self.phy = phy
        self.rule = rule
        self.cycle = 0
        self.sched: dict[int, int] = {}
        self.frame = None
        self.index = 0
        self.length = 0
        self.attempts: dict[int, int] = {}
        self.flipped: list[dict] = []
        self.enabled = True

    def step(self):
        phy = self.phy
        # What enters now leaves at cycle + delay.
        if (yield phy.sink.valid):
            data = yield phy.sink.data
            ctrl = yield phy.sink.ctrl
            ctl = unpack_ctl(data) if ctrl else None
            info = dict(cycle=self.cycle, data=data, ctrl=ctrl, ctl=ctl, frame=None, index=None,
                        attempt=0, trailer=False)
            if ctl and ctl["kind"] == CtlKind.SOF:
                self.frame = ctl["seq"]
                self.length = ctl["len"]
                self.index = -1
                info["attempt"] = self.attempts.get(self.frame, 0)
                self.attempts[self.frame] = info["attempt"] + 1
                info.update(frame=self.frame, index=-1)
            elif not ctrl and self.frame is not None:
                self.index += 1
                info.update(frame=self.frame, index=self.index,
                            attempt=self.attempts[self.frame] - 1,
                            trailer=self.index == self.length)
                if self.index == self.length:
                    self.frame = None
            bit = self.rule(info) if self.enabled else None
            if bit is not None:
                self.sched[self.cycle + phy.delay] = bit
                self.flipped.append(info)
        t = self.cycle + 1  # a write now is seen in the next cycle
        yield phy.flip_mask.eq((1 << self.sched.pop(t)) if t in self.sched else 0)
        self.cycle += 1


MTU = 64
DELAY = 6
TIMEOUT = 160
BUF = 64


# ---------------------------------------------------------------------------
# CRC engines and control words
# ---------------------------------------------------------------------------


def _run_crc(data_width, width, poly, init, words):
    eng = CRCEngine(data_width, width, poly)
    out = []

    def gen():
        crc = init
        for w in words:
            yield eng.last.eq(crc)
            yield eng.data.eq(w)
            yield
            crc = yield eng.next
        out.append(crc)

    run_simulation(eng, gen())
    return out[0]


def test_crc32_engine_matches_zlib():
    rng = random.Random(5)
    for n in (1, 2, 7, 33):
        words = [rng.getrandbits(64) for _ in range(n)]
        data = b"".join(w.to_bytes(8, "little") for w in words)
        got = _run_crc(64, 32, CRC32_POLY, CRC32_INIT, words) ^ CRC32_XOROUT
        assert got == zlib.crc32(data), n
        assert crc32(data) == zlib.crc32(data)


def test_crc16_engine_check_value_and_48bit():
    # CRC-16/X-25 check value, one byte per cycle.
    assert crc16(b"123456789") == 0x906E
    got = _run_crc(8, 16, CRC16_POLY, CRC16_INIT, list(b"123456789")) ^ CRC16_XOROUT
    assert got == 0x906E
    rng = random.Random(6)
    bodies = [rng.getrandbits(48) for _ in range(5)]
    for b in bodies:
        got = _run_crc(48, 16, CRC16_POLY, CRC16_INIT, [b]) ^ CRC16_XOROUT
        assert got == crc16(b.to_bytes(6, "little"))


def test_control_words_detect_every_single_bit_flip():
    rng = random.Random(7)
    for _ in range(50):
        f = dict(kind=rng.choice(list(CtlKind)).value, ack=rng.getrandbits(8),
                 nak=rng.getrandbits(1), credit=rng.getrandbits(16), seq=rng.getrandbits(8),
                 len=rng.getrandbits(11), rdy=rng.getrandbits(1))
        w = pack_ctl(**f)
        u = unpack_ctl(w)
        assert u is not None and all(u[k] == v for k, v in f.items())
        for bit in range(64):
            assert unpack_ctl(w ^ (1 << bit)) is None, bit
    # Layout sanity: fields tile bits 0..63 exactly.
    covered = sorted((f.offset, f.offset + f.width) for f in CTL_FIELDS)
    assert covered[0][0] == 0 and covered[-1][1] == 64
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))
    assert CTL["check"].offset == 48


def test_link_efficiency_formula():
    assert frame_words(P.DEFAULT_MTU) == 1 + 2 + 128 + 1
    assert link_efficiency(P.DEFAULT_MTU) == pytest.approx(1024 / (132 * 8))
    assert link_efficiency(0) == 0.0
    assert link_efficiency(8) == pytest.approx(8 / (5 * 8))


def test_simphy_delay_and_error_rate():
    phy = SimPhy(delay=5, seed=3)
    n = 4000
    seen = []

    def gen():
        yield phy.ber_threshold.eq(ber_to_threshold(1e-3))
        for i in range(n + 10):
            if i < n:
                yield phy.sink.valid.eq(1)
                yield phy.sink.data.eq(i * 0x0101010101)
                yield phy.sink.ctrl.eq(i & 1)
            else:
                yield phy.sink.valid.eq(0)
            yield
            if (yield phy.source.valid):
                seen.append(((yield phy.source.data), (yield phy.source.ctrl)))
        seen.append((yield phy.errors_injected))

    run_simulation(phy, gen())
    injected = seen.pop()
    assert len(seen) == n
    flips = 0
    for i, (d, c) in enumerate(seen):
        diff = (d ^ (i * 0x0101010101)) | ((c ^ (i & 1)) << 64)
        assert bin(diff).count("1") <= 1
        flips += diff != 0
    assert flips == injected
    # p = 1 - (1 - 1e-3)**65 = 6.3 %: 252 expected of 4000, allow +-5 sigma.
    assert 175 < flips < 330


# ---------------------------------------------------------------------------
# A LinkLayer pair over SimPhy wires
# ---------------------------------------------------------------------------


class Pair(Module):
    def __init__(self, **kw):
        self.a = LinkPortIf()
        self.b = LinkPortIf()
        self.submodules.ch = LinkChannel(self.a, self.b, delay=DELAY, seed=11, mtu=MTU,
                                         ack_timeout=TIMEOUT, **kw)


COUNTER_NAMES = ("tx_packets", "rx_packets", "crc_errors", "ctrl_errors", "seq_errors",
                 "replays", "naks", "naks_sent", "timeouts", "rx_overflows")


def run_pair(n=12, rule_ab=None, rule_ba=None, max_cycles=4000, seed=1, gap=0.1, **kw):
    """Send ``n`` random packets each way; return (models, counters, injectors, state)."""
    top = Pair(**kw)
    rng = random.Random(seed)
    pa = [make_packet(rng, rng.choice([0, 8, MTU, rng.randrange(MTU + 1)]), i) for i in range(n)]
    pb = [make_packet(rng, rng.choice([0, 8, MTU, rng.randrange(MTU + 1)]), 100 + i)
          for i in range(n)]
    A = PortModel(top.a, pa, BUF, random.Random(seed + 1), gap=gap, drain=0.9)
    B = PortModel(top.b, pb, BUF, random.Random(seed + 2), gap=gap, drain=0.5)
    inj_ab = Injector(top.ch.phy_ab, rule_ab or (lambda info: None))
    inj_ba = Injector(top.ch.phy_ba, rule_ba or (lambda info: None))
    res = {}

    def gen():
        stop_at = None
        for cyc in range(max_cycles):
            yield from inj_ab.step()
            yield from inj_ba.step()
            yield from A.step()
            yield from B.step()
            done = (len(A.received) == n and len(B.received) == n and A.credits == BUF
                    and B.credits == BUF and A.occupancy == 0 and B.occupancy == 0)
            if done and stop_at is None:
                # Inject nothing more, let the words already corrupted arrive.
                inj_ab.enabled = inj_ba.enabled = False
                stop_at = cyc + DELAY + 8
            if cyc == stop_at or cyc == max_cycles - 1:
                res["cycles"] = cyc
                for side, link in (("a", top.ch.link_a), ("b", top.ch.link_b)):
                    res[side] = {}
                    for c in COUNTER_NAMES:
                        res[side][c] = yield getattr(link, c)
                    res[side]["state"] = yield link.link_state
                return
            yield

    run_simulation(top, gen())
    assert res["cycles"] < max_cycles - 1, f"did not finish: {len(A.received)} {len(B.received)} {res}"
    # Exactly once, intact, in order; credits all back.
    assert B.received == pa
    assert A.received == pb
    assert A.credits == BUF and B.credits == BUF
    for side in ("a", "b"):
        c = res[side]
        assert c["tx_packets"] == n and c["rx_packets"] == n and c["rx_overflows"] == 0
        assert c["state"] == LinkState.UP
    return (A, B), res, (inj_ab, inj_ba)


class WireCheck:
    """An injection rule that injects nothing and checks the wire format instead:
    every control word decodes (its CRC-16 made in hardware matches the Python
    model) and every frame's trailer is ``zlib.crc32`` of its packet words."""

    def __init__(self):
        self.words: list[int] | None = None
        self.frames = 0
        self.ctl = 0
        self.bad: list = []

    def __call__(self, info):
        if info["ctrl"]:
            self.ctl += 1
            if info["ctl"] is None:
                self.bad.append(("control word", hex(info["data"])))
            elif info["ctl"]["kind"] == CtlKind.SOF:
                self.words = []
        elif self.words is not None:
            if info["trailer"]:
                data = b"".join(w.to_bytes(8, "little") for w in self.words)
                if info["data"] != zlib.crc32(data):
                    self.bad.append(("trailer", info["frame"]))
                self.frames += 1
                self.words = None
            else:
                self.words.append(info["data"])
        return None


def test_pair_no_errors():
    checks = WireCheck(), WireCheck()
    (A, B), res, _ = run_pair(n=16, rule_ab=checks[0], rule_ba=checks[1])
    for c in checks:
        assert c.bad == [] and c.frames == 16 and c.ctl > 100
    for side in ("a", "b"):
        for c in ("crc_errors", "ctrl_errors", "seq_errors", "replays", "naks", "naks_sent",
                  "timeouts"):
            assert res[side][c] == 0, (side, c, res[side])
    assert A.errored == 0 and B.errored == 0


def events(*specs):
    """An injection rule from ``(after_cycle, predicate, bit)`` events.

    Each event fires once, on the first word entering the wire at or after
    ``after_cycle`` that satisfies ``predicate``. Spacing events ~100 cycles apart lets
    the link recover in between, so each one hits a frame the receiver accepts.
    """
    pending = list(specs)

    def rule(info):
        for i, (t, pred, bit) in enumerate(pending):
            if info["cycle"] >= t and pred(info):
                pending.pop(i)
                return bit
        return None
    rule.pending = pending
    return rule


def fresh(index):
    """Predicate: packet word ``index`` (-1: the SOF) of a frame's first transmission."""
    return lambda info: info["attempt"] == 0 and info["index"] == index and info["frame"] is not None


def fresh_trailer(info):
    return info["attempt"] == 0 and info["trailer"]


def test_pair_data_word_errors():
    """(a) Packet words: a payload bit, the control flag of a data word (it becomes a bad
    control word inside the frame and cuts it), a bit of NIC header word 0."""
    rule = events((20, fresh(3), 17), (150, fresh(1), 64), (280, fresh(0), 63))
    (A, B), res, (inj, _) = run_pair(n=24, rule_ab=rule)
    assert not rule.pending and len(inj.flipped) == 3
    a, b = res["a"], res["b"]
    assert b["crc_errors"] == 2            # payload bit, header bit
    assert b["ctrl_errors"] == 1           # the frame cut by the "control" word
    assert b["naks_sent"] == 3 and a["naks"] == 3
    assert a["replays"] >= 3 and a["timeouts"] == 0
    # Both CRC failures reached the FIFO in full and ended with error=1; the cut frame
    # had delivered nothing yet (its first word is held back until the next arrives).
    assert B.errored == 2
    assert res["b"]["crc_errors"] + res["b"]["ctrl_errors"] == 3


def test_pair_header_and_word_count_errors():
    """(b) The frame header: the SOF's word count (its CRC-16 fails, so the count is never
    trusted; the frame's words arrive as strays and are NAKed), the NIC header's length
    field (CRC-32), and the CRC trailer itself."""
    len_bit = CTL["len"].offset + 2
    length_bit = P.HEADER_FIELD["length"].offset + 3
    # (the third at 250: without the link layer's input/output registers the 24 packets
    # are through by cycle ~310, and no fresh frame is sent after 280)
    rule = events((20, fresh(-1), len_bit), (150, fresh(0), length_bit),
                  (250, fresh_trailer, 5))
    (A, B), res, (inj, _) = run_pair(n=24, rule_ab=rule)
    assert not rule.pending and len(inj.flipped) == 3
    a, b = res["a"], res["b"]
    assert b["ctrl_errors"] == 1           # the SOF with the bad word count
    assert b["crc_errors"] == 2            # bad NIC header length, bad trailer
    assert b["naks_sent"] == 3 and a["naks"] == 3
    assert a["replays"] >= 3 and a["timeouts"] == 0
    assert B.errored == 2


def test_pair_sof_and_control_word_errors():
    """(c) Control words: a SOF turned into a data word (control flag flipped), a SOF
    with a flipped kind bit, every 5th STATUS word (idles and fillers) corrupted both
    ways, and a TRAIN word corrupted during training."""
    counts = {"ab": 0, "ba": 0, "train": 0}

    def status_rule(wire):
        def rule(info):
            ctl = info["ctl"]
            if ctl and ctl["kind"] == CtlKind.STATUS:
                counts[wire] += 1
                if counts[wire] % 5 == 0:
                    return CTL["credit"].offset + counts[wire] % 20
            if ctl and ctl["kind"] == CtlKind.TRAIN:
                counts["train"] += 1
                if counts["train"] == 3:
                    return 50
            return None
        return rule

    sof_rule = events((20, fresh(-1), 64), (150, fresh(-1), CTL["kind"].offset))
    st_ab = status_rule("ab")

    def rule_ab(info):
        bit = sof_rule(info)
        return bit if bit is not None else st_ab(info)
    (A, B), res, (inj_ab, inj_ba) = run_pair(n=24, rule_ab=rule_ab, rule_ba=status_rule("ba"))
    assert not sof_rule.pending
    assert counts["ab"] >= 20 and counts["ba"] >= 20 and counts["train"] >= 3
    a, b = res["a"], res["b"]
    # Every corrupted control word is counted once; the SOF that became a data word is
    # not a control-word error (its frame arrives as stray words and is NAKed).
    assert b["ctrl_errors"] == len(inj_ab.flipped) - 1
    assert a["ctrl_errors"] == len(inj_ba.flipped)
    assert b["naks_sent"] >= 2 and a["replays"] >= 2


def test_pair_ack_and_credit_errors():
    """(d) ACK/credit carriers on the b->a wire: every word carrying one of b's NAKs is
    lost (a must time out), and the first STATUS word announcing each new ACK or credit
    value is corrupted (the cumulative values come again in the next one)."""
    seen = {"ack": None, "credit": None}

    def rule_ba(info):
        ctl = info["ctl"]
        if ctl is None or ctl["kind"] == CtlKind.TRAIN:
            return None
        if ctl["nak"]:
            return CTL["nak"].offset
        if ctl["kind"] == CtlKind.STATUS and (ctl["ack"], ctl["credit"]) != (seen["ack"], seen["credit"]):
            seen["ack"], seen["credit"] = ctl["ack"], ctl["credit"]
            return CTL["ack"].offset + 1
        return None

    rule_ab = events((20, fresh(2), 9), (200, fresh(1), 33))
    (A, B), res, (inj_ab, inj_ba) = run_pair(n=24, rule_ab=rule_ab, rule_ba=rule_ba,
                                             max_cycles=8000)
    a, b = res["a"], res["b"]
    assert not rule_ab.pending
    assert len(inj_ba.flipped) > 10
    assert a["ctrl_errors"] == len(inj_ba.flipped)
    assert b["naks_sent"] >= 2 and a["naks"] == 0   # every NAK was lost ...
    assert a["timeouts"] >= 2                       # ... so a timed out and replayed
    assert a["replays"] >= 2
    assert b["seq_errors"] >= 1                     # frames after the bad ones, discarded


def test_pair_small_replay_buffer_with_errors():
    """A replay buffer of two MTU frames and two frames in flight: the TX stalls the
    router while the buffer is full, and recovery still works."""
    rule = events((20, fresh(1), 3), (120, fresh(-1), 40), (220, fresh_trailer, 2))
    (A, B), res, (inj, _) = run_pair(n=16, rule_ab=rule, replay_words=32, max_frames=2)
    assert not rule.pending
    assert res["b"]["crc_errors"] == 2 and res["b"]["ctrl_errors"] == 1
    assert res["a"]["replays"] >= 3


def test_pair_packet_length_disagrees_with_header():
    """A router packet whose ``last`` disagrees with its header's length field: the frame
    follows the header (padded with zero words, or cut and the extra words dropped),
    so the far end gets exactly the words the header announces, stomped, and the link
    goes on."""
    top = Pair()
    rng = random.Random(3)
    good1 = make_packet(rng, 40, 1)
    short = make_packet(rng, 40, 2)[:4]          # header says 2+5 words, only 4 sent
    long_ = make_packet(rng, 16, 3) + [rng.getrandbits(64) for _ in range(3)]  # 4 + 3 extra
    good2 = make_packet(rng, 24, 4)
    A = PortModel(top.a, [good1, short, long_, good2], 1024, random.Random(4))
    B = PortModel(top.b, [], 1024, random.Random(5))

    res = {}

    def gen():
        for _ in range(400):
            yield from A.step()
            yield from B.step()
            yield
        for side, link in (("a", top.ch.link_a), ("b", top.ch.link_b)):
            for c in ("tx_stomped", "rx_stomped", "crc_errors", "naks_sent", "replays"):
                res[side + "_" + c] = yield getattr(link, c)

    run_simulation(top, gen())
    # Cut-through: the packet's head has left before its tail shows the mismatch, so
    # the frame follows the header's length and goes out stomped (dropped at the far
    # end's next buffer, not replayed).
    assert B.received == [good1, good2]
    assert B.errored == 2
    assert B.words_seen == [len(good1), 7, 4, len(good2)]
    assert res["a_tx_stomped"] == 2 and res["b_rx_stomped"] == 2
    assert res["b_crc_errors"] == 0 and res["b_naks_sent"] == 0 and res["a_replays"] == 0


def _stomp_pair(rule=None, n=6, bad=frozenset({2})):
    """A sends ``n`` packets, those at indices ``bad`` with error on their last word."""
    top = Pair()
    rng = random.Random(8)
    pk = [make_packet(rng, MTU if i % 2 else 24, i) for i in range(n)]
    A = PortModel(top.a, pk, 1024, random.Random(4), bad=bad)
    B = PortModel(top.b, [], 1024, random.Random(5))
    inj = Injector(top.ch.phy_ab, rule or (lambda info: None))
    res = {}

    def gen():
        for _ in range(700):
            yield from inj.step()
            yield from A.step()
            yield from B.step()
            yield
        for side, link in (("a", top.ch.link_a), ("b", top.ch.link_b)):
            for c in ("tx_stomped", "rx_stomped", "crc_errors", "naks_sent", "replays",
                      "rx_packets", "tx_packets"):
                res[side + "_" + c] = yield getattr(link, c)

    run_simulation(top, gen())
    return pk, A, B, res


def test_pair_stomped_frame_is_dropped_not_replayed():
    """A packet handed over with error on its last word (bad before this link) goes out
    stomped: the far end delivers it marked bad, counts it in rx_stomped, acknowledges
    it and asks for no replay; the packets around it arrive once, in order. Every packet
    arrives with the SOF's length beside its first word (``sink_words``)."""
    pk, A, B, res = _stomp_pair()
    assert B.received == pk[:2] + pk[3:]
    assert B.errored == 1
    assert B.words_seen == [len(p) for p in pk]
    assert res["a_tx_stomped"] == 1 and res["b_rx_stomped"] == 1
    assert res["b_crc_errors"] == 0 and res["b_naks_sent"] == 0 and res["a_replays"] == 0
    assert res["b_rx_packets"] == len(pk) - 1 and res["a_tx_packets"] == len(pk)


def test_pair_stomped_frame_replayed_stomped():
    """A line error in a stomped frame: the far end sees a plain CRC failure and NAKs;
    the replay of that frame is stomped again (the stomp bit is kept per frame in the
    replay table), so the far end never takes it for a good packet."""
    rule = events((0, lambda i: i["attempt"] == 0 and i["frame"] == 2 and i["index"] == 3, 9))
    pk, A, B, res = _stomp_pair(rule)
    assert not rule.pending
    assert B.received == pk[:2] + pk[3:]
    assert B.errored == 2                    # the damaged copy and the stomped replay
    assert res["b_crc_errors"] == 1 and res["b_rx_stomped"] == 1
    assert res["b_naks_sent"] == 1 and res["a_replays"] >= 1


def test_add_csrs():
    from paranic.hw.link import COUNTERS, LinkLayer
    ll = LinkLayer(mtu=MTU)
    ll.add_csrs()
    names = {c.name for c in ll.get_csrs()}
    fault = {"down_reason", "downs", "take_down", "restart", "max_replays", "rx_expect",
             "evac_first", "evac_end", "evac_seq", "evac_len", "evac_word", "evac_data"}
    assert names == {"link_state"} | {n for n, _, _ in COUNTERS} | fault
