"""The ports layer (userlib/src/ports_*.c, pn_ports.h) on the `sw` backend.

* C programs under pn_launch (userlib/tests/ports_test.c, ports_fault_test.c): sizes around the MTU and
  the eager limit, matching by source/channel/tag/mask (unexpected then posted, posted
  then arrived), order per channel, many channels, two ports per node, all-to-all, a
  slow receiver flooded with eager messages, bad input and closed ports, a forged
  source, a peer killed mid-transfer.
* Property tests (hypothesis) through the Python bindings (paranic.ports), three ports
  in this process: random schedules of sends and receives (sizes across the MTU and the
  eager limit, channels, tags under masks, wildcard sources, posting before or after
  arrival, progress in any order) must match exactly as the ordering rules say, with
  every byte intact.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import re
import subprocess
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paranic.spec import protocol as P
from paranic.launch import TESTS, USERLIB_BUILD, cluster_name
from paranic.paths import TREE as ROOT

PORTS_TEST = TESTS / "ports_test"
#: The cases of bad input, forged sources and killed peers.
PORTS_FAULT_TEST = TESTS / "ports_fault_test"
FAULT_CASES = ("errors", "forge", "kill")


@pytest.fixture(scope="module")
def C(userlib_build) -> dict[str, int]:
    """pn_ports.h's constants (paranic.lib reads them from the header), after the build."""
    from paranic import lib

    return lib.CONSTANTS


def window(c: dict[str, int], eager_max: int) -> int:
    """The default eager window for a limit (pn_ports.h): 8 x (limit + cost), at least 64 KiB."""
    return max(8 * (eager_max + c["PN_PORT_MSG_COST"]), 65536)


def ports(run_nodes, case, n, name=None, extra=None, env=None, timeout=60):
    prog = PORTS_FAULT_TEST if case in FAULT_CASES else PORTS_TEST
    return run_nodes([str(prog), case, "sw"], n, name or f"pt-{case}-{n}", timeout=timeout, extra=extra,
                     env=env)


def assert_clean(r, n):
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0", r.out
    assert sorted(r.nodes) == list(range(n)), r.out


# ---- build --------------------------------------------------------------------------------------

def test_header_stands_alone_and_exports(userlib_build, tmp_path):
    """pn_ports.h compiles on its own in C11 and C++17, and the library exports the API."""
    src = tmp_path / "p.c"
    src.write_text("#include <paranic/pn_ports.h>\n"
                   "int main(void) { pn_port_t *p = 0; return pn_port_close(p) == -22 ? 0 : 1; }\n")
    inc = str(ROOT / "userlib/include")
    for cc, std in (("gcc", "-std=c11"), ("g++", "-std=c++17")):
        r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-I", inc, "-x", "c" if cc == "gcc" else "c++",
                            str(src), "-o", str(tmp_path / "a"), "-L", str(USERLIB_BUILD),
                            f"-Wl,-rpath,{USERLIB_BUILD}", "-lparanic"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(tmp_path / "a")]).returncode == 0
    syms = subprocess.run(["nm", "-D", "--defined-only", str(USERLIB_BUILD / "libparanic.so")],
                          capture_output=True, text=True).stdout
    for fn in ("pn_port_open", "pn_port_close", "pn_port_send", "pn_port_isend", "pn_port_recv", "pn_port_irecv",
               "pn_port_test", "pn_port_wait", "pn_port_cancel", "pn_port_probe", "pn_port_progress",
               "pn_port_barrier", "pn_port_stats", "pn_port_mem_register", "pn_port_isendx", "pn_port_irecvx",
               "pn_port_done"):
        assert f" {fn}\n" in syms, fn


# ---- C conformance programs ------------------------------------------------------------------

@pytest.mark.parametrize("n", [2, 3])
def test_sizes(run_nodes, C, n):
    """0, 1, MTU-1, MTU, MTU+1, eager max, eager max + 1, 1 MiB: to node 1 from plain
    memory (the unexpected queue), back from registered memory into receives posted
    before anything was sent, and to itself (matched by tag in reverse order)."""
    r = ports(run_nodes, "sizes", n)
    assert_clean(r, n)
    assert r.ok(0, "sizes") == (f"ok sizes 8 sizes to node 1 and back (posted first), to itself; eager max "
                                f"{C['PN_PORT_DEFAULT_EAGER_MAX']}, mtu {P.DEFAULT_MTU}")
    # 0, 1, MTU-1, MTU, MTU+1 and the eager max go eager; eager max + 1 and 1 MiB by rendezvous
    assert r.ok(1, "sizes") == "ok sizes received and echoed 8 messages (6 eager, 2 rendezvous)"


