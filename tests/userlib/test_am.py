"""Active messages and RMA (userlib/src/am_*.c, pn_am.h, docs/am.md) on the `sw` backend.

The C program userlib/tests/am_test.c under pn_launch, one process per node: request
and reply ping-pong with payloads 0 .. max, window flow control against a slow
receiver, all-to-all, bad input (unknown handlers, sizes, RMA keys, bounds and
permissions), put/get integrity at sizes and offsets hypothesis picks, a get from
three nodes into one buffer, withdrawing a region under a transfer, BCL's normal
channel (a rendezvous into a posted receive), a peer killed mid-transfer, and the
bench rows.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paranic.paths import TREE as ROOT
from paranic.launch import TESTS, USERLIB_BUILD

AM_TEST = TESTS / "am_test"


def am(run_nodes, case, n, *args, name=None, extra=None, env=None, timeout=60):
    return run_nodes([str(AM_TEST), case, "sw", *args], n, name or f"am-{case}-{n}", timeout=timeout, extra=extra,
                     env=env)


def assert_clean(r, n):
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0", r.out
    assert sorted(r.nodes) == list(range(n)), r.out


@pytest.fixture(scope="module")
def C(userlib_build) -> dict[str, int]:
    """pn_am.h's constants (read from the header, as paranic.lib does for the others)."""
    text = (ROOT / "userlib/include/paranic/pn_am.h").read_text()
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"#define (PN_\w+) (\d+)\b", text)}


def test_header_stands_alone_and_exports(userlib_build, tmp_path):
    """pn_am.h compiles on its own in C11 and C++17; the library exports the API."""
    src = tmp_path / "a.c"
    src.write_text("#include <paranic/pn_am.h>\nint main(void) { return pn_am_close(0) == -22 ? 0 : 1; }\n")
    inc = str(ROOT / "userlib/include")
    for cc, std in (("gcc", "-std=c11"), ("g++", "-std=c++17")):
        r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", "-I", inc, "-x", "c" if cc == "gcc" else "c++",
                            str(src), "-o", str(tmp_path / "a"), "-L", str(USERLIB_BUILD),
                            f"-Wl,-rpath,{USERLIB_BUILD}", "-lparanic"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert subprocess.run([str(tmp_path / "a")]).returncode == 0
    syms = subprocess.run(["nm", "-D", "--defined-only", str(USERLIB_BUILD / "libparanic.so")],
                          capture_output=True, text=True).stdout
    for fn in ("pn_am_open", "pn_am_close", "pn_am_register", "pn_am_request", "pn_am_reply", "pn_am_poll",
               "pn_am_flush", "pn_am_barrier", "pn_am_stats", "pn_rma_register", "pn_rma_deregister",
               "pn_rma_put", "pn_rma_get", "pn_rma_test", "pn_rma_wait", "pn_rma_flush", "pn_rma_fence"):
        assert f" {fn}\n" in syms, fn


@pytest.mark.parametrize("max_payload", [None, 300000])
def test_pingpong(run_nodes, C, max_payload):
    """Requests with payload 0 .. max to the peer and to itself, each answered by a
    reply carrying the payload back; both nodes at once. With a max above 64 KiB the
    long messages take the receiver's slow path (longer than its posted buffer)."""
    env = {"PARANIC_AM_MAX_PAYLOAD": str(max_payload)} if max_payload else None
    r = am(run_nodes, "pingpong", 2, name=f"am-pp-{max_payload}", env=env)
    assert_clean(r, 2)
    mx = max_payload or C["PN_AM_DEFAULT_MAX_PAYLOAD"]
    for n in (0, 1):
        assert r.ok(n, "pingpong") == (f"ok pingpong 90 requests and replies, 15 sizes 0 .. {mx}, to node {1 - n} "
                                       "and to itself")


@pytest.mark.parametrize("window", [16, 3])
def test_window_slow_receiver(run_nodes, window):
    """2000 requests into a receiver that starts 100 ms late, polls every 0.5 ms and
    takes 0.2 ms per handler: the sender waits for the window (most requests do), never
    has more than `window` outstanding, the receiver's queue never holds more than the
    window, nothing is lost or reordered, every third request gets its reply."""
    r = am(run_nodes, "window", 2, name=f"am-window-{window}", env={"AT_WINDOW": str(window)})
    assert_clean(r, 2)
    m = re.match(rf"ok window sender: 2000 requests, (\d+) waited for the window \((\d+) ms of (\d+)\), peak "
                 rf"outstanding {window} = window {window}, 667 replies$", r.ok(0, "window"))
    assert m and int(m.group(1)) > 1000 and int(m.group(2)) > 100, r.ok(0, "window")
    m = re.match(rf"ok window receiver: 2000 requests in order and intact, at most (\d+) queued \(window {window}\), "
                 r"no overrun$", r.ok(1, "window"))
    assert m and int(m.group(1)) <= window + 2, r.ok(1, "window")


