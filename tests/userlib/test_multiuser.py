"""Two users on one host (docs/reliability.md "Shared segments,
sockets and run directories"): root and `nobody` (setpriv --reuid nobody --regid nogroup
--clear-groups). Neither can read, forge or deny service to the other's contexts,
segments, daemon or sockets, on `sw` and on `sim`:

* a sw cluster segment made by one user is refused by the other (EACCES), whoever
  came first; the other user can neither open nor remove it;
* a socket directory segment planted by the other user is not used (bind fails);
* a daemon's run directory made by the other user is refused by paranicd and by
  pn_open; the other user cannot remove a daemon's socket;
* 1100 idle connections of one user to the other's paranicd do not stop the other's
  pn_open (the per-uid limit);
* a simulator's socket refuses the other user (owner-only mode and SO_PEERCRED), and pn_open
  refuses a simulator run by the other user (it would see our memory).

Runs only as root (it needs a second user)."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from flood import flood

from paranic import daemon as PD
from paranic import lib
from paranic.launch import USERLIB_BUILD, cluster_name

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="the two-user test needs root (to switch to nobody with setpriv)")

NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
NOBODY_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PARANIC_DAEMON": "auto"}


def _name(tag: str) -> str:
    return cluster_name(f"mu-{os.getpid()}-{tag}")


def as_nobody(code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> str:
    """Run Python code as nobody; its stdout (it must exit 0)."""
    r = subprocess.run([*NOBODY, sys.executable, "-c", code, *args], capture_output=True, text=True,
                       env=dict(NOBODY_ENV, **(env or {})), timeout=timeout, cwd="/tmp")
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


OPEN_ERRNO = """
import sys
from paranic import lib
try:
    with lib.Hal.open(**eval(sys.argv[1])) as h:
        print("open", 0, h.ctx_id)
except lib.PnError as e:
    print("open", e.errno, -1)