def test_eager_limit_from_environment(run_nodes):
    """PARANIC_EAGER_MAX moves the limit: with 1000 bytes, MTU-1 and larger go by rendezvous."""
    r = ports(run_nodes, "sizes", 2, name="pt-sizes-env", env={"PARANIC_EAGER_MAX": "1000"})
    assert_clean(r, 2)
    assert "eager max 1000, mtu 1024" in r.ok(0, "sizes")
    # 0, 1 and the eager max (1000) eager; MTU-1, MTU, MTU+1, 1001 and 1 MiB by rendezvous
    assert r.ok(1, "sizes") == "ok sizes received and echoed 8 messages (3 eager, 5 rendezvous)"


def test_matching(run_nodes):
    r = ports(run_nodes, "match", 3)
    assert_clean(r, 3)
    assert r.ok(0, "match") == ("ok match unexpected (probe, source/channel/tag/mask, EMSGSIZE kept), posted-first "
                                "(4 receives), time limits, cancel, empty message")


def test_order_per_channel(run_nodes, C):
    """400 messages on 4 interleaved channels (eager and rendezvous mixed), received one
    channel at a time, last channel first: each channel in send order; most eager-sized
    messages find no credit left and go by rendezvous."""
    r = ports(run_nodes, "order", 2)
    assert_clean(r, 2)
    m = re.match(r"ok order sent 400 messages on 4 channels: (\d+) eager, (\d+) rendezvous \((\d+) for want of "
                 r"credit\)$", r.ok(1, "order"))
    assert m and int(m.group(1)) + int(m.group(2)) == 400 and int(m.group(3)) > 0, r.ok(1, "order")
    m = re.match(r"ok order 400 messages in order per channel, channels taken last to first; unexpected peak "
                 r"(\d+) bytes", r.ok(0, "order"))
    assert m and 0 < int(m.group(1)) <= window(C, C["PN_PORT_DEFAULT_EAGER_MAX"]), r.ok(0, "order")


def test_immediate_data_and_truncation(run_nodes):
    """pn_port_isendx's 32 bits of immediate data (in the receive's and a probe's status),
    PN_PORT_TRUNC receives (eager, multi-packet eager and rendezvous; unexpected and
    posted first): -EMSGSIZE with the message's length, the first cap bytes kept and not
    one byte more written, the message consumed (the next of its tag comes whole);
    pn_port_done without progress; bad flags give -EINVAL."""
    r = ports(run_nodes, "ext", 2)
    assert_clean(r, 2)
    assert r.ok(0, "ext") == ("ok ext immediate data (probe too), truncating receives (eager, multi-packet, "
                              "rendezvous; unexpected and posted first), pn_port_done")
    assert r.ok(1, "ext") == "ok ext sender"


def test_many_channels(run_nodes):
    r = ports(run_nodes, "channels", 2)
    assert_clean(r, 2)
    assert r.ok(0, "channels") == "ok channels 3001 channels, each message found on its channel"


def test_two_ports_per_node(run_nodes):
    """Two processes per node (contexts 1 and 2, the second forked), every port sending
    30 messages to every port and receiving from any: per-source order and content."""
    r = run_nodes([str(PORTS_TEST), "multi", "sw"], 2, "pt-multi", timeout=60)
    assert r.rc == 0 and not r.fails(), r.out
    oks = sorted(ln for lines in r.nodes.values() for ln in lines if ln.startswith("ok multi"))
    assert oks == [f"ok multi port {n}:{c} exchanged 30 messages with each of 4 ports" for n in (0, 1) for c in (1, 2)
                   ], r.out


@pytest.mark.parametrize("n", [2, 4, 8])
def test_all_to_all(run_nodes, n):
    r = ports(run_nodes, "all_to_all", n)
    assert_clean(r, n)
    for node in range(n):
        assert r.ok(node, "all_to_all") == (f"ok all_to_all {n} ports, 20 messages each way per pair (and to "
                                            f"itself), per-source order kept")


