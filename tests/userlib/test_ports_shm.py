"""The ports layer's intra-node path (userlib/src/ports_shm.c, docs/ports.md "Intra-node
path") on the `sw` backend: several processes per node (``pn_launch -p``), each with its
own port and context; userlib/tests/ports_shm_test.c.

Each case runs with the shared-memory path (the default) and with
``PARANIC_PORT_SHM=0`` (everything through the NIC); the program checks with the ports'
counters (``shm_msgs``, ``shm_recv_msgs``, ``shm_peers``) and the HAL's (packets sent
and received) which path the traffic took."""

from __future__ import annotations

import re

import pytest

from paranic.launch import TESTS

SHM_TEST = str(TESTS / "ports_shm_test")


def shm_run(run_nodes, case, nodes, ppn, shm, extra=None, env=None, timeout=120):
    e = {"PARANIC_PORT_SHM": "1" if shm else "0"}
    e.update(env or {})
    return run_nodes([SHM_TEST, case, "sw"], nodes, f"shm-{case}-{nodes}x{ppn}-{int(shm)}", timeout=timeout,
                     extra=extra, env=e, ppn=ppn)


def oks(r, case):
    return {k: [ln for ln in v if ln.startswith(f"ok {case}")] for k, v in r.procs.items()}


@pytest.mark.parametrize("shm", [True, False], ids=["shm", "nic"])
@pytest.mark.parametrize("ppn", [2, 4])
def test_local_traffic_takes_the_shm_path(run_nodes, ppn, shm):
    """Only intra-node traffic (eager, rendezvous, 2 MiB; 4 channels read in reverse
    order): content and per-channel order; with shm every message went through shared
    memory and not one packet through the NIC, without it none through shared memory."""
    r = shm_run(run_nodes, "local", 2, ppn, shm)
    assert r.rc == 0 and not r.fails(), r.out
    lines = oks(r, "local")
    assert sorted(lines) == [(n, l) for n in range(2) for l in range(ppn)], r.out
    for (n, l), ls in lines.items():
        assert len(ls) == 1, r.out
        m = re.search(r"ok local (\d+):(\d+) (\d+) messages .* via (shm|the NIC); NIC packets (\d+)", ls[0])
        assert m and int(m.group(1)) == n and int(m.group(2)) == 1 + l, ls[0]
        assert int(m.group(3)) == 24 * (ppn - 1), ls[0]
        if shm:
            assert m.group(4) == "shm" and int(m.group(5)) == 0, ls[0]
        else:
            assert m.group(4) == "the NIC" and int(m.group(5)) >= 24 * (ppn - 1), ls[0]


@pytest.mark.parametrize("shm", [True, False], ids=["shm", "nic"])
@pytest.mark.parametrize("nodes,ppn", [(2, 2), (2, 4), (3, 2)])
def test_all_to_all_mixed_paths(run_nodes, nodes, ppn, shm):
    """All-to-all over every process (itself too): 24 messages per pair, 0 .. 2 MiB, on
    4 channels received the last channel first from any source: per (source, channel)
    order and content; the shm counters equal the intra-node messages exactly, the
    inter-node ones went by the NIC (and with shm off, everything did)."""
    r = shm_run(run_nodes, "mix", nodes, ppn, shm, timeout=180)
    assert r.rc == 0 and not r.fails(), r.out
    total = nodes * ppn
    for (n, l), ls in oks(r, "mix").items():
        assert len(ls) == 1, r.out
        m = re.search(r"with (\d+) ports on 4 channels: (\d+) messages via shm, (\d+) via the NIC", ls[0])
        assert m and int(m.group(1)) == total, ls[0]
        local = 24 * (ppn - 1) if shm else 0
        assert int(m.group(2)) == local and int(m.group(3)) == 24 * total - local, ls[0]
    assert len(oks(r, "mix")) == total


def test_third_process_sees_nothing(run_nodes):
    """Ranks 0 and 1 of a node exchange 200 messages each way (eager, rendezvous, 1 MiB);
    rank 2 of the same node has a receive for anything posted and probes all the
    while: it gets only the two messages sent to it, and has mapped no ring between the
    other two (its /proc/self/maps)."""
    r = shm_run(run_nodes, "isolation", 1, 3, True)
    assert r.rc == 0 and not r.fails(), r.out
    line = oks(r, "isolation")[(0, 2)][0]
    m = re.search(r"got only the 2 messages for it \((\d+) probes meanwhile\), maps (\d+) rings, all its own", line)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) >= 2, line


@pytest.mark.parametrize("shm", [True, False], ids=["shm", "nic"])
def test_killed_same_node_peer(run_nodes, shm):
    """Rank 1 of node 0 streams 32 MiB to rank 0 (receive posted) and is killed half way
    while rank 2's rendezvous send waits for its CTS. Through shared memory the dead
    owner of the ring is seen at once: -ECONNRESET within a second although the
    liveness timeout is 20 s; through the NIC the pings time out (-ETIMEDOUT after 1.25
    x 1 s). The survivors then still talk to each other."""
    env = {"PARANIC_PORT_TIMEOUT_MS": "20000" if shm else "1000"}
    r = shm_run(run_nodes, "kill", 2, 3, shm, extra=["-k", "1:10:phase-kill"], env=env)
    assert "launch: node 1 killed by signal 9" in r.launch or "launch: process 1 killed by signal 9" in r.launch, r.out
    assert not r.fails(), r.out
    for l in (0, 2):
        line = oks(r, "kill")[(0, l)][0]
        m = re.search(r"ended with (.*) after (\d+) ms", line)
        assert m, line
        if shm:
            assert m.group(1) == "Connection reset by peer" and int(m.group(2)) < 1000, line
        else:
            assert m.group(1) == "Connection timed out" and 1000 <= int(m.group(2)) < 3000, line


def test_shm_bench_rows(run_nodes):
    """The measuring case: JSON rows for the intra-node peer (path shm) and the remote one."""
    import json

    for peer, path in (("local", "shm"), ("remote", "nic")):
        r = shm_run(run_nodes, "bench", 2, 2, True, env={"PT_PEER": peer, "PT_SIZES": "8,100000", "PT_ITERS": "0.01"})
        assert r.rc == 0 and not r.fails(), r.out
        rows = [json.loads(ln) for ln in r.procs[(0, 0)] if ln.startswith("{")]
        assert [d["bytes"] for d in rows] == [8, 100000] and all(d["path"] == path for d in rows), rows
        assert all(d["latency_ns"] > 0 and d["MBps"] > 0 for d in rows), rows
