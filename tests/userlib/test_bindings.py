"""The Python bindings (``paranic.lib``) on the ``sw`` backend: two or three nodes in
this process (threads where a call blocks) and, under ``pn_launch``, one Python process
per node (``python -m paranic.selftest``). Every sw cluster is removed at the end of its test."""

from __future__ import annotations

import array
import errno
import math
import os
import random
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from paranic.spec import protocol as P
from paranic.launch import cluster_name



@pytest.fixture(scope="module")
def L(userlib_build):
    """``paranic.lib``, imported after the session's build of libparanic."""
    from paranic import lib

    return lib


@pytest.fixture
def cluster(L, request, monkeypatch) -> str:
    """A fresh sw cluster name (none of the caller's PARANIC_* variables); its segment is
    removed at the end."""
    for k in list(os.environ):
        if k.startswith("PARANIC_"):
            monkeypatch.delenv(k)
    name = cluster_name(f"pytest-{os.getpid()}-bind-{request.node.name}")
    L.sw_cluster_destroy(name, missing_ok=True)
    yield name
    L.sw_cluster_destroy(name, missing_ok=True)
    assert not Path(f"/dev/shm/paranic-{name}").exists()


@pytest.fixture
def pair(L, cluster):
    """Node 0 and node 1 of a 2-node cluster, a context each (any free: 1)."""
    a = L.Hal.open(backend="sw", cluster=cluster, node=0, nodes=2)
    b = L.Hal.open(backend="sw", cluster=cluster, node=1, nodes=2)
    yield a, b
    a.close()
    b.close()


def data(n: int, seed: int = 0) -> bytes:
    return random.Random(n * 7919 + seed).randbytes(n)