def test_flood_bounded_memory(run_nodes, C):
    """3000 eager-sized messages into a receiver that starts 100 ms late and pauses: the
    sender falls back to rendezvous when out of credit, the receiver's unexpected queue
    never holds more than the window, nothing is lost or reordered."""
    r = ports(run_nodes, "flood", 2)
    assert_clean(r, 2)
    m = re.match(r"ok flood sent 3000 eager-sized messages in \d+ ms: (\d+) eager, (\d+) by rendezvous",
                 r.ok(0, "flood"))
    assert m and int(m.group(1)) > 0 and int(m.group(2)) > 0, r.ok(0, "flood")
    m = re.match(r"ok flood received 3000 messages in order, unexpected queue peak (\d+) bytes <= window (\d+)",
                 r.ok(1, "flood"))
    assert m and 0 < int(m.group(1)) <= int(m.group(2)) == window(C, C["PN_PORT_DEFAULT_EAGER_MAX"]), \
        r.ok(1, "flood")


def test_flood_small_window(run_nodes):
    """The same with a 4 KiB window (PARANIC_EAGER_WINDOW) and a 1 KiB eager limit."""
    r = ports(run_nodes, "flood", 2, name="pt-flood-small", env={"PARANIC_EAGER_WINDOW": "4096",
                                                                   "PARANIC_EAGER_MAX": "1024"})
    assert_clean(r, 2)
    m = re.search(r"unexpected queue peak (\d+) bytes <= window 4096", r.ok(1, "flood"))
    assert m and int(m.group(1)) <= 4096, r.ok(1, "flood")


def test_bad_input_and_closed_ports(run_nodes):
    """Every bad argument gets its errno; a context nobody opened refuses after the
    timeout (-ECONNREFUSED); a port that closes under a waiting rendezvous send resets it
    (-ECONNRESET) at once; a live receiver that is slow to post keeps the sender waiting
    past the timeout without an error (it answers the pings)."""
    r = ports(run_nodes, "errors", 2, env={"PARANIC_PORT_TIMEOUT_MS": "300"})
    assert_clean(r, 2)
    line = [ln for ln in r.nodes[0] if ln.startswith("ok errors: a port that closed")][0]
    assert float(re.search(r"after ([\d.]+) ms", line).group(1)) < 300, line
    assert r.ok(0, "errors sender") == ("ok errors sender: bad arguments, registration, options, refused (300 ms), "
                                        "reset, slow receiver kept alive")


def test_forged_source(run_nodes):
    """A packet whose header names node 1 as its source, staged by node 2 with the ports
    wire format, arrives as node 2's: a receive from node 1 does not see it. Then node 2
    stages messages 3 (PIO), 5 (DMA, 3 packets), 2, 4 of its connection: the receiver
    holds 3 and 5 back and matches 2, 3, 4, 5 (what happens when PIO overtakes DMA)."""
    r = ports(run_nodes, "forge", 3)
    assert_clean(r, 3)
    assert r.ok(0, "forge").startswith("ok forge a forged source field was stamped over: the message came from "
                                       "node 2; node 1's own message came from node 1;")
    assert r.ok(0, "forge").endswith("4 messages sent out of order matched in order (2 held back)")


@pytest.mark.parametrize("respawn_ms,timeout_ms,want", [(2000, 200, "Connection timed out"),
                                                        (100, 2000, "Connection reset by peer")])
def test_killed_peer(run_nodes, respawn_ms, timeout_ms, want):
    """Node 1 is killed while it streams 64 MiB to node 2 (whose receive was matched and
    is half filled) and while node 0 waits for its CTS. Restarted late, the survivors'
    operations time out (no answer to their pings); restarted early, the new process's
    CONNECT resets them. Either way nothing hangs, and the new process talks to both."""
    r = ports(run_nodes, "kill", 3, name=f"pt-kill-{respawn_ms}",
              extra=["-f", "-k", "1:100:phase-kill", "-r", str(respawn_ms)],
              env={"PARANIC_PORT_TIMEOUT_MS": str(timeout_ms)})
    assert r.rc == 0 and not r.fails(), r.out
    assert f"launch: node 1 killed by signal 9, respawning in {respawn_ms} ms" in r.launch
    assert want in [ln for ln in r.nodes[0] if ln.startswith("ok kill node 0: the waiting")][0], r.out
    assert want in [ln for ln in r.nodes[2] if ln.startswith("ok kill node 2: the receive")][0], r.out
    assert "ok kill the new process on node 1 talked to both survivors" in r.nodes[1], r.out


