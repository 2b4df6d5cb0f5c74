"""A simulator named by PARANIC_SIM_SOCKET is used when one listens
there and refused with a clear error otherwise (nothing there, a stale socket, a socket
of another type), never replaced by a second simulator started in silence; options of
a simulator to start are refused when the named one runs already. And the simulator's
own numeric options: not finite or out of range, it does not start.
docs/reliability.md, "Bad input".
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from simtest import RUN, clean_env, sim_socket
from paranic.sim import run as simrun

PARANIC = [sys.executable, "-m", "paranic.cli"]
#: Prints the socket its process was given, so the test sees which simulator it used.
JOB = ["sh", "-c", 'echo "socket=$PARANIC_SIM_SOCKET"']


def _ppid(pid: int) -> int:
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _ours(pid: int) -> bool:
    """``pid`` descends from this test process (other test workers run simulators too)."""
    while pid > 1:
        pid = _ppid(pid)
        if pid == os.getpid():
            return True
    return False


def _sims() -> set[int]:
    """pids of the paranic-sim processes this test process started (directly or not)."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if open(f"/proc/{d}/cmdline", "rb").read().split(b"\0")[0].endswith(b"paranic-sim"):
                    out.add(int(d))
            except OSError:
                pass
    return {p for p in out if _ours(p)}


def _run(sock: str, *opts: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = clean_env()
    env["PARANIC_SIM_SOCKET"] = sock
    return subprocess.run(PARANIC + ["run", "--backend", "sim", "--nodes", "2", "--no-daemon", *opts, "--", *JOB],
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_given_socket_without_simulator_is_an_error(sim_binary, userlib_build, tmp_path):
    before = _sims()
    missing = str(RUN / f"none-{os.getpid()}.sock")
    RUN.mkdir(parents=True, exist_ok=True)
    stream = tmp_path / "stream.sock"
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # a listener of the wrong type
    ls.bind(str(stream))
    ls.listen(4)
    try:
        for sock, why in ((missing, "no such socket"), (str(stream), "not SOCK_SEQPACKET")):
            r = _run(sock, timeout=60)
            err = [ln for ln in r.stderr.splitlines() if ln.startswith("paranic run:")]
            assert r.returncode == 1, f"{sock}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
            assert any("PARANIC_SIM_SOCKET" in ln and why in ln for ln in err), r.stderr
            assert "starting the" not in r.stderr, r.stderr
        assert _sims() <= before, "a simulator was started"
    finally:
        ls.close()


def test_given_running_simulator_is_reused(sim_binary, userlib_build):
    sim = simrun.start("ring:4", socket=sim_socket("given"))
    try:
        before = _sims()
        r = _run(str(sim.socket))
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"using the simulator at {sim.socket}" in r.stderr
        assert r.stdout.count(f"socket={sim.socket}") == 2, r.stdout
        assert _sims() <= before, "a second simulator was started"
        # options of a simulator to start do not apply to this one: refused, not ignored
        r = _run(str(sim.socket), "--ber", "1e-3")
        assert r.returncode == 2 and "--ber" in r.stderr and "runs already" in r.stderr, r.stderr
    finally:
        assert sim.stop() == 0


@pytest.mark.parametrize("opt, value", [
    ("--mmio-write-ns", "nan"), ("--dma-read-ns", "inf"), ("--mmio-read-ns", "-5"), ("--stats", "nan"),
    ("--rcb", "12abc"), ("--max-read", ""), ("--idle-burst", "-1"), ("--radix-log2", "9"),
    ("--idle-cycles", "1e999"), ("--model", "fastest"), ("--model", ""), ("--poll-miss-ns", "nan"),
    ("--poll-miss-ns", "2e6"),
])
def test_simulator_refuses_bad_numbers(sim_binary, opt, value, tmp_path):
    """The simulator checks its own options (it can be started without the CLI)."""
    try:
        r = subprocess.run([str(sim_binary), "--socket", str(tmp_path / "s.sock"), opt, value],
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"paranic-sim {opt} {value!r} was accepted: it started")
    assert r.returncode == 2, r.stdout + r.stderr
    assert opt in r.stderr, r.stderr
