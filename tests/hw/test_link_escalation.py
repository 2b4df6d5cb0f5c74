"""The link layer's escalation under bit errors (docs/link-layer.md, "Escalation under
bit errors"), in Migen: a LinkLayer pair over SimPhy wires with the router-port models
of test_link_fault.

* Where no frame can pass, the link goes DOWN (reason REPLAY_LIMIT) after the
  *configured* number of replay rounds without ACK progress (the ``max_replays`` CSR set
  to 5 here, not the default), and nothing acknowledged is lost.
* At a moderate bit-error rate on both wires it replays through: it stays UP and every
  packet arrives exactly once, in order.
"""

from __future__ import annotations

import pytest

from paranic.spec.link import LinkDownReason, LinkState
from paranic.spec.sim import ber_to_threshold

from test_link_fault import LOS, Bench, _run, _true


def test_down_after_the_configured_rounds_where_no_frame_passes():
    b = Bench(n=30, seed=11, drain_b=0.8)
    limit = 5
    res = {"progress_rounds": None}

    def rounds():
        return (yield b.la.naks) + (yield b.la.timeouts)

    def body():
        yield b.la.max_replays.eq(limit)
        yield from b.until(b.both(LinkState.UP), 200, "training")
        yield from b.until(lambda: (yield from _true(len(b.A.sent) >= 5)), 3000, "traffic")
        # 90 % of the a->b words hit: no frame gets through (a 4-word frame 1e-4 of the
        # time), but enough control words do that b keeps hearing a (no loss of signal).
        b.noise_ab = 0.9
        first = yield b.la.evac_first
        res["progress_rounds"] = yield from rounds()
        for _ in range(20000):
            if (yield b.la.link_state) == LinkState.DOWN:
                break
            f = yield b.la.evac_first
            if f != first:        # ACK progress (frames in flight when the noise began)
                first = f
                res["progress_rounds"] = yield from rounds()
            yield from b.tick()
        else:
            raise AssertionError("not DOWN after 20000 cycles")
        res["reason"] = yield b.la.down_reason
        res["downs"] = yield b.la.downs
        res["rounds"] = (yield from rounds()) - res["progress_rounds"]
        yield from b.until(lambda: (yield from _true((yield b.lb.link_state) == LinkState.DOWN)),
                           LOS + 50, "far end loss of signal")
        for _ in range(50):       # a packet the router had granted is completed
            yield from b.tick()
        lost_a = yield from b.check_frozen(b.A, b.B, b.la, b.lb)
        lost_b = yield from b.check_frozen(b.B, b.A, b.lb, b.la)
        yield from b.restart_and_finish(lost_a, lost_b, stagger=3)

    _run(b, body)
    assert res["reason"] == LinkDownReason.REPLAY_LIMIT and res["downs"] == 1, res
    # Rounds after the last ACK progress: the limit plus one (a NAK that came with the
    # last progress already counts as the first).
    assert limit <= res["rounds"] <= limit + 1, res


@pytest.mark.parametrize("ber", [1e-5, 1e-4])
def test_stays_up_and_delivers_exactly_once_at_a_moderate_ber(ber):
    b = Bench(n=60, seed=5, drain_b=0.7)
    res = {}

    def body():
        yield b.top.ch.ber_threshold.eq(ber_to_threshold(ber))
        yield from b.until(b.both(LinkState.UP), 400, "training")
        yield from b.until(lambda: (yield from _true(len(b.B.received) == len(b.pa) and
                                                     len(b.A.received) == len(b.pb))),
                           60000, "all packets")
        for k in ("downs", "replays", "crc_errors"):
            res[k] = (yield b.la.__getattribute__(k)) + (yield b.lb.__getattribute__(k))
        res["flipped"] = (yield b.top.ch.phy_ab.errors_injected) + (yield b.top.ch.phy_ba.errors_injected)
        res["state"] = ((yield b.la.link_state), (yield b.lb.link_state))

    _run(b, body)
    assert b.B.received == b.pa and b.A.received == b.pb, "lost, duplicated or reordered"
    assert res["downs"] == 0 and res["state"] == (LinkState.UP, LinkState.UP), res
    if ber >= 1e-4:                         # errors were injected and replayed through
        assert res["flipped"] > 0 and res["replays"] > 0, res