def test_bench_rows(run_nodes, C):
    """The measuring program prints one JSON row per eager limit and size."""
    r = ports(run_nodes, "bench", 2, env={"PT_SIZES": "8,20000", "PT_EAGER": "0,default", "PT_ITERS": "0.02"})
    assert_clean(r, 2)
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    e = C["PN_PORT_DEFAULT_EAGER_MAX"]
    assert [(d["eager_max"], d["bytes"]) for d in rows] == [(0, 8), (0, 20000), (e, 8), (e, 20000)]
    assert all(d["latency_ns"] > 0 and d["MBps"] > 0 for d in rows), rows


@pytest.mark.slow
def test_huge(run_nodes):
    r = ports(run_nodes, "huge", 2, timeout=300)
    assert_clean(r, 2)
    assert r.ok(1, "huge").startswith("ok huge received 64 MiB and 20 MiB intact")


@pytest.mark.slow
@pytest.mark.parametrize("kill_ms", [0, 30, 300])
def test_killed_peer_moments(run_nodes, kill_ms):
    r = ports(run_nodes, "kill", 3, name=f"pt-killm-{kill_ms}",
              extra=["-f", "-k", f"1:{kill_ms}:phase-kill", "-r", "500"], env={"PARANIC_PORT_TIMEOUT_MS": "300"})
    assert r.rc == 0 and not r.fails(), r.out


@pytest.mark.slow
def test_stress(run_nodes):
    for case, n, env in (("all_to_all", 8, {"PT_MESSAGES": "200"}), ("flood", 2, {"PT_FLOOD": "50000"}),
                         ("channels", 2, {"PT_CHANNELS": "60000"}), ("multi", 4, {"PT_MESSAGES": "200"})):
        r = ports(run_nodes, case, n, name=f"pt-stress-{case}", env=env, timeout=300)
        assert r.rc == 0 and not r.fails(), r.out


# ---- Python bindings and property tests -----------------------------------------------------

@pytest.fixture(scope="module")
def three_ports(userlib_build):
    """Three ports in this process on a 2-node sw cluster: 0:1, 1:1 and 1:2."""
    from paranic import lib as L
    from paranic.ports import MAX_CHANNEL, Ports

    name = cluster_name(f"pytest-{os.getpid()}-ports-py")
    L.sw_cluster_destroy(name, missing_ok=True)
    ps = [Ports.open(backend="sw", cluster=name, node=n, nodes=2, ctx=c, eager_max=1000, eager_window=24000,
                     timeout_ms=5000) for n, c in ((0, 1), (1, 1), (1, 2))]
    # Connect every pair first (non-blocking: one thread drives all three ports; a
    # blocking first send would wait for a CONNECT answer nobody gives meanwhile).
    reqs = [p.isend(*ADDR[d], b"", channel=MAX_CHANNEL) for p in ps for d in range(3)]
    reqs += [p.irecv(channel=MAX_CHANNEL) for p in ps for _ in range(3)]
    pump(ps, reqs)
    yield ps
    for p in ps:
        p.close()
    L.sw_cluster_destroy(name, missing_ok=True)