@pytest.mark.parametrize("window", [16, 2])
def test_all_to_all(run_nodes, window):
    """4 nodes, 300 requests from every node to every node (itself too), payloads up to
    3000 bytes, every second one replied: all handled, per-source order kept."""
    r = am(run_nodes, "all_to_all", 4, name=f"am-a2a-{window}", env={"AT_WINDOW": str(window)})
    assert_clean(r, 4)
    for n in range(4):
        m = re.match(rf"ok all_to_all 4 nodes x 300 requests each way per pair, per-source order kept; window "
                     rf"{window}, peak (\d+), (\d+) waits$", r.ok(n, "all_to_all"))
        assert m and int(m.group(1)) == window, r.ok(n, "all_to_all")


@pytest.mark.parametrize("n", [2, 3])
def test_errors(run_nodes, n):
    """Argument errors at the call (-EMSGSIZE, -EINVAL, -EHOSTUNREACH); an unknown handler
    at the receiver (and an unknown reply handler) reach the requester's error callback
    as -ENOENT with the request's first argument, and the receiver stays healthy; RMA
    against a read-only, a write-only and a read-write region: -EACCES, -EFAULT for bad
    keys, offsets beyond the end, wrapping offsets, inline and rendezvous puts alike,
    the target's memory untouched; implicit operations report through flush and the
    callback; a withdrawn key fails with -EFAULT."""
    r = am(run_nodes, "errors", n, name=f"am-errors-{n}")
    assert_clean(r, n)
    for node in range(n):
        r.ok(node, "errors")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.one_of(st.integers(0, 70000), st.sampled_from([0, 1, 16383, 16384, 16385, 1 << 20])),
                          st.integers(0, 5000)), min_size=1, max_size=8))
def test_rma_integrity(run_nodes, ops):
    """Put then get back at sizes (across the inline limit and the ports eager limit)
    and offsets hypothesis picks, every node into its successor's region at once: the
    data read back equals what was put, and the target finds the last put at each place."""
    args = [f"{s}:{o}" for s, o in ops]
    r = am(run_nodes, "rma", 2, *args, name="am-rma")
    assert_clean(r, 2)
    total = sum(s for s, _ in ops)
    assert r.ok(0, "rma").startswith(f"ok rma {len(ops)} puts and gets intact ({total} bytes)"), r.out


def test_gather_from_three(run_nodes):
    """Node 0 gets 1 MiB and 64 bytes from each of nodes 1, 2, 3, all six at once, into
    one buffer."""
    r = am(run_nodes, "gather", 4)
    assert_clean(r, 4)
    assert r.ok(0, "gather") == "ok gather node 0 got 1048640 bytes from each of nodes 1, 2, 3 into one buffer at once"


def test_deregister_in_flight(run_nodes):
    """The target withdraws a region while an 8 MiB put moves into it: the call waits
    for the transfer, the put completes intact, later operations on the key fail."""
    r = am(run_nodes, "dereg", 2)
    assert_clean(r, 2)
    assert r.ok(1, "dereg") == "ok dereg withdrew the region while 8388608 bytes moved in: waited for them, all there"
    r.ok(0, "dereg")


def test_normal_channel_posted_receive(run_nodes):
    """BCL's normal channel: 1 MiB from registered memory by rendezvous into a receive
    posted first; the receiver's unexpected queue never held a byte of it."""
    r = am(run_nodes, "channel", 2)
    assert_clean(r, 2)
    assert r.ok(1, "channel") == "ok channel 1048576 bytes into the posted buffer, nothing queued (unexpected peak 0)"


@pytest.mark.parametrize("respawn_ms,timeout_ms", [(500, 300), (100, 2000)])
def test_killed_peer(run_nodes, respawn_ms, timeout_ms):
    """Node 1 is killed while it streams a 64 MiB get to node 0, with a window of
    requests to it outstanding and one more waiting for a slot: the get, the 16 requests
    (error callback) and the waiting call all end with an error, within about the
    timeout. Restarted late: no answer to the pings (-ETIMEDOUT); early: the new process
    answers a PING with a count that shows the requests were lost (-ECONNRESET; the
    get's half-filled receive may time out in the ports layer first). Then node 0 talks
    to the new process."""
    r = am(run_nodes, "kill", 2, name=f"am-kill-{respawn_ms}",
           extra=["-f", "-k", "1:100:phase-kill", "-r", str(respawn_ms)],
           env={"PARANIC_PORT_TIMEOUT_MS": str(timeout_ms)})
    assert r.rc == 0 and not r.fails(), r.out
    m = re.match(r"ok kill node 0: the get ended with (.+), 16 outstanding requests with (.+), the request beyond "
                 r"the window returned (.+), after (\d+) ms$", r.ok(0, "kill node 0: the get"))
    errs = {"Connection timed out", "Connection reset by peer"}
    assert m and {m.group(1), m.group(2), m.group(3)} <= errs, r.out
    assert int(m.group(4)) < 3 * timeout_ms, r.out
    assert "ok kill node 0 talked to the new process" in r.nodes[0], r.out
    assert "ok kill the new process answered node 0" in r.nodes[1], r.out


def test_bench_rows(run_nodes):
    r = am(run_nodes, "bench", 2, env={"AT_SIZES": "8,20000", "AT_ITERS": "0.05"})
    assert_clean(r, 2)
    rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    assert [d["bytes"] for d in rows] == [8, 20000]
    assert all(d["latency_ns"] > 0 and d["put_MBps"] > 0 for d in rows)