class Thread(threading.Thread):
    """A thread whose exception is raised again by join()."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.fn, self.exc, self.result = fn, None, None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to join()
            self.exc = e

    def join(self, timeout: float | None = 30) -> Any:
        super().join(timeout)
        assert not self.is_alive(), "thread did not finish"
        if self.exc:
            raise self.exc
        return self.result


def recv_message(h, n_bytes: int, timeout_ns: int = 5_000_000_000):
    """Receive the packets of one message of n_bytes; returns (headers, payload)."""
    count = max(1, math.ceil(n_bytes / h.mtu))
    hdrs, body = [], b""
    for _ in range(count):
        got = h.recv(timeout_ns=timeout_ns)
        assert got is not None, "packet missing"
        hdrs.append(got[0])
        body += got[1]
    return hdrs, body


def deltas(after: dict[str, int], before: dict[str, int], *keys: str) -> tuple[int, ...]:
    return tuple(after[k] - before[k] for k in keys)


# ---- declarations and constants from the headers --------------------------------------------

def test_c_int_expressions():
    from paranic import cdef
    assert cdef._c_int("(1u << 30)") == 1 << 30
    assert cdef._c_int("(128u * 1024u)") == 128 * 1024
    assert cdef._c_int("(-1)") == -1
    assert cdef._c_int("0x3fULL") == 63
    assert cdef._c_int("0xffffffffffffffffULL") == (1 << 64) - 1
    for bad in ("", '"sw"', "foo(1)", "PN_X + 1", "(1 / 2)"):
        assert cdef._c_int(bad) is None, bad


def test_cdef_generated_and_cached(L, tmp_path, monkeypatch):
    """The cdef comes from the headers as they are, is cached by their contents, and a
    changed header gives a new cache entry."""
    from paranic import cdef as C
    inc = tmp_path / "include"
    shutil.copytree(C.INCLUDE, inc)
    hal_h = inc / "paranic" / "pn_hal.h"
    text = hal_h.read_text()
    marker = "const char *pn_strerror(int err);"
    assert marker in text
    hal_h.write_text(text.replace(marker, marker + "\nint pn_bindings_probe(uint64_t x);\n"
                                  "#define PN_BINDINGS_PROBE (3u << 4)"))
    cdef, defines, path = C.load_cdef(inc, tmp_path / "cache")
    assert "int pn_bindings_probe(uint64_t x);" in cdef and "#include" not in cdef
    assert defines["PN_BINDINGS_PROBE"] == 48 and defines["PN_ANY"] == L.ANY
    assert path.exists()

    def no_gcc(*a):
        raise AssertionError("cache not used")

    monkeypatch.setattr(C, "generate_cdef", no_gcc)
    assert C.load_cdef(inc, tmp_path / "cache") == (cdef, defines, path)
    hal_h.write_text(hal_h.read_text().replace("(3u << 4)", "(3u << 5)"))
    with pytest.raises(AssertionError, match="cache not used"):
        C.load_cdef(inc, tmp_path / "cache")
    # the module's own declarations: struct fields as the headers have them
    assert [f for f, _ in L.ffi.typeof("pn_header_t").fields] == list(L.Header.__dataclass_fields__)


def test_missing_library(L, tmp_path, monkeypatch):
    """A missing libparanic.so is built (once, under a lock); a failed build says why."""
    from paranic import clib
    so = tmp_path / "userlib" / "libparanic.so"
    monkeypatch.setattr(clib, "LIBRARY", so)
    monkeypatch.setattr(clib, "USERLIB_BUILD", so.parent)
    builds = []
    monkeypatch.setattr(clib, "build_userlib", lambda: builds.append(so.parent.mkdir()) or so.write_bytes(b""))
    assert clib._ensure_library() == so and clib._ensure_library() == so and len(builds) == 1
    so.unlink()

    def broken():
        raise clib.BuildError("make -C userlib failed:\nhal.c:1: error: expected ';'")

    monkeypatch.setattr(clib, "build_userlib", broken)
    with pytest.raises(L.LibraryError, match=r"(?s)libparanic.so is missing and building it failed: .*hal.c:1: error"):
        clib._ensure_library()


def test_constants_from_protocol(L):
    assert L.CONSTANTS["PN_TYPE_DATA"] == P.PacketType.DATA and L.PacketType is P.PacketType
    assert L.CONSTANTS["PN_FLAG_EOM"] == P.Flags.EOM and L.MAX_DMA_LENGTH == P.MAX_DMA_LENGTH
    # the generated pn_protocol.h agrees with paranic.spec.protocol wherever both define a value
    assert {k: v for k, v in L.DEFINES.items() if L.CONSTANTS[k] != v} == {}
    assert L.DEFINES["PN_RD_MAX_MSG"] == L.RD_MAX_MSG == 1 << 30
    assert (L.ANY, L.CTX_ANY, L.RD_CTX) == (L.DEFINES["PN_ANY"], L.DEFINES["PN_CTX_ANY"], 0)


# ---- opening, information -------------------------------------------------------------------

def test_info(L, cluster, monkeypatch):
    with L.Hal.open(backend="sw", cluster=cluster, node=1, nodes=3, ctx=5, contexts=8, mtu=512,
                    rx_slots=64) as h:
        assert (h.node_id, h.num_nodes, h.ctx_id, h.num_ctx, h.mtu, h.pio_max, h.backend) == \
            (1, 3, 5, 8, 512, 512, "sw")
        assert h.status()["rx_slots"] == 64
        with L.Hal.open(cluster=cluster, node=1) as any_ctx:          # shape of the existing cluster
            assert (any_ctx.ctx_id, any_ctx.num_nodes) == (1, 3)
        with pytest.raises(L.PnError) as e:
            L.Hal.open(cluster=cluster, node=1, ctx=5)
        assert e.value.errno == errno.EBUSY and "busy" in e.value.strerror
    L.sw_cluster_destroy(cluster)
    # everything from the environment, as pn_launch sets it
    for k, v in dict(PARANIC_CLUSTER=cluster, PARANIC_NODE="1", PARANIC_NODES="2", PARANIC_CTX="4").items():
        monkeypatch.setenv(k, v)
    with L.Hal.open() as h:
        assert (h.node_id, h.num_nodes, h.ctx_id, h.num_ctx, h.mtu, h.backend) == \
            (1, 2, 4, P.DEFAULT_CONTEXTS, P.DEFAULT_MTU, "sw")
        assert h.pio_max == min(P.DEFAULT_MTU, P.PIO_WINDOW_BYTES - P.HEADER_BYTES)
        assert "node 1/2 ctx 4" in repr(h)
    monkeypatch.delenv("PARANIC_CTX")
    with L.RawData.open() as rd:                                      # rawdata: its well-known context
        assert (rd.hal.node_id, rd.hal.ctx_id) == (1, L.RD_CTX)
    assert repr(h) == "<Hal closed>"


# ---- send and receive -----------------------------------------------------------------------

def test_pio_dma_auto(L, pair):
    a, b = pair
    mtu, thr = a.mtu, L.DEFAULT_PIO_THRESHOLD
    cases = [("pio", n) for n in (0, 1, 7, a.pio_max)] + \
            [("dma", n) for n in (0, 1, mtu, mtu + 1, 3 * mtu + 5)] + \
            [("auto", n) for n in (8, thr, thr + 1, 5000)]
    for i, (how, n) in enumerate(cases):
        tag = (0xA5 << 56) | (i << 8) | n % 256
        payload = data(n, i)
        s0 = a.status()
        {"pio": a.send_pio, "dma": a.send_dma, "auto": a.send}[how](1, b.ctx_id, tag, payload)
        a.tx_wait()
        s1 = a.status()
        by_pio = how == "pio" or (how == "auto" and n <= thr)
        assert deltas(s1, s0, "pio_done", "tx_done") == ((1, 0) if by_pio else (0, 1)), (how, n)
        hdrs, body = recv_message(b, n)
        assert body == payload, (how, n)
        for k, hd in enumerate(hdrs):
            assert (hd.dst_node, hd.src_node, hd.dst_ctx, hd.src_ctx, hd.type, hd.tag) == \
                (1, 0, b.ctx_id, a.ctx_id, P.PacketType.DATA, tag), (how, n, hd)
            assert (hd.som, hd.eom) == (k == 0, k == len(hdrs) - 1), (how, n, hd)
            assert hd.length == (len(body) - k * mtu if k == len(hdrs) - 1 else mtu), (how, n, hd)
    assert b.recv(timeout_ns=0) is None                              # nothing more came
    # the other direction, to itself, the largest tag, any bytes-like object
    b.send(0, a.ctx_id, (1 << 64) - 1, bytearray(b"from one"))
    b.send_pio(1, b.ctx_id, 3, memoryview(array.array("H", [1, 2, 3])))
    hd, body = a.recv(timeout_ns=10**9)
    assert (hd.src_node, hd.src_ctx, hd.tag, body) == (1, b.ctx_id, (1 << 64) - 1, b"from one")
    hd, body = b.recv(timeout_ns=10**9)
    assert (hd.src_node, hd.dst_node, hd.length, body) == (1, 1, 6, array.array("H", [1, 2, 3]).tobytes())


def test_send_dma_copies(L, pair):
    """send_dma sends from its own DMA buffer: the caller's buffer may change at once."""
    a, b = pair
    buf = bytearray(data(3000))
    a.send_dma(1, b.ctx_id, 1, buf)
    buf[:] = bytes(3000)
    a.send_dma(1, b.ctx_id, 2, buf)
    assert recv_message(b, 3000)[1] == data(3000)
    assert recv_message(b, 3000)[1] == bytes(3000)
    big = data(300_000)                                   # the buffer grows; 293 packets, more than
    t = Thread(lambda: recv_message(b, len(big)))         # b's 256-slot ring: b receives meanwhile
    a.send_dma(1, b.ctx_id, 3, big)
    assert a.status()["tx_pending"] == 0
    assert t.join()[1] == big


