"""Property tests of the socket emulation with an unmodified Python program (the
standard library's socket module; tests/userlib/sock_props_node.py) under
LD_PRELOAD=libparanic_sock.so between two sw nodes: hypothesis chooses how the client
cuts a TCP stream into writes and how the server reads it (the bytes must arrive
whole, in order, then EOF), and the sizes of UDP datagrams (each must arrive as one,
intact, boundaries kept)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paranic.launch import USERLIB_BUILD

from test_sock import node_addr

NODE = Path(__file__).with_name("sock_props_node.py")
SOCK_SO = USERLIB_BUILD / "libparanic_sock.so"
SETTINGS = settings(max_examples=6, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def run_pair(run_nodes, kind: str, sizes: list[int], reads: list[int], tmp: Path, name: str):
    ready = tmp / f"ready-{name}"
    ready.unlink(missing_ok=True)
    prog = ["env", f"LD_PRELOAD={SOCK_SO}", sys.executable, str(NODE), kind, node_addr(1), "7311",
            *map(str, sizes), "--", *map(str, reads)]
    r = run_nodes(prog, 2, name, timeout=90, env={"READY": str(ready)})
    assert r.rc == 0, r.out
    return r


@SETTINGS
@given(sizes=st.lists(st.integers(1, 200_000), min_size=1, max_size=12),
       reads=st.lists(st.integers(1, 70_000), min_size=1, max_size=6))
def test_tcp_stream_arrives_whole_in_order(run_nodes, tmp_path, sizes, reads) -> None:
    r = run_pair(run_nodes, "tcp", sizes, reads, tmp_path, "props-tcp")
    sent = re.search(r"client sent (\d+) sha (\w+)", "\n".join(r.nodes[0]))
    got = re.search(r"server got (\d+) eof=(\w+) sha (\w+)", "\n".join(r.nodes[1]))
    assert sent and got, r.out
    assert int(sent.group(1)) == int(got.group(1)) == sum(sizes), r.out
    assert got.group(2) == "True", r.out
    assert sent.group(2) == got.group(3), r.out


@SETTINGS
@given(sizes=st.lists(st.integers(0, 65507), min_size=1, max_size=10))
def test_udp_datagrams_keep_their_boundaries(run_nodes, tmp_path, sizes) -> None:
    r = run_pair(run_nodes, "udp", sizes, [], tmp_path, "props-udp")
    got = next((ln for ln in r.nodes[1] if ln.startswith("server dgrams")), None)
    assert got is not None, r.out
    assert got.split()[2:] == [str(n) for n in sizes], r.out   # all, in order, intact ("!" marks damage)
    assert any(ln == f"client sent {len(sizes)} answer done" for ln in r.nodes[0]), r.out