def pattern(seed: int, n: int) -> bytes:
    x = (seed * 2654435761) & 0xFFFFFFFF
    return bytes(((x >> (i % 4 * 8)) + i // 4) & 0xFF for i in range(n))


def pump(ports_, reqs, limit=20000):
    """Progress every port until every request has completed."""
    for _ in range(limit):
        for p in ports_:
            p.progress()
        if all(r.test() for r in reqs):
            return
    raise AssertionError(f"{sum(not r.done for r in reqs)} of {len(reqs)} requests did not complete")


def test_bindings_basics(three_ports):
    from paranic.lib import PnError
    from paranic.ports import ANY, MAX_CHANNEL

    a, b, c = three_ports
    assert (a.node, a.ctx, b.node, b.ctx, c.node, c.ctx) == (0, 1, 1, 1, 1, 2)
    a.send(1, 2, b"to c", channel=5, tag=0x77)                 # eager: returns at once
    st = c.probe(src_node=0, channel=5)
    assert st is not None and (st.src_node, st.src_ctx, st.channel, st.tag, st.len) == (0, 1, 5, 0x77, 4)
    with pytest.raises(PnError) as e:
        c.recv(channel=5, cap=2)
    assert e.value.errno == errno.EMSGSIZE                       # it stays
    st, data = c.recv(src_node=0, src_ctx=1, channel=5, tag=0x70, mask=0xF0)
    assert data == b"to c" and st.tag == 0x77
    assert c.recv(channel=5, timeout_ns=0) is None
    big = pattern(3, 40000)                                      # rendezvous, to a receive posted later
    r = b.isend(0, 1, big, channel=1, tag=1)
    q = a.irecv(src_node=1, channel=1, cap=40000)
    pump(three_ports, [r, q])
    assert r.error == 0 and q.error == 0 and q.data == big and q.status.src_ctx == 1
    for bad in (lambda: a.send(2, 1, b"x"), lambda: a.send(0, 1, b"x", channel=-1),
                lambda: a.send(0, 1, b"x", channel=MAX_CHANNEL + 1), lambda: a.recv(src_node=-2, timeout_ns=0)):
        with pytest.raises(PnError) as e:
            bad()
        assert e.value.errno in (errno.EHOSTUNREACH, errno.EINVAL)
    with pytest.raises(TypeError):
        a.send(0, 1, "text")
    q = a.irecv(channel=99)
    assert q.cancel() and q.done
    assert a.stats()["unexpected_msgs"] == 0 and ANY == -1



@dataclass
class Msg:
    src: int
    dst: int
    chan: int
    cls: int
    size: int
    tag: int = 0
    seq: int = 0


SIZES = [0, 1, 7, 8, 100, 1023, 1024, 1025, 1500, 2000, 2047, 2048, 2049, 3000, 5000, 9000, 14000]


@st.composite
def schedules(draw):
    """Messages between the three ports, one receive per message, a posting mode per
    stream (source port, destination port, channel), and an interleaving of sends,
    receive postings and progress calls."""
    n = draw(st.integers(1, 24))
    msgs = [Msg(draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 2)), draw(st.integers(0, 3)),
                draw(st.one_of(st.sampled_from(SIZES), st.integers(0, 12000)))) for _ in range(n)]
    modes = {}
    for m in msgs:
        modes.setdefault((m.src, m.dst, m.chan), draw(st.sampled_from(["stream", "class", "exact"])))
    # wildcards per receive: which of source node/context/channel are ANY (the tag's bits
    # say the same, under the mask, so the match stays exact)
    wild = [draw(st.tuples(st.booleans(), st.booleans(), st.booleans())) for _ in msgs]
    extra = [draw(st.sampled_from([0, 0, 1, 100])) for _ in msgs]
    events = [("send", i) for i in range(n)] + [("post", i) for i in range(n)] + \
        [("progress", draw(st.integers(0, 2))) for _ in range(draw(st.integers(0, 2 * n)))]
    events = draw(st.permutations(events))
    eager = draw(st.sampled_from([0, 100, 1000, 2000, 5000, 16000]))
    return msgs, modes, wild, extra, events, eager


ADDR = ((0, 1), (1, 1), (1, 2))
EXAMPLE = itertools.count(1)