def test_recv_timeout(L, pair):
    a, b = pair
    t0 = time.monotonic()
    assert b.recv(timeout_ns=0) is None
    assert b.recv(timeout_ns=250_000_000) is None         # longer than one wait slice
    assert 0.25 <= time.monotonic() - t0 < 3
    a.send(1, b.ctx_id, 9, b"x")
    assert b.recv(timeout_ns=None)[1] == b"x"


# ---- rawdata --------------------------------------------------------------------------------

def test_rawdata_sizes(L, cluster):
    with L.RawData.open(cluster=cluster, node=0, nodes=2) as r0, \
            L.RawData.open(cluster=cluster, node=1, nodes=2) as r1:
        mtu = r0.hal.mtu
        sizes = [0, 1, mtu - 1, mtu, mtu + 1, 1 << 20]
        def sender():
            for n in sizes:
                r0.send(1, data(n, 1))
            r0.hal.tx_wait()          # sw: the sender's calls deliver the rest of the 1 MiB

        t = Thread(sender)            # 1 MiB is more than r1's ring holds
        for n in sizes:
            assert r1.recv(src=0, timeout_ns=20_000_000_000) == (0, data(n, 1)), n
        t.join()
        for n in sizes:                                   # to itself (its wait hook drains the ring)
            r1.send(1, data(n, 2))
            assert r1.recv(timeout_ns=20_000_000_000) == (1, data(n, 2)), n
        st = r1.stats()
        assert (st["recv_msgs"], st["recv_bytes"], st["sent_msgs"]) == (12, 2 * sum(sizes), 6)
        assert st["aborted"] == st["stray"] == st["foreign"] == 0


