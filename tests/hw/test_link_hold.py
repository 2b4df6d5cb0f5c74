"""LinkTX.hold on its own: fillers only at frame boundaries, frames never cut, replays resume.

A LinkTX with its receive-side inputs driven by the test: the output stream is
parsed into frames (SOF, its ``len`` data words, CRC trailer) and STATUS fillers,
cycle by cycle, while ``hold`` is raised and lowered at chosen moments.
"""

from __future__ import annotations

import random

from migen import run_simulation

from paranic.hw.link.tx import LinkTX
from paranic.spec import protocol as P
from paranic.spec.link import CtlKind, unpack_ctl

MTU = 256


def _packet(rng: random.Random, length: int, tag: int) -> list[int]:
    h0, h1 = P.header_words(dst_node=2, src_node=1, length=length, tag=tag)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


class Run:
    """Drives a LinkTX: packets into ``sink``, hold from a schedule, a NAK on request."""

    def __init__(self, packets, hold_fn, nak_at=None, cycles=3000):
        self.tx = LinkTX(MTU, replay_words=2048, max_frames=64, ack_timeout=100_000)
        self.packets = packets
        self.hold_fn = hold_fn
        self.nak_at = nak_at
        self.cycles = cycles
        self.out: list[tuple[int, int, int, int]] = []   # (cycle, hold, ctrl, data)

    def gen(self):
        tx = self.tx
        yield tx.up.eq(1)
        yield tx.rdy.eq(1)
        yield tx.far_ack.eq((1 << 8) - 1)
        pi, wi = 0, 0
        for cyc in range(self.cycles):
            hold = int(self.hold_fn(cyc))
            yield tx.hold.eq(hold)
            if pi < len(self.packets):
                p = self.packets[pi]
                yield tx.sink.valid.eq(1)
                yield tx.sink.data.eq(p[wi])
                yield tx.sink.first.eq(wi == 0)
                yield tx.sink.last.eq(wi == len(p) - 1)
            else:
                yield tx.sink.valid.eq(0)
            nak = self.nak_at is not None and cyc == self.nak_at
            yield tx.far_valid.eq(int(nak))
            yield tx.far_nak.eq(int(nak))
            yield
            if pi < len(self.packets) and (yield tx.sink.ready):
                wi += 1
                if wi == len(self.packets[pi]):
                    pi, wi = pi + 1, 0
            self.out.append((cyc, hold, (yield tx.source.ctrl), (yield tx.source.data)))

    def run(self):
        run_simulation(self.tx, self.gen())
        return parse(self.out)


def parse(out):
    """Output words -> list of events: ('sof', seq, start, end, held_at_start) / ('fill', cyc, held)."""
    events = []
    i = 0
    while i < len(out):
        cyc, hold, ctrl, data = out[i]
        if ctrl:
            c = unpack_ctl(data)
            assert c is not None, f"bad control word at {cyc}"
            if c["kind"] == CtlKind.SOF:
                n = c["len"]
                body = out[i + 1:i + 2 + n]
                assert len(body) == n + 1 or i + 1 + n >= len(out), "frame cut short"
                assert all(not w[2] for w in body), f"control word inside the frame at {cyc}"
                events.append(("sof", c["seq"], cyc, cyc + n + 1, out[i - 1][1] if i else 0))
                i += n + 2
                continue
            events.append(("fill", cyc, hold, c["kind"]))
        else:
            raise AssertionError(f"data word outside a frame at cycle {cyc}")
        i += 1
    return events


def test_held_at_boundary_sends_only_fillers():
    rng = random.Random(1)
    pk = [_packet(rng, 200, i) for i in range(20)]
    held = range(100, 600)
    ev = Run(pk, lambda c: c in held).run()
    sofs = [e for e in ev if e[0] == "sof"]
    # No frame starts while hold is high (the decision is taken in the cycle the SOF
    # leaves: LinkTX has no output register, so a SOF at cycle t means hold was low at t).
    for e in sofs:
        assert e[2] not in held, f"frame {e[1]} started under hold at {e[2]}"
    # Inside the held window (after the frame in progress ended) only fillers go out.
    fills_in_hold = [e for e in ev if e[0] == "fill" and e[1] in held]
    assert len(fills_in_hold) > 400
    assert all(e[3] == CtlKind.STATUS for e in fills_in_hold)
    # All 20 packets were sent in order, after the hold too.
    assert [e[1] for e in sofs] == list(range(20))
    assert any(e[2] > 600 for e in sofs)


def test_frame_in_progress_is_finished():
    rng = random.Random(2)
    pk = [_packet(rng, MTU, i) for i in range(6)]
    # Raise hold in the middle of whatever frame is going out at cycle 50.
    ev = Run(pk, lambda c: 50 <= c < 400, cycles=1200).run()
    sofs = [e for e in ev if e[0] == "sof"]
    inflight = [e for e in sofs if e[2] < 50 < e[3]]
    assert inflight, "no frame was in flight when hold rose"
    # parse() checked that every frame is whole (SOF, len words, trailer, no control
    # word inside); the frame in flight ended under hold, and the next started after.
    nxt = [e for e in sofs if e[2] > inflight[0][3]]
    assert nxt and nxt[0][2] >= 400
    assert [e[1] for e in sofs] == list(range(6))


def test_replay_waits_for_hold_then_resumes():
    rng = random.Random(3)
    pk = [_packet(rng, 64, i) for i in range(4)]
    # Send the 4 frames, then hold from 200 to 500; a NAK (nothing acknowledged)
    # arrives at 250, under hold: the go-back-N replay must wait for the release.
    ev = Run(pk, lambda c: 200 <= c < 500, nak_at=250, cycles=900).run()
    sofs = [e for e in ev if e[0] == "sof"]
    fresh, replayed = sofs[:4], sofs[4:]
    assert [e[1] for e in fresh] == [0, 1, 2, 3]
    assert all(e[2] < 200 for e in fresh)
    assert [e[1] for e in replayed][:4] == [0, 1, 2, 3], replayed
    assert replayed[0][2] >= 500, "replay started under hold"
    assert all(not (200 <= e[2] < 500) for e in sofs)   # decided in the cycle it leaves