@settings(max_examples=int(os.environ.get("PT_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(schedules())
def test_property_matching_order_fragmentation(three_ports, sched):
    """Whatever the interleaving: the k-th receive posted for a stream (by any tag, by
    tag class under a mask, or by exact tag; with the source and channel given or
    wildcarded and pinned by tag bits instead) gets the k-th such message of the stream;
    all bytes arrive intact, every send completes, nothing is left queued."""
    msgs, modes, wild, extra, events, eager = sched
    ps = three_ports
    for p in ps:
        p.eager_max = eager
    epoch = next(EXAMPLE)   # tags of one example never match another's
    # tag: epoch | seq | source port | channel | class
    for i, m in enumerate(msgs):
        m.seq = i
        m.tag = (epoch << 40) | (i << 16) | (m.src << 12) | (m.chan << 8) | m.cls
    # the receive for message i, and which message it must get
    recvs = []   # (dst, src_node, src_ctx, chan, tag, mask, expected msg index, cap)
    by_stream_class: dict = {}
    for i in [i for kind, i in events if kind == "send"]:   # in the order they are sent
        m = msgs[i]
        mode = modes[(m.src, m.dst, m.chan)]
        key = (m.src, m.dst, m.chan) if mode == "stream" else (m.src, m.dst, m.chan, m.cls)
        by_stream_class.setdefault(key, []).append(i)
    nth: dict = {}
    for i, m in enumerate(msgs):
        mode = modes[(m.src, m.dst, m.chan)]
        if mode == "exact":
            key, tag, mask = (i,), m.tag, (1 << 64) - 1
        else:
            key = (m.src, m.dst, m.chan) if mode == "stream" else (m.src, m.dst, m.chan, m.cls)
            tag = (epoch << 40) | (m.src << 12) | (m.chan << 8) | m.cls
            mask = (0xFFFFFF << 40) | 0xF00 | 0xF000 | (0xFF if mode == "class" else 0)
        recvs.append([m.dst, key, tag, mask, m])
    # which receive gets which message: the k-th posted of a key gets the k-th message of it
    post_order = [i for kind, i in events if kind == "post"]
    expect = {}
    for j in post_order:
        dst, key, tag, mask, m = recvs[j]
        if len(key) == 1:
            expect[j] = key[0]
        else:
            k = nth.get(key, 0)
            nth[key] = k + 1
            expect[j] = by_stream_class[key][k]
    sreqs, rreqs = {}, {}
    payload = {i: pattern(i + epoch * 1000, m.size) for i, m in enumerate(msgs)}
    for kind, i in events:
        if kind == "send":
            m = msgs[i]
            sreqs[i] = ps[m.src].isend(*ADDR[m.dst], payload[i], channel=m.chan, tag=m.tag)
        elif kind == "post":
            dst, key, tag, mask, m = recvs[i]
            wn, wc, wch = wild[i]
            sn, sc = ADDR[msgs[expect[i]].src]
            rreqs[i] = ps[dst].irecv(src_node=-1 if wn else sn, src_ctx=-1 if wc else sc,
                                     channel=-1 if wch else m.chan, tag=tag, mask=mask,
                                     cap=msgs[expect[i]].size + extra[i])
        else:
            ps[i].progress()
    pump(ps, list(sreqs.values()) + list(rreqs.values()))
    for i, r in sreqs.items():
        assert r.error == 0, (i, r.error)
    for j, r in rreqs.items():
        want = msgs[expect[j]]
        assert r.error == 0, (j, r.error, r.status)
        s = r.status
        assert (s.src_node, s.src_ctx, s.channel, s.tag, s.len) == (*ADDR[want.src], want.chan, want.tag, want.size), \
            (j, s, want)
        assert r.data == payload[expect[j]], j
    for p in ps:
        assert p.probe() is None
        st_ = p.stats()
        assert st_["unexpected_msgs"] == 0 and st_["unexpected_bytes"] == 0 and st_["overrun"] == 0, st_


@settings(max_examples=int(os.environ.get("PT_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.sampled_from(SIZES)), min_size=1, max_size=30),
       st.integers(0, 30), st.sampled_from([0, 1000, 16000]))
def test_property_wildcard_receives_keep_order(three_ports, sends, posted_first, eager):
    """Port 0 receives everything with receives that match anything (any source, channel,
    tag), some posted before the sends and the rest after: for each (sender, channel),
    the receives posted earlier get the earlier messages."""
    ps = three_ports
    for p in ps:
        p.eager_max = eager
    posted_first = min(posted_first, len(sends))
    early = [ps[0].irecv(cap=14000) for _ in range(posted_first)]
    sreqs = []
    for i, (src, chan, size) in enumerate(sends):
        sreqs.append(ps[src].isend(0, 1, pattern(i, size), channel=chan, tag=i))
    late = [ps[0].irecv(cap=14000) for _ in range(len(sends) - posted_first)]
    rreqs = early + late
    pump(ps, sreqs + rreqs)
    last: dict = {}
    for r in rreqs:
        assert r.error == 0
        i = r.status.tag
        src, chan, size = sends[i]
        assert (r.status.src_node, r.status.src_ctx, r.status.channel) == (*ADDR[src], chan)
        assert r.data == pattern(i, size)
        assert last.get((src, chan), -1) < i, "a later message overtook an earlier one of the same stream"
        last[(src, chan)] = i