def test_rawdata_cap_peek_timeout(L, cluster):
    with L.RawData.open(cluster=cluster, node=0, nodes=2) as r0, \
            L.RawData.open(cluster=cluster, node=1, nodes=2) as r1:
        assert r1.recv(timeout_ns=10_000_000) is None and r1.peek() is None
        r0.send(1, data(5000))
        deadline = time.monotonic() + 10
        while r1.peek() is None and time.monotonic() < deadline:
            pass
        assert r1.peek() == r1.peek(0) == (0, 5000)
        with pytest.raises(L.PnError) as e:
            r1.recv(cap=100)
        assert e.value.errno == errno.EMSGSIZE and "5000 bytes from node 0" in str(e.value)
        assert r1.peek(0) == (0, 5000)                    # still queued
        assert r1.recv(cap=5000) == (0, data(5000))
        r0.send(1, data(70_000))                          # more than the first buffer, within cap
        assert r1.recv(cap=70_000, timeout_ns=10**9) == (0, data(70_000))
        r0.send(1, b"")
        assert r1.recv(src=0, cap=0, timeout_ns=10**9) == (0, b"")


def test_rawdata_from_given_node(L, cluster):
    rds = [L.RawData.open(cluster=cluster, node=i, nodes=3) for i in range(3)]
    try:
        for i in range(5):
            rds[1].send(0, b"one %d" % i)
        for i in range(5):
            rds[2].send(0, b"two %d" % i)
        assert [rds[0].recv(src=2, timeout_ns=10**9) for _ in range(5)] == [(2, b"two %d" % i) for i in range(5)]
        st = rds[0].stats()
        assert (st["queued_msgs"], st["recv_msgs"]) == (5, 5)          # node 1's waited meanwhile
        assert [rds[0].recv(timeout_ns=10**9) for _ in range(5)] == [(1, b"one %d" % i) for i in range(5)]
        assert rds[0].recv(src=1, timeout_ns=0) is None
    finally:
        for rd in rds:
            rd.close()


# ---- barrier, status ------------------------------------------------------------------------

def test_barrier(L, pair):
    a, b = pair
    s0 = a.status()["barrier_done"], b.status()["barrier_done"]
    for _ in range(3):
        entered = []

        def late():
            time.sleep(0.1)
            entered.append(time.monotonic())
            b.barrier()

        t = Thread(late)
        a.barrier()
        left = time.monotonic()
        t.join()
        assert entered and left >= entered[0]              # a waited for b
    assert (a.status()["barrier_done"] - s0[0], b.status()["barrier_done"] - s0[1]) == (3, 3)


def test_status_counters(L, pair):
    a, b = pair
    sa, sb = a.status(), b.status()
    a.send_pio(1, b.ctx_id, 0, b"0123456789")
    a.send_dma(1, b.ctx_id, 0, data(2000))
    a.progress()
    sa1, sb1 = a.status(), b.status()
    assert deltas(sa1, sa, "sent_packets", "sent_bytes", "pio_done", "tx_done", "errors") == (3, 2010, 1, 1, 0)
    assert deltas(sb1, sb, "rx_tail", "rx_fill") == (3, 3)
    recv_message(b, 10)
    recv_message(b, 2000)
    sb2 = b.status()
    assert deltas(sb2, sb, "recv_packets", "recv_bytes", "rx_fill") == (3, 2010, 0)
    assert a.now_ns() > 0 and a.cycles() > 0


# ---- errors ---------------------------------------------------------------------------------

