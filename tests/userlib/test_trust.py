"""Shared segments, sockets and run directories are ours or refused; paranicd's limits
(docs/reliability.md, "Shared segments, sockets and run directories" and "paranicd:
limits and timeouts").

These run as any user: what another user could plant is played by a file of ours
with the wrong mode. tests/userlib/test_multiuser.py does it with two real users."""

from __future__ import annotations

import ctypes
import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flood import flood

from paranic import daemon as PD
from paranic import lib
from paranic.launch import USERLIB, USERLIB_BUILD, cluster_name
from paranic.paths import LIBRARY

# struct sw_shm_hdr (userlib/src/hal_sw.h): offsets of the layout fields a corrupted
# segment could carry.
HDR = {"nodes": (16, "I"), "contexts": (20, "I"), "mtu": (24, "I"), "rx_slots": (28, "I"),
       "tx_entries": (32, "I"), "slot_bytes": (36, "I"), "total_bytes": (40, "Q"), "node_off": (48, "Q"),
       "ctx_off": (56, "Q"), "ctx_stride": (64, "Q"), "page_off": (80, "Q"), "txr_off": (88, "Q"),
       "rxr_off": (96, "Q")}


def _name(tag: str) -> str:
    return cluster_name(f"trust-{os.getpid()}-{tag}")


def _shm(cluster: str) -> Path:
    return Path("/dev/shm") / f"paranic-{cluster}"


@pytest.fixture
def no_daemon_env(monkeypatch):
    """pn_open in this process as a user's process would: paranicd's variables unset."""
    for k in ("PARANIC_DAEMON", "PARANIC_DAEMON_SOCKET", "PARANIC_DAEMON_DIR", "PARANIC_CLUSTER",
              "PARANIC_NODE", "PARANIC_NODES", "PARANIC_BACKEND", "PARANIC_CTX"):
        monkeypatch.delenv(k, raising=False)


def _open_errno(**kw) -> int:
    try:
        with lib.Hal.open(**kw):
            return 0
    except lib.PnError as e:
        return e.errno


# ---- row 2: a segment open to others is never attached ----------------------------------------

def test_segment_open_to_others_is_refused(userlib_build, no_daemon_env):
    """A /dev/shm/paranic-<cluster> that others may read or write (as another user's
    planted one is) is refused with EACCES and left alone; ours (0600) is attached."""
    c = _name("mode")
    p = _shm(c)
    fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.fchmod(fd, 0o666)
        os.ftruncate(fd, 4096)
        assert _open_errno(backend="sw", cluster=c) == errno.EACCES
        assert p.exists()   # not ours to remove
        os.fchmod(fd, 0o644)
        assert _open_errno(backend="sw", cluster=c) == errno.EACCES
    finally:
        os.close(fd)
        p.unlink()
    with lib.Hal.open(backend="sw", cluster=c, nodes=2) as h:
        assert h.num_nodes == 2
        assert p.stat().st_mode & 0o777 == 0o600
    lib.sw_cluster_destroy(c)


# ---- row 3: every layout field is checked before use -----------------------------------------

_CORRUPT_CHILD = r"""
import os, struct, sys
from paranic import lib
path, cluster = sys.argv[1], sys.argv[2]
cases = [(a.split("=")[0], int(a.split("=")[1], 0)) for a in sys.argv[3:]]
HDR = %r
orig = open(path, "rb").read(4096)
for field, value in cases:
    off, fmt = HDR[field]
    with open(path, "r+b") as f:
        f.write(orig)
        f.seek(off)
        f.write(struct.pack("<" + fmt, value))
    pid = os.fork()
    if pid == 0:
        try:
            with lib.Hal.open(backend="sw", cluster=cluster) as h:
                os._exit(100 + min(h.num_nodes, 100))
        except lib.PnError as e:
            os._exit(e.errno)
    _, st = os.waitpid(pid, 0)
    how = "signal %%d" %% os.WTERMSIG(st) if os.WIFSIGNALED(st) else "exit %%d" %% os.WEXITSTATUS(st)
    print(field, value, how, flush=True)
with open(path, "r+b") as f:
    f.write(orig)
""" % (HDR,)


