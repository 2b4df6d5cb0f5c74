"""rawdata over the `sw` backend (userlib/tests/rawdata_test.c under pn_launch): message
sizes around the MTU and the DMA chunk, -EMSGSIZE keeping the message, many senders
to one receiver, all-to-all, receive from a given node while others send, and a
process killed with SIGKILL in the middle of a run and replaced by a new one."""

from __future__ import annotations

import re

import pytest

from paranic.launch import TESTS


def rawdata(run_nodes, case, n, name=None, extra=None, env=None, timeout=90):
    return run_nodes([str(TESTS / "rawdata_test"), case, "sw"], n, name or f"rd-{case}-{n}",
                     timeout=timeout, extra=extra, env=env)


def assert_clean(r, n):
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0", r.out
    assert sorted(r.nodes) == list(range(n))


@pytest.mark.parametrize("n", [2, 3])
def test_sizes(run_nodes, n):
    """0, 1, MTU-1, MTU, MTU+1, 256/257 (the PIO threshold), 1 MiB and 9 chunks + 5 bytes,
    to a peer (unregistered memory: bounce buffers), to itself (more than its own ring)
    and back (registered memory: DMA in place)."""
    r = rawdata(run_nodes, "sizes", n)
    assert_clean(r, n)
    assert r.ok(0, "sizes") == "ok sizes 9 sizes to node 1, to itself and back, 0 .. 1179653 bytes"
    assert r.ok(1, "sizes") == "ok sizes received and echoed 9 messages"


def test_emsgsize_peek_and_bad_input(run_nodes):
    r = rawdata(run_nodes, "emsgsize", 2)
    assert_clean(r, 2)
    r.ok(0, "emsgsize sender")
    r.ok(1, "emsgsize too-small buffer kept the message")


def test_bounce_ring_keeps_many_in_flight(run_nodes):
    """A stream of 300 DMA messages (257 B .. 4 KiB, a 100 KB one every tenth, so the bounce
    ring wraps and fills): the sender sees many descriptors posted and not completed (the
    ring, where two bounce buffers allowed two), the receiver gets each exactly once, in
    order, intact."""
    r = rawdata(run_nodes, "inflight", 2)
    assert_clean(r, 2)
    assert r.ok(0, "inflight") == "ok inflight received 300 messages once each, in order"
    m = re.fullmatch(r"ok inflight sent 300 messages, up to (\d+) in flight", r.ok(1, "inflight"))
    assert m and int(m.group(1)) > 2, r.ok(1, "inflight")


@pytest.mark.parametrize("n", [3, 8])
def test_many_to_one(run_nodes, n):
    r = rawdata(run_nodes, "many_to_one", n)
    assert_clean(r, n)
    assert r.ok(0, "many_to_one").startswith(
        f"ok many_to_one {(n - 1) * 200} messages from {n - 1} senders intact and in order")
    for node in range(1, n):
        assert r.ok(node, "many_to_one") == "ok many_to_one sent 200 messages"


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_to_all(run_nodes, n):
    r = rawdata(run_nodes, "all_to_all", n)
    assert_clean(r, n)
    m = (n - 1) * 40
    for node in range(n):
        assert r.ok(node, "all_to_all") == \
            f"ok all_to_all sent {m} and received {m} messages, per-sender order kept"


def test_from_given_node(run_nodes):
    r = rawdata(run_nodes, "from_given", 4)
    assert_clean(r, 4)
    line = r.ok(0, "from_given")
    m = re.match(r"ok from_given 100 from node 1 first \((\d+) others queued meanwhile\), "
                 r"then 200 from the rest$", line)
    assert m and int(m.group(1)) >= 1, line


def test_killed_process(run_nodes):
    """Node 3 is killed with SIGKILL 300 ms into a phase of 1 MiB-sized traffic; the
    survivors keep sending to it (its ring fills, its packets are dropped and counted),
    a new process takes its place 500 ms later (reclaiming its context), greets
    everyone, and all four finish with a barrier."""
    r = rawdata(run_nodes, "kill", 4, extra=["-f", "-k", "3:300:phase-b", "-r", "500"], timeout=120)
    assert r.rc == 0 and not r.fails(), r.out
    assert "launch: node 3 killed by signal 9, respawning in 500 ms" in r.launch
    assert "launch: restarting node 3" in r.launch
    assert r.launch[-1] == "launch: all nodes exited 0"
    for node in range(3):
        assert re.match(r"ok kill survivor: \d+ rounds, \d+ messages of the killed process intact, "
                        r"\d+ partial dropped$", r.ok(node, "kill survivor")), r.out
    m = re.match(r"ok kill reborn node 3: 3 acks, \d+ late phase-B messages, (\d+) packets dropped while dead$",
                 r.ok(3, "kill reborn"))
    assert m and int(m.group(1)) > 0, r.out


def test_rawdata_catches_corruption(run_nodes):
    """With a NIC that flips a bit now and then, the content checks fail."""
    r = rawdata(run_nodes, "many_to_one", 3, name="rd-corrupt", env={"PARANIC_SW_FAULT": "corrupt=500"},
                timeout=60)
    assert r.rc != 0 and any("FAIL many_to_one" in f for f in r.fails()), r.out


@pytest.mark.slow
def test_huge_messages(run_nodes):
    """256 MiB through the bounce buffers and 20 MiB in place (two descriptors)."""
    r = rawdata(run_nodes, "huge", 2, env={"RD_HUGE_MB": "256"}, timeout=300)
    assert_clean(r, 2)
    assert r.ok(1, "huge").startswith("ok huge received 256 MiB and 20 MiB intact")


@pytest.mark.slow
@pytest.mark.parametrize("delay", [20, 60, 150, 300, 700, 1000])
def test_killed_process_repeated(run_nodes, delay):
    """The kill at different moments of the run (early: during the first messages)."""
    r = rawdata(run_nodes, "kill", 5, name=f"rd-kill-{delay}",
                extra=["-f", "-k", f"4:{delay}:phase-b", "-r", "200"], timeout=120)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0"
    r.ok(4, "kill reborn")


@pytest.mark.slow
@pytest.mark.parametrize("case,n", [("many_to_one", 8), ("all_to_all", 6)])
def test_long_traffic(run_nodes, case, n):
    r = rawdata(run_nodes, case, n, name=f"rd-long-{case}", env={"RD_MESSAGES": "2000"}, timeout=600)
    assert_clean(r, n)


def test_posted_dma_progresses_while_waiting_elsewhere(run_nodes):
    """rawdata's send returns once its bounce-buffer DMA is posted; the sw NIC runs in its
    callers, so a process that then waits on another context (pn_bench's barrier on
    context 1) must still run context 0's engine, or the peer waits for ever for the
    message's tail. Pairwise exchange of 256 KiB .. 1 MiB: every iteration completes."""
    from paranic.launch import BIN

    r = run_nodes([str(BIN / "pn_bench"), "--bench", "pairwise", "--layer", "rawdata", "--min", "262144",
                   "--max", "1048576", "--scale", "1"], 2, "rd-posted", timeout=120)
    assert r.rc == 0, r.out
    rows = [ln for ln in r.nodes[0] if ln.startswith("{")]
    assert len(rows) == 3 and all('"bench": "pairwise"' in ln for ln in rows), r.out