def test_errors(L, pair, cluster):
    a, b = pair
    n0 = a.status()["refused"]

    def err(code: int, fn: Callable[[], Any]) -> L.PnError:
        with pytest.raises(L.PnError) as e:
            fn()
        assert e.value.errno == code, e.value
        return e.value

    e = err(errno.EHOSTUNREACH, lambda: a.send(2, 1, 0, b"x"))              # pn_hal.h: node >= nodes
    assert e.strerror == "pn_send: no such node" and isinstance(e, OSError)
    err(errno.EHOSTUNREACH, lambda: a.send_pio(4000, 1, 0, b""))
    err(errno.EINVAL, lambda: a.send_dma(1, a.num_ctx, 0, b"x"))             # ctx >= contexts
    err(errno.EMSGSIZE, lambda: a.send_pio(1, 1, 0, bytes(a.pio_max + 1)))   # oversize PIO
    err(errno.EMSGSIZE, lambda: a.send_dma(1, 1, 0, bytes(L.MAX_DMA_LENGTH + 1)))
    assert a.status()["refused"] - n0 == 5                                    # all counted by the HAL
    # Python input: EINVAL or TypeError, never an OverflowError; nothing reaches the HAL
    for bad in (lambda: a.send(-1, 1, 0, b""), lambda: a.send(1, -1, 0, b""), lambda: a.send(1 << 32, 1, 0, b""),
                lambda: a.send(1, 1, -1, b""), lambda: a.send(1, 1, 1 << 64, b""),
                lambda: a.sim_trace(-1, 0), lambda: a.recv(timeout_ns=1 << 70),
                lambda: L.Hal.open(cluster=cluster, node=-5), lambda: L.Hal.open(cluster=cluster, nodes=0),
                lambda: L.Hal.open(cluster=cluster, node=1 << 40), lambda: L.Hal.open(cluster=cluster, mtu=-1),
                lambda: L.Hal.open(cluster=cluster, node=2, nodes=2),            # C: node >= nodes
                lambda: L.Hal.open(cluster="a\0b"), lambda: L.Hal.open(cluster=cluster, ctx=-2)):
        err(errno.EINVAL, bad)
    assert a.status()["refused"] - n0 == 5
    for bad in (lambda: a.send("1", 1, 0, b""), lambda: a.send(1.0, 1, 0, b""), lambda: a.send(1, 1, 0, "text"),
                lambda: a.send(1, 1, 0, 5), lambda: a.recv(timeout_ns=0.5), lambda: L.Hal.open(cluster=3),
                lambda: L.Hal.open(cluster=cluster, node=True), lambda: L.Hal.open(cluster=cluster, bogus=1),
                lambda: L.Hal.open(bogus=None), lambda: L.RawData.attach("hal")):
        with pytest.raises(TypeError):
            bad()
    err(errno.ENOENT, lambda: L.Hal.open(backend="nope", cluster=cluster))
    err(errno.ENOTSUP, a.sim_info)
    err(errno.ENOTSUP, lambda: a.sim_trace(0, 0))
    with L.RawData.open(cluster=cluster, node=0, nodes=2) as rd:
        err(errno.EHOSTUNREACH, lambda: rd.send(9, b"x"))
        err(errno.EHOSTUNREACH, lambda: rd.recv(src=9, timeout_ns=0))
        err(errno.EHOSTUNREACH, lambda: rd.peek(2))
        err(errno.EINVAL, lambda: rd.recv(src=-2))
        err(errno.EINVAL, lambda: rd.recv(cap=-1))
    # nothing of it was delivered
    assert b.recv(timeout_ns=0) is None and a.recv(timeout_ns=0) is None


def test_closed_handles(L, cluster):
    h = L.Hal.open(cluster=cluster, node=0, nodes=2)
    rd = L.RawData.attach(h)
    assert rd.hal is h
    h.close()                                             # closes the attached RawData first
    assert h.closed and rd.closed
    h.close()                                             # idempotent
    calls = [lambda: h.node_id, lambda: h.backend, lambda: h.send(0, 1, 0, b""), lambda: h.send_dma(0, 1, 0, b"x"),
             lambda: h.recv(0), h.barrier, h.status, h.now_ns, h.cycles, h.progress, h.tx_wait, h.sim_info,
             lambda: rd.send(0, b""), lambda: rd.recv(timeout_ns=0), rd.peek, rd.stats, lambda: rd.hal,
             lambda: L.RawData.attach(h)]
    for call in calls:
        with pytest.raises(L.PnError) as e:
            call()
        assert e.value.errno == errno.EBADF and "closed" in str(e.value)
    rd.close()

    rd = L.RawData.open(cluster=cluster, node=0, nodes=2)
    own = rd.hal
    with pytest.raises(L.PnError) as e:
        own.close()                                       # the RawData's context
    assert e.value.errno == errno.EBUSY
    assert own.ctx_id == L.RD_CTX
    rd.close()
    with pytest.raises(L.PnError):
        own.ctx_id
    with L.RawData.open(cluster=cluster, node=0, nodes=2) as again:   # context 0 is free again
        assert again.hal.ctx_id == L.RD_CTX