def test_corrupt_layout_fields_are_refused(userlib_build, no_daemon_env):
    """One layout field of a sw segment corrupted at a time, then pn_open (in a child:
    main crashed here with SIGSEGV/SIGBUS or accepted nodes=4000): every one is refused
    with EBADMSG, and the intact segment opens again afterwards."""
    c = _name("corrupt")
    with lib.Hal.open(backend="sw", cluster=c, nodes=2):
        pass
    size = _shm(c).stat().st_size
    # (main: the offsets crashed the opener, nodes=4000 and contexts=65 were accepted, and a
    # wrong total replaced the segment: it goes last)
    cases = {"ctx_stride": 1 << 36, "rxr_off": size - 4096, "node_off": 1 << 40, "ctx_off": size,
             "page_off": size, "txr_off": 1 << 33, "nodes": 4000, "nodes ": 0, "contexts": 65, "mtu": 12,
             "rx_slots": 3, "tx_entries": 1 << 20, "slot_bytes": 16, "total_bytes": size * 2}
    args = [f"{k.strip()}={v}" for k, v in cases.items()]
    r = subprocess.run([sys.executable, "-c", _CORRUPT_CHILD, str(_shm(c)), c, *args], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    got = [ln.split(" ", 2) for ln in r.stdout.splitlines()]
    assert len(got) == len(cases), r.stdout + r.stderr
    bad = [g for g in got if g[2] != f"exit {errno.EBADMSG}"]
    assert not bad, f"not refused with EBADMSG: {bad}"
    with lib.Hal.open(backend="sw", cluster=c) as h:   # the restored header is fine again
        assert h.num_nodes == 2
    lib.sw_cluster_destroy(c)


# ---- row 11: a failed pn_open leaves no segment ----------------------------------------------

@pytest.mark.parametrize("kw", [{"node": 1}, {"node": 5, "nodes": 2}, {"node": 0, "ctx": 99}],
                         ids=["node-past-default", "node-past-nodes", "ctx-past-contexts"])
def test_failed_open_leaves_no_segment(userlib_build, no_daemon_env, kw):
    c = _name("fail")
    assert not _shm(c).exists()
    assert _open_errno(backend="sw", cluster=c, **kw) == errno.EINVAL
    assert not _shm(c).exists(), "a failed pn_open left its new segment behind"


def test_failed_open_keeps_a_segment_in_use(userlib_build, no_daemon_env):
    """The clean-up only removes a segment the failed call made: someone else's stays."""
    c = _name("keep")
    with lib.Hal.open(backend="sw", cluster=c, nodes=2) as h:
        assert _open_errno(backend="sw", cluster=c, node=2) == errno.EINVAL
        assert _shm(c).exists() and h.num_nodes == 2
    assert _shm(c).exists()
    lib.sw_cluster_destroy(c)


# ---- row 5: paranicd's run directory ----------------------------------------------------------

def _last_reason() -> str:
    """pn_daemon_last_reason() of this thread (the library the bindings loaded)."""
    f = ctypes.CDLL(str(LIBRARY)).pn_daemon_last_reason
    f.restype = ctypes.c_char_p
    return f().decode()


def _sock(cluster: str, node: int = 0) -> Path:
    return Path("/tmp") / f"paranic-{cluster}" / f"node{node}.sock"


def test_run_directory_without_socket_is_an_error(userlib_build, no_daemon_env):
    """A daemon refuses this uid (--allow-uid); its socket removed, or the daemon killed
    (a stale socket): pn_open used to skip the checks and succeed; now it fails with
    ENOTCONN and says why, until the run directory is gone."""
    c = _name("nosock")
    d = PD.Daemons.start(c, 1, args=["--hello-ms", "100", "--down-ms", "600", "--allow-uid", "12345"])
    try:
        assert _open_errno(backend="sw", cluster=c) == errno.EACCES   # the daemon's check
        _sock(c).unlink()
        assert _open_errno(backend="sw", cluster=c) == errno.ENOTCONN
        assert "has no socket for node 0" in _last_reason()
    finally:
        d.stop()
    assert not _sock(c).parent.exists()
    assert _open_errno(backend="sw", cluster=c) == 0   # no run directory: development mode
    c2 = _name("stale")
    d = PD.Daemons.start(c2, 1, args=["--hello-ms", "100", "--down-ms", "600", "--allow-uid", "12345"])
    try:
        d.kill(0)   # SIGKILL: the socket stays, nobody answers
        assert _sock(c2).exists()
        assert _open_errno(backend="sw", cluster=c2) == errno.ENOTCONN
    finally:
        d.stop()
        _sock(c2).unlink(missing_ok=True)
        _sock(c2).parent.rmdir()
    lib.sw_cluster_destroy(c)


def test_run_directory_writable_by_others_is_refused(userlib_build, no_daemon_env, tmp_path):
    """A run directory others can write into (as one another user made would be): the
    daemon refuses to start in it, and pn_open refuses it (EACCES) instead of taking it
    for 'no daemon'."""
    c = _name("rundir")
    run = _sock(c).parent
    run.mkdir()
    try:
        run.chmod(0o777)
        with pytest.raises(PD.DaemonError, match="run directory .* another user's or writable by others"):
            PD.Daemons.start(c, 1, wait=5)
        assert _open_errno(backend="sw", cluster=c) == errno.EACCES
        run.chmod(0o755)
        target = tmp_path / "elsewhere"
        target.mkdir()
        run.rmdir()
        run.symlink_to(target)   # a symlink is never followed
        with pytest.raises(PD.DaemonError, match="symbolic link"):
            PD.Daemons.start(c, 1, wait=5)
        assert _open_errno(backend="sw", cluster=c) == errno.EACCES
    finally:
        if run.is_symlink():
            run.unlink()
        elif run.exists():
            run.rmdir()
        lib.sw_cluster_destroy(c, missing_ok=True)


# ---- row 4: idle connections cannot lock out pn_open ------------------------------------------

def test_idle_connections_do_not_lock_out_pn_open(userlib_build, no_daemon_env):
    """1100 idle connections to paranicd (more than its 1024 table): pn_open still
    attaches (main: -ENOTCONN); the connections beyond the uid's limit were shed and the
    rest are closed after --idle-ms."""
    c = _name("flood")
    d = PD.Daemons.start(c, 1, args=["--hello-ms", "100", "--down-ms", "600", "--idle-ms", "1500"])
    try:
        socks = flood(_sock(c), 1100)
        try:
            time.sleep(0.3)
            with lib.Hal.open(backend="sw", cluster=c) as h:
                assert h.ctx_id == 1
                assert [p["pid"] for p in PD.procs(c, 0)] == [os.getpid()]
            time.sleep(2.5)   # > idle-ms: every idle connection was closed by the daemon
            closed = 0
            for s in socks:
                s.setblocking(False)
                try:
                    closed += s.recv(1) == b""
                except (BlockingIOError, ConnectionResetError):
                    closed += 0
            assert closed == len(socks)
        finally:
            for s in socks:
                s.close()
        log = d.log(0)
        assert "connections closed by the limits" in log and "over a uid's 32" in log, log
    finally:
        d.stop()


# ---- row 14: files of killed socket processes and of paranic-rsh -----------------------------

def test_paranic_run_leaves_no_socket_directory_or_pvm_tmp(userlib_build):
    """Under `paranic run` a socket program binds (the node's directory segment appears)
    and is SIGKILLed, and paranic-rsh runs a command on node 1 (its PVM_TMP appears);
    when the run ends neither is left."""
    c = _name("r14")
    so = USERLIB_BUILD / "libparanic_sock.so"
    rsh = USERLIB / "sock/pvm/paranic-rsh"
    py = ("import socket,os; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('0.0.0.0', 5000)); "
          "os.kill(os.getpid(), 9)")
    script = (f"env LD_PRELOAD={so} {sys.executable} -c \"{py}\"; "
              f"ls /dev/shm/paranic-{c}.sock.$PARANIC_NODE && {rsh} pn-node1 true && "
              f"ls -d /tmp/paranic-pvm-{c}/node1")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    r = subprocess.run([sys.executable, "-m", "paranic.cli", "run", "--nodes", "2", "--cluster", c, "--",
                        "sh", "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"/dev/shm/paranic-{c}.sock.1" in r.stdout and f"/tmp/paranic-pvm-{c}/node1" in r.stdout, r.stdout
    left = [f for f in os.listdir("/dev/shm") if f.startswith(f"paranic-{c}")]
    assert left == [], left
    assert not os.path.exists(f"/tmp/paranic-pvm-{c}")


def test_rsh_refuses_a_pvm_base_writable_by_others(userlib_build, tmp_path):
    base = tmp_path / "pvm"
    base.mkdir()
    base.chmod(0o777)
    env = dict(os.environ, PARANIC_NODES="2", PARANIC_NODE="0", PARANIC_PVM_TMP=str(base))
    r = subprocess.run([str(USERLIB / "sock/pvm/paranic-rsh"), "pn-node1", "true"], capture_output=True,
                       text=True, env=env, timeout=30)
    assert r.returncode == 2 and "writable by others" in r.stderr, r.stderr
    assert not (base / "node1").exists()