"""

FLOOD = """
import resource, socket, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
socks = []
for _ in range(int(sys.argv[2])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    socks.append(s)
print("flooding", len(socks), flush=True)
sys.stdin.read()
"""


def nobody_open(env: dict[str, str] | None = None, **kw) -> tuple[int, int]:
    out = as_nobody(OPEN_ERRNO, repr(kw), env=env).split()
    return int(out[1]), int(out[2])


def root_open(**kw) -> int:
    try:
        with lib.Hal.open(**kw):
            return 0
    except lib.PnError as e:
        return e.errno


@pytest.fixture
def clean_env(monkeypatch, userlib_build):
    for k in list(os.environ):
        if k.startswith("PARANIC_"):
            monkeypatch.delenv(k)
    try:
        as_nobody("from paranic import lib; lib.Hal")
    except AssertionError as e:
        pytest.skip(f"nobody cannot run this tree's Python and library: {e}")


def _flood_as_nobody(path: Path, n: int) -> subprocess.Popen:
    p = subprocess.Popen([*NOBODY, sys.executable, "-c", FLOOD, str(path), str(n)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=NOBODY_ENV, cwd="/tmp")
    assert p.stdout.readline().split() == ["flooding", str(n)]
    return p


# ---- sw segments ---------------------------------------------------------------------------------

def test_sw_segments_of_the_other_user(clean_env):
    # nobody came first: root never attaches to (and so never talks through) nobody's segment
    c1 = _name("seg1")
    seg1 = Path(f"/dev/shm/paranic-{c1}")
    assert nobody_open(backend="sw", cluster=c1, nodes=2)[0] == 0
    try:
        assert seg1.stat().st_uid == 65534
        assert root_open(backend="sw", cluster=c1, nodes=2) == errno.EACCES
        assert root_open(backend="sw", cluster=c1) == errno.EACCES
        assert seg1.stat().st_uid == 65534   # refused, not replaced
    finally:
        seg1.unlink()
    # root came first: nobody can neither open, read nor remove it
    c2 = _name("seg2")
    with lib.Hal.open(backend="sw", cluster=c2, nodes=2) as h:
        assert nobody_open(backend="sw", cluster=c2, nodes=2)[0] == errno.EACCES
        out = as_nobody("import os, sys\n"
                        "for f in (lambda: open(sys.argv[1], 'rb'), lambda: os.unlink(sys.argv[1])):\n"
                        "    try:\n        f(); print('allowed')\n"
                        "    except PermissionError:\n        print('denied')\n", f"/dev/shm/paranic-{c2}")
        assert out.split() == ["denied", "denied"]
        assert h.ctx_id == 1
    lib.sw_cluster_destroy(c2)


def test_socket_directory_planted_by_the_other_user(clean_env):
    """nobody plants the node's socket directory segment, open to all: root's bind to
    its cluster address does not use it (fails) and writes nothing into it."""
    c = _name("skdir")
    planted = Path(f"/dev/shm/paranic-{c}.sock.0")
    as_nobody("import os, sys\nfd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)\n"
              "os.fchmod(fd, 0o666); os.ftruncate(fd, 1 << 16)\n", str(planted))
    try:
        code = ("import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                "try:\n    s.bind(('10.77.0.1', 5000)); print('bound')\n"
                "except OSError as e:\n    print('refused', e.errno)\n")
        env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(USERLIB_BUILD / "libparanic_sock.so"),
               "PARANIC_CLUSTER": c, "PARANIC_NODE": "0", "PARANIC_NODES": "1", "PARANIC_BACKEND": "sw",
               "PARANIC_DAEMON": "off"}
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert r.stdout.startswith("refused"), r.stdout + r.stderr
        assert planted.read_bytes() == bytes(1 << 16)   # nothing of root's went into it
    finally:
        planted.unlink(missing_ok=True)
        lib.sw_cluster_destroy(c, missing_ok=True)


# ---- paranicd ------------------------------------------------------------------------------------

def test_run_directory_of_the_other_user(clean_env):
    c = _name("rundir")
    run = Path(f"/tmp/paranic-{c}")
    as_nobody("import os, sys; os.mkdir(sys.argv[1], 0o755)", str(run))
    try:
        with pytest.raises(PD.DaemonError, match="another user's"):
            PD.Daemons.start(c, 1, wait=5)
        assert root_open(backend="sw", cluster=c) == errno.EACCES   # not "no daemon"
    finally:
        run.rmdir()
        lib.sw_cluster_destroy(c, missing_ok=True)


def test_daemons_of_two_users(clean_env):
    """Each user's paranicd: the other user's 1100 idle connections do not lock out the
    owner's pn_open; the other user cannot remove the daemon's socket."""
    ca = _name("droot")
    d = PD.Daemons.start(ca, 1, args=["--hello-ms", "100", "--down-ms", "600"])
    sock_a = Path(f"/tmp/paranic-{ca}/node0.sock")
    try:
        flooder = _flood_as_nobody(sock_a, 1100)
        try:
            with lib.Hal.open(backend="sw", cluster=ca) as h:
                assert h.ctx_id == 1
                assert [p["uid"] for p in PD.procs(ca, 0)] == [0]
            out = as_nobody("import os, sys\ntry:\n    os.unlink(sys.argv[1]); print('removed')\n"
                            "except PermissionError:\n    print('denied')\n", str(sock_a))
            assert out.strip() == "denied" and sock_a.exists()
        finally:
            flooder.stdin.close()
            flooder.wait(10)
        assert "over a uid's 32" in d.log(0)
    finally:
        d.stop()

    cb = _name("dnobody")
    log = open(f"/tmp/paranicd-{cb}.log", "w")
    daemon = subprocess.Popen([*NOBODY, str(PD.DAEMON), "--cluster", cb, "--node", "0", "--nodes", "1",
                               "--hello-ms", "100", "--down-ms", "600"], stdout=log, stderr=subprocess.STDOUT,
                              env=NOBODY_ENV, cwd="/tmp")
    sock_b = Path(f"/tmp/paranic-{cb}/node0.sock")
    try:
        t_end = time.monotonic() + 20
        while not sock_b.exists():
            assert daemon.poll() is None and time.monotonic() < t_end, open(log.name).read()
            time.sleep(0.05)
        assert sock_b.parent.stat().st_uid == 65534
        socks = flood(sock_b, 1100)   # root's flood
        try:
            assert nobody_open(backend="sw", cluster=cb) == (0, 1)
        finally:
            for s in socks:
                s.close()
        # root's own pn_open refuses nobody's cluster (segment) and daemon (run directory)
        assert root_open(backend="sw", cluster=cb) == errno.EACCES
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(10)
        log.close()
        os.unlink(log.name)
        Path(f"/dev/shm/paranic-{cb}").unlink(missing_ok=True)


# ---- sim -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sim_exe():
    from paranic.sim import build
    return build.build("ring:4", quiet=True)


def test_simulators_of_two_users(clean_env, sim_exe, monkeypatch):
    from paranic.sim import run as simrun

    base = Path(f"/tmp/{_name('sim')}")
    mine, theirs = base / "root", base / "nobody"
    base.mkdir(mode=0o755)
    mine.mkdir(mode=0o755)
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)
    sim = None
    other = None
    try:
        # root's simulator: nobody's pn_open and raw connect are refused by the socket's mode
        sim = simrun.start("ring:4", socket=mine / "sim.sock", quiet_build=True)
        assert (mine / "sim.sock").stat().st_mode & 0o077 == 0   # owner only
        assert nobody_open(env={"PARANIC_SIM_SOCKET": str(mine / "sim.sock")}, backend="sim",
                           node=0)[0] == errno.EACCES
        monkeypatch.setenv("PARANIC_SIM_SOCKET", str(mine / "sim.sock"))
        assert root_open(backend="sim", node=0) == 0
        # nobody's simulator: root's pn_open refuses it (SO_PEERCRED): it would see root's memory
        other = subprocess.Popen([*NOBODY, str(sim_exe), "--socket", str(theirs / "sim.sock"), "--ready-file",
                                  str(theirs / "ready"), "--ber-threshold", "0"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.STDOUT, env=NOBODY_ENV, cwd="/tmp")
        t_end = time.monotonic() + 60
        while not (theirs / "ready").exists():
            assert other.poll() is None and time.monotonic() < t_end
            time.sleep(0.05)
        assert nobody_open(env={"PARANIC_SIM_SOCKET": str(theirs / "sim.sock")}, backend="sim",
                           node=0)[0] == 0
        monkeypatch.setenv("PARANIC_SIM_SOCKET", str(theirs / "sim.sock"))
        assert root_open(backend="sim", node=0) == errno.EACCES
    finally:
        if other is not None:
            other.send_signal(signal.SIGTERM)
            try:
                other.wait(10)
            except subprocess.TimeoutExpired:
                other.kill()
        if sim is not None:
            sim.stop()
        shutil.rmtree(base, ignore_errors=True)
