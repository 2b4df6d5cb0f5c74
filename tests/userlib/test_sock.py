"""The socket emulation libparanic_sock.so (userlib/sock, docs/sockets.md) on the `sw`
backend: unmodified socket programs under LD_PRELOAD, two nodes per job (one process
each, or two with pn_launch -p 2).

* userlib/sock/tests/sock_test_*.c, plain sockets programs, under pn_launch: echo of
  1 .. 1 MiB + 1 bytes through a wildcard listener, many connections, EOF/EPIPE/SIGPIPE
  and dup, non-blocking connect/read/write with poll and select, the OS's TCP on
  127.0.0.1 beside cluster connections in one process (and in one poll set), refusal and
  a connection to the node's own address, a killed peer (ECONNRESET), a process
  outside a job (everything the OS's); UDP (boundaries, truncation, peek, non-blocking,
  poll/select, connect, INADDR_ANY serving the cluster and the OS), epoll over mixed sets,
  fork and exec, a cluster UDP socket shared by parent and child over fork (fork_udp);
  2 nodes x 2 processes connecting to each other and exchanging datagrams.
* Debian's NPtcp (NetPIPE) and iperf3 between two nodes under `paranic run --backend sw
  --nodes 2`: NPtcp's integrity check up to 1 MiB and a measuring run whose result file
  must have its rows; iperf3 with a byte count, both directions, and in UDP mode.
* The same library on the simulated ring:4 (`paranic run --backend sim`, which starts the
  cached simulator): sock_test's cross and udp cases, NPtcp's integrity check up to 16 KiB,
  and iperf3 (8 MiB).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paranic.launch import TESTS, USERLIB_BUILD, clean_env, cluster_name

SOCK_SO = USERLIB_BUILD / "libparanic_sock.so"
# The socket test programs (userlib/sock/tests/sock_test_*.c, one per concern) and their cases.
SOCK_TEST_CASES = {
    "tcp": ("echo", "many", "eof", "nonblock", "mixed", "refused", "noport", "cross", "reset", "os"),
    "udp": ("udp",),
    "ppn": ("ppn", "reclaim"),
    "epoll": ("epoll",),
    "fork": ("fork", "fork_udp"),
}
SOCK_TEST = {case: TESTS / f"sock_test_{prog}" for prog, cases in SOCK_TEST_CASES.items() for case in cases}
PARANIC = [sys.executable, "-m", "paranic.cli"]


def preloaded(case: str) -> list[str]:
    """The command that runs a sock_test case (its program) with the library preloaded."""
    return ["env", f"LD_PRELOAD={SOCK_SO}", str(SOCK_TEST[case]), case]


def node_addr(node: int) -> str:
    """The cluster address of a node, as the library computes it (sock_wire.h); every
    sock_test program answers `addr NODE`."""
    r = subprocess.run([str(SOCK_TEST["echo"]), "addr", str(node)], capture_output=True, text=True,
                       env=clean_env())
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def assert_both_ok(r, case: str) -> None:
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0", r.out
    r.ok(0, case)
    r.ok(1, case)


# ---- the library ------------------------------------------------------------------------------

def test_library_exports_the_socket_calls_only(userlib_build):
    """The preloaded library exports the interposed calls (and pn_sock_fd_kind); libparanic's
    own symbols, linked in, stay hidden; it needs nothing but libc."""
    syms = set(subprocess.run(["nm", "-D", "--defined-only", str(SOCK_SO)], capture_output=True, text=True,
                              check=True).stdout.split())
    for fn in ("socket", "bind", "listen", "accept", "accept4", "connect", "read", "write", "readv", "writev",
               "recv", "send", "recvfrom", "sendto", "recvmsg", "sendmsg", "close", "shutdown", "getsockname",
               "getpeername", "getsockopt", "setsockopt", "fcntl", "fcntl64", "ioctl", "poll", "ppoll", "select",
               "pselect", "dup", "dup2", "dup3", "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait",
               "epoll_pwait", "pn_sock_fd_kind", "pn_sock_stat"):
        assert fn in syms, fn
    assert not [s for s in syms if s.startswith("pn_") and s not in ("pn_sock_fd_kind", "pn_sock_stat",
                                                                     "pn_sock_now_ns")], \
        "libparanic symbols exported"
    needed = subprocess.run(["readelf", "-d", str(SOCK_SO)], capture_output=True, text=True, check=True).stdout
    assert "libparanic.so" not in needed


# ---- the C test program --------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["echo", "many", "eof", "nonblock", "mixed", "refused", "cross", "udp", "epoll",
                                  "fork", "fork_udp"])
def test_cases(run_nodes, case):
    """Two nodes, node 1 serving, node 0 the client (each sock_test_*.c says what its cases check)."""
    r = run_nodes(preloaded(case), 2, f"sock-{case}", timeout=40)
    assert_both_ok(r, case)
    if case == "many":
        assert "open=64 sequential=200" in r.ok(0, "many") and "accepted=264" in r.ok(1, "many")
    if case == "nonblock":
        assert int(r.ok(0, "nonblock").split("eagain=")[1]) > 0


def test_two_nodes_two_processes_each(run_nodes):
    """pn_launch -n 2 -p 2: every process opens its own port (any free context) and puts its
    listener and its UDP socket in its node's directory; each connects to the three other
    processes' listeners (the same port numbers on both nodes; intra-node included), sends
    100 KB checked byte for byte, then sends 30 datagrams (0 .. 65507 bytes) to each, all
    checked (source, length, content, order). Both processes of a node bind one port (TCP
    and UDP) on their cluster address: of each protocol exactly one gets it, the other
    EADDRINUSE (the two protocols' port spaces are separate, so the two binds race apart:
    one process may win TCP and the other UDP)."""
    r = run_nodes(preloaded("ppn"), 2, "sock-ppn", timeout=60, ppn=2)
    assert r.rc == 0 and not r.fails(), r.out
    assert sorted(r.procs) == [(0, 0), (0, 1), (1, 0), (1, 1)], r.out
    for (node, local), lines in r.procs.items():
        assert any(ln.startswith("ok ppn") and "connections=6 datagrams=90" in ln for ln in lines), r.out
    for node in (0, 1):
        binds = [dict(kv.split("=") for kv in ln.split()[1:])
                 for (n, _), lines in r.procs.items() if n == node for ln in lines if ln.startswith("bind19")]
        assert len(binds) == 2, r.out
        for proto in ("tcp", "udp"):
            assert sorted(b[proto] for b in binds) == ["EADDRINUSE", "ok"], (proto, r.out)


def test_dead_owner_is_reclaimed(run_nodes):
    """One node, two processes: process 0 binds a UDP port on the cluster address and is
    killed (SIGKILL, no close). Process 1 gets EADDRINUSE while it lives; after its death a
    datagram to the port is dropped and counted (the dead owner's entry is ignored), and
    process 1 binds the port (the entry is reclaimed) and receives on it."""
    r = run_nodes(preloaded("reclaim"), 1, "sock-reclaim", timeout=30, extra=[], ppn=2)
    assert "ok reclaim" in r.procs.get((0, 1), []), r.out
    assert not r.fails(), r.out


def test_directory_segments_are_removed(run_nodes):
    """The per-node directories (/dev/shm/paranic-CLUSTER.sock.N) go with the last process of
    the node (checked with pn_launch --keep, which leaves the cluster's own segment), and
    pn_launch removes what a killed process left."""
    def dirs(cluster: str) -> list[str]:   # only this test's clusters: others may run beside it
        return [f for f in os.listdir("/dev/shm") if f.startswith(f"paranic-{cluster}.sock.")]

    cluster = cluster_name(f"pytest-{os.getpid()}-sock-dirs")
    cluster2 = cluster_name(f"pytest-{os.getpid()}-sock-dirs2")
    assert dirs(cluster) == dirs(cluster2) == []
    r = run_nodes(preloaded("udp"), 2, "sock-dirs", timeout=30, extra=["--keep"])
    assert_both_ok(r, "udp")
    assert os.path.exists(f"/dev/shm/paranic-{cluster}")   # kept: --keep works
    os.unlink(f"/dev/shm/paranic-{cluster}")
    assert dirs(cluster) == []
    r = run_nodes(preloaded("reset"), 2, "sock-dirs2", timeout=30)
    assert "launch: node 1 killed by signal 9" in r.out, r.out
    assert dirs(cluster2) == []


def test_nobody_there_refuses(run_nodes):
    """A node whose process opens no socket (no directory, no port): connect ends with
    ECONNREFUSED at once (the node's directory has no entry), not after the ports layer's
    connect timeout (300 ms here)."""
    r = run_nodes(preloaded("noport"), 2, "sock-noport", timeout=30, env={"PARANIC_PORT_TIMEOUT_MS": "300"})
    assert_both_ok(r, "noport")
    assert float(r.ok(0, "noport").split("ms=")[1]) < 200, r.out


def test_killed_peer_resets(run_nodes):
    """Node 1 kills itself (SIGKILL) while node 0 waits in read: the read ends with ECONNRESET
    (the peer's pid is gone: checked every 100 ms, reset 400 ms after), not a hang."""
    r = run_nodes(preloaded("reset"), 2, "sock-reset", timeout=30, extra=[])
    line = r.ok(0, "reset client")
    assert "launch: node 1 killed by signal 9" in r.out, r.out
    assert float(line.split("ms=")[1]) < 2000, line


def test_outside_a_job_everything_is_the_os(userlib_build):
    """Without PARANIC_NODE/PARANIC_NODES the library passes every call to libc: a 127.0.0.1
    exchange works and no socket is tracked; no cluster segment appears."""
    before = set(os.listdir("/dev/shm"))
    r = subprocess.run(preloaded("os"), capture_output=True, text=True, env=clean_env(), timeout=30)
    assert r.returncode == 0 and "ok os" in r.stdout, r.stdout + r.stderr
    # the segments a process outside a job would name (other test workers make their own)
    assert not [f for f in set(os.listdir("/dev/shm")) - before if f.startswith("paranic-default")]


# ---- Debian's programs under paranic run -----------------------------------------------------------

def paranic_run(script: str, tmp_path: Path, timeout: int = 90, backend: str = "sw") -> subprocess.CompletedProcess:
    """`paranic run --backend BACKEND --nodes 2 -- sh SCRIPT` in tmp_path (the script picks each
    node's part). On sim, `paranic run` starts the cached ring:4 simulator (building it first if
    the gateware changed: hence the generous limit)."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    return subprocess.run([*PARANIC, "run", "--backend", backend, "--nodes", "2", "--timeout", str(timeout), "--",
                           "sh", str(path)], capture_output=True, text=True, cwd=tmp_path, env=clean_env(),
                          timeout=timeout + 330)


def two_nodes(server: str, client: str) -> str:
    """Node 1 runs the server, node 0 the client; both with the library preloaded. The client
    waits up to 10 s for the server's listener (PARANIC_SOCK_CONNECT_WAIT_MS)."""
    so = shlex.quote(str(SOCK_SO))
    return (f'if [ "$PARANIC_NODE" = 1 ]; then exec env LD_PRELOAD={so} {server}\n'
            f'else exec env LD_PRELOAD={so} PARANIC_SOCK_CONNECT_WAIT_MS=10000 {client}; fi\n')


def need(program: str, package: str) -> None:
    if shutil.which(program) is None:
        pytest.skip(f"{program} is not installed (Debian package {package}: scripts/deps.sh installs it)")


def test_nptcp_integrity_and_rows(userlib_build, tmp_path):
    """NPtcp between two nodes: the integrity check (-i: every message's content verified by
    NetPIPE) for sizes up to 1 MiB, then a short measuring run whose output file has a row per
    size with a positive rate and time."""
    need("NPtcp", "netpipe-tcp")
    peer = node_addr(1)
    port = 20000 + os.getpid() % 20000   # NPtcp also listens on the OS's wildcard address
    r = paranic_run(two_nodes(f"NPtcp -P {port} -i -u 1048576", f"NPtcp -P {port} -h {peer} -i -u 1048576"),
                    tmp_path)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    checks = [ln for ln in r.stdout.splitlines() if ln.startswith("0:") and "-->" in ln]
    assert len(checks) >= 30 and all(ln.endswith("Integrity check passed") for ln in checks), out
    assert any(" 786433 bytes" in ln for ln in checks), out   # the largest size below 1 MiB

    result = tmp_path / "np.out"
    r = paranic_run(two_nodes(f"NPtcp -P {port} -u 65536 -p 0 -n 50",
                              f"NPtcp -P {port} -h {peer} -u 65536 -p 0 -n 50 -o {result}"), tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = [[float(x) for x in ln.split()] for ln in result.read_text().splitlines() if ln.strip()]
    sizes = [int(row[0]) for row in rows]
    assert len(rows) >= 20 and sizes[0] == 1 and sizes[-1] == 65536 and sizes == sorted(set(sizes)), rows
    assert all(len(row) == 3 and row[1] > 0 and 0 < row[2] < 0.01 for row in rows), rows


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_iperf3(userlib_build, tmp_path, reverse):
    """iperf3 (one-off server on node 1, client on node 0) sends 256 MiB over a data
    connection beside its control connection, client to server or (-R) back, and reports.
    The sender sends that (iperf3 may add one block); the receiver counts what it read before the sender's
    TEST_END made it close the stream: all but at most the sender's send buffer (set to
    256 KiB here) and one 128 KiB block, as over TCP, where iperf3's receiver also drops
    what is still in flight at the end."""
    need("iperf3", "iperf3")
    total, sndbuf, block = 256 << 20, 256 << 10, 128 << 10
    port = 20000 + os.getpid() % 20000
    report = tmp_path / "iperf.json"
    client = f"iperf3 -c {node_addr(1)} -p {port} -n {total} -J {'-R' if reverse else ''} --logfile {report}"
    r = paranic_run(two_nodes(f"env PARANIC_SOCK_SNDBUF={sndbuf} iperf3 -s -1 -p {port}",
                              f"env PARANIC_SOCK_SNDBUF={sndbuf} {client}"), tmp_path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + (report.read_text() if report.exists() else "")
    end = json.loads(report.read_text())["end"]
    sent, received = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
    # iperf3 checks -n between its blocks and may send one block more (seen on a loaded machine)
    assert total <= sent <= total + block and sent - sndbuf - block <= received <= sent, end
    assert end["sum_received"]["bits_per_second"] > 1e8, end
    stream = json.loads(report.read_text())["start"]["connected"][0]
    assert stream["remote_host"] == node_addr(1) and stream["local_host"] == node_addr(0), stream


def test_iperf3_udp(userlib_build, tmp_path):
    """iperf3 -u (one-off server on node 1, client on node 0): 20 MB of 1400-byte datagrams
    at 200 Mbit/s from client to server over ports (its control connection beside); iperf3's
    server binds its next listener on the port while the connected one is open
    (SO_REUSEADDR: both in the directory's one entry). Every datagram arrives, none lost.
    The server's receive queue (PARANIC_SOCK_RCVBUF) holds the whole transfer: with the
    default 4 MiB a server left without a CPU for ~160 ms on a loaded machine drops
    datagrams beyond it (`udp_full`), as UDP may; the test is about the transport."""
    need("iperf3", "iperf3")
    total = 20 * 1000 * 1400
    port = 20000 + os.getpid() % 20000 + 7
    report = tmp_path / "iperf.json"
    client = f"iperf3 -c {node_addr(1)} -p {port} -u -b 200M -l 1400 -n {total} -J --logfile {report}"
    r = paranic_run(two_nodes(f"PARANIC_SOCK_RCVBUF={2 * total} iperf3 -s -1 -p {port}", client), tmp_path, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr + (report.read_text() if report.exists() else "")
    data = json.loads(report.read_text())
    end = data["end"]["sum"]
    assert end["bytes"] >= total and end["lost_packets"] == 0 and end["packets"] >= total // 1400, end
    stream = data["start"]["connected"][0]
    assert stream["remote_host"] == node_addr(1) and stream["remote_port"] == port, stream


def test_on_the_simulator(userlib_build, tmp_path):
    """The unchanged library over the sim backend (the Verilator cluster, ring:4): 4 MiB
    written both ways before either side reads, sock_test's UDP case (boundaries 0 .. 65507
    bytes, truncation, peek, non-blocking, poll/select, connect, the OS side of a wildcard
    socket), then NPtcp's integrity check up to 16 KiB (16 packets of the default MTU; up to 1 MiB
    on the sw backend above, in a fraction of the time). The peers' pids are checked on sim too (one
    host)."""
    need("NPtcp", "netpipe-tcp")
    port = 20000 + os.getpid() % 20000
    so = shlex.quote(str(SOCK_SO))
    script = (f"env LD_PRELOAD={so} {SOCK_TEST['cross']} cross || exit 1\n"
              f"env LD_PRELOAD={so} {SOCK_TEST['udp']} udp || exit 1\n"
              + two_nodes(f"NPtcp -P {port} -i -u 16384", f"NPtcp -P {port} -h {node_addr(1)} -i -u 16384"))
    r = paranic_run(script, tmp_path, timeout=300, backend="sim")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "0: ok cross client" in r.stdout and "1: ok cross server" in r.stdout, out
    assert "0: ok udp client" in r.stdout and "1: ok udp server" in r.stdout, out
    checks = [ln for ln in r.stdout.splitlines() if ln.startswith("0:") and "-->" in ln]
    assert len(checks) >= 20 and all(ln.endswith("Integrity check passed") for ln in checks), out


def test_iperf3_on_the_simulator(userlib_build, tmp_path):
    """Unmodified iperf3 between two nodes of the simulated ring:4 (sim backend): 2 MiB
    from client to server over a ParaNIC connection beside iperf3's control connection;
    the sender sends it all, the receiver reads all but what iperf3 itself drops at the
    end (as over TCP), and both ends are cluster addresses."""
    need("iperf3", "iperf3")
    total, sndbuf, block = 2 << 20, 256 << 10, 128 << 10   # 8 sndbufs; test_iperf3 (sw) sends more
    port = 20000 + os.getpid() % 20000 + 11
    report = tmp_path / "iperf.json"
    client = f"iperf3 -c {node_addr(1)} -p {port} -n {total} -J --logfile {report}"
    r = paranic_run(two_nodes(f"env PARANIC_SOCK_SNDBUF={sndbuf} iperf3 -s -1 -p {port}",
                              f"env PARANIC_SOCK_SNDBUF={sndbuf} {client}"), tmp_path, timeout=300, backend="sim")
    assert r.returncode == 0, r.stdout + r.stderr + (report.read_text() if report.exists() else "")
    data = json.loads(report.read_text())
    end = data["end"]
    sent, received = end["sum_sent"]["bytes"], end["sum_received"]["bytes"]
    assert total <= sent <= total + block and sent - sndbuf - block <= received <= sent, end
    stream = data["start"]["connected"][0]
    assert stream["remote_host"] == node_addr(1) and stream["local_host"] == node_addr(0), stream