def test_sw_cluster_destroy(L, cluster):
    L.Hal.open(cluster=cluster, nodes=2).close()
    seg = Path(f"/dev/shm/paranic-{cluster}")
    assert seg.exists()
    L.sw_cluster_destroy(cluster)
    assert not seg.exists()
    with pytest.raises(L.PnError) as e:
        L.sw_cluster_destroy(cluster)
    assert e.value.errno == errno.ENOENT
    L.sw_cluster_destroy(cluster, missing_ok=True)
    with pytest.raises(L.PnError) as e:
        L.sw_cluster_destroy("a/b")
    assert e.value.errno == errno.EINVAL


# ---- one process per node -------------------------------------------------------------------

def test_processes(L, run_nodes):
    """The bindings in the per-node-process setting of `paranic run`: pn_launch starts
    Python processes that only get PARANIC_* from the environment."""
    nodes = 3
    run = run_nodes([sys.executable, "-m", "paranic.selftest"], nodes, f"bindings{nodes}", timeout=60)
    assert run.rc == 0 and not run.fails(), run.out
    for n in range(nodes):
        line = run.ok(n, "bindings")
        peers = {p for p in range(nodes) if p != n}
        assert f"node={n} nodes={nodes} backend=sw" in line and "hal_ctx=1" in line, line
        assert all(f"{p}: " in line for p in peers), line


def test_forked_child_leaves_the_parents_contexts(L, cluster, pair):
    """A child of fork that closes an inherited handle does not free or close the
    parent's context (the parent still owns it: a new open of that context is refused,
    and the parent keeps sending and receiving on it)."""
    a, b = pair
    ctx = a.ctx_id
    pid = os.fork()
    if pid == 0:   # the child: close its copy, then exit without Python's clean-up
        try:
            a.close()
            b.close()
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with pytest.raises(L.PnError) as e:
        L.Hal.open(backend="sw", cluster=cluster, node=0, nodes=2, ctx=ctx).close()
    assert e.value.errno == errno.EBUSY
    a.send(1, b.ctx_id, 0x77, b"still mine")
    hdrs, payload = recv_message(b, 10)
    assert bytes(payload) == b"still mine" and hdrs[0].src_node == 0 and hdrs[0].src_ctx == ctx


def test_rawdata_deadline(L, cluster, monkeypatch):
    """A receiver that never reads: the sender's send makes no progress and fails at the
    deadline with ETIMEDOUT (sw: no links to report DOWN) instead of waiting for ever;
    the close that abandons the stuck send says so too. Bad deadlines are refused."""
    with L.RawData.open(cluster=cluster, node=0, nodes=2, rx_slots=16) as r0, \
            L.RawData.open(cluster=cluster, node=1, nodes=2, rx_slots=16) as r1:
        with pytest.raises(L.PnError):
            r0.set_timeout(-1)
        r0.set_timeout(300)
        t0 = time.monotonic()
        with pytest.raises(L.PnError) as e:
            for _ in range(8):
                r0.send(1, data(1 << 20, 3))
        assert e.value.errno == errno.ETIMEDOUT, e.value
        assert time.monotonic() - t0 < 20
        assert r0.stats()["timeouts"] == 1
        with pytest.raises(L.PnError) as e:
            r0.close()
        assert e.value.errno == errno.ETIMEDOUT
        assert r1.stats()["recv_msgs"] == 0
    monkeypatch.setenv("PARANIC_RD_TIMEOUT_MS", "soon")
    with pytest.raises(L.PnError) as e:
        L.RawData.open(cluster=cluster, node=0, nodes=2)
    assert e.value.errno == errno.EINVAL
