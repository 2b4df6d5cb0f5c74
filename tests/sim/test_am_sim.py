"""Active messages and RMA (userlib/src/am_*.c) on the simulated 4-node ring: the same C
program as on `sw` (userlib/tests/am_test.c), so requests, replies, the window and RMA
run over the gateware's host interface, the NIC's PIO and DMA engines and the
simulated PCIe latencies; and the hardware-path latency of a request+reply."""

from __future__ import annotations

import json

from simtest import TESTS, launch

AM_TEST = str(TESTS / "am_test")


def _quiet(sim) -> None:
    """Wait until the previous test's clients have detached (a fresh job size)."""
    import time

    t0 = time.time()
    while not (sim.counters()["clients"] == 0 and sim.counters()["job_nodes"] == 0):
        assert time.time() - t0 < 60, "the previous test's clients did not detach"
        time.sleep(0.05)


def test_pingpong_and_rma(sim4):
    """Requests and replies with payload 0 .. 64 KiB both ways and to itself; then puts
    and gets across the inline limit (into malloc'ed regions: the sim backend sends them
    through bounce buffers), data intact."""
    _quiet(sim4)
    r = launch(sim4, [AM_TEST, "pingpong", "sim"], 2, "am-pp", timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "pingpong").startswith("ok pingpong 90 requests and replies, 15 sizes 0 .. 65536")
    _quiet(sim4)
    r = launch(sim4, [AM_TEST, "rma", "sim", "0:0", "1:3", "5000:17", "16385:1", "200000:4096"], 2, "am-rma",
               timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "rma").startswith("ok rma 5 puts and gets intact (221386 bytes)"), r.out


def test_all_to_all_small_window(sim4):
    """4 nodes x 40 requests to every node with a window of 2: all handled in order."""
    _quiet(sim4)
    r = launch(sim4, [AM_TEST, "all_to_all", "sim"], 4, "am-a2a", timeout=300,
               env={"AT_WINDOW": "2", "AT_COUNT": "40"})
    assert r.rc == 0 and not r.fails(), r.out
    for n in range(4):
        assert r.ok(n, "all_to_all").startswith("ok all_to_all 4 nodes x 40 requests each way per pair, per-source "
                                                "order kept; window 2, peak 2"), r.out


def test_request_reply_latency(sim4):
    """Half a request+reply round trip in simulated time: a little above a ports
    message (the 24-byte AM header and 16 bytes of arguments ride in the same PIO packet)."""
    _quiet(sim4)
    r = launch(sim4, [AM_TEST, "bench", "sim"], 2, "am-bench", timeout=300,
               env={"AT_SIZES": "8,4096", "AT_ITERS": "0.05"})
    assert r.rc == 0 and not r.fails(), r.out
    rows = {d["bytes"]: d for d in (json.loads(ln) for ln in r.nodes[0] if ln.startswith("{"))}
    print("\n" + "\n".join(json.dumps(d) for d in rows.values()))
    assert 0 < rows[8]["latency_ns"] < 20000, rows
    assert rows[4096]["latency_ns"] > rows[8]["latency_ns"] and rows[4096]["put_MBps"] > 0, rows


def test_peers_timing_out_on_each_other_both_exit(sim4):
    """A liveness timeout far below what the simulated cluster needs (30 ms of the
    simulator's work clock, while 64 KiB messages queue ahead of the PONGs): both nodes
    give up on each other with -ETIMEDOUT, and both close and exit, where the closes
    waited for ever on sends the other side no longer received."""
    _quiet(sim4)
    r = launch(sim4, [AM_TEST, "pingpong", "sim"], 2, "am-giveup", timeout=120,
               env={"PARANIC_PORT_TIMEOUT_MS": "30"})
    assert r.rc == 1 and not any("timeout after" in ln for ln in r.launch), r.out
    assert "returned -110 (Connection timed out)" in r.out, r.out
