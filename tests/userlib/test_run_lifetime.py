"""`paranic run` owns its children: SIGTERM (what `timeout` sends),
SIGHUP, SIGINT or the death of its parent stop the job, the paranicds, pn_launch and
the simulator it started, and remove the cluster's segments and run directories.
docs/reliability.md, "`paranic run` owns its children".

Each test starts `paranic run` in a session of its own with a job that outlives any
test (sleep 600, twice per node: one in the background), waits until every node runs
it, records every process below `paranic run` (with its process group and session),
then ends `paranic run` and asserts within a bounded wait: none of those processes,
nothing in their sessions or groups, no /dev/shm/paranic-<cluster>* and no run
directory or log of the cluster under /tmp (or the simulator's run directory).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paranic.launch import clean_env
from paranic.paths import TREE

PARANIC = [sys.executable, "-m", "paranic.cli"]
JOB = ["sh", "-c", "echo up; sleep 600 & sleep 600"]
#: What a stopped `paranic run` gets to end everything (pn_launch: SIGTERM, SIGKILL after
#: 2 s; daemons: 5 s; the simulator: 30 s at worst).
BOUND_S = 40


def _procs() -> dict[int, tuple[int, int, int]]:
    """pid -> (ppid, pgid, sid) of every process."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if f[0] in "ZX":
            continue   # a zombie is gone, only not reaped yet
        out[int(d.name)] = (int(f[1]), int(f[2]), int(f[3]))
    return out


def _tree(root: int) -> dict[int, tuple[int, int, int]]:
    """``root`` and its descendants now."""
    ps = _procs()
    mine = {root}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _, _) in ps.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return {p: ps[p] for p in mine if p in ps}


def _leftovers(cluster: str) -> list[str]:
    found = [str(p) for p in Path("/dev/shm").glob(f"paranic-{cluster}*")]
    found += [str(p) for p in Path("/tmp").glob(f"*{cluster}*")]
    found += [str(p) for p in (TREE / "build" / "run").glob(f"*{cluster}*")]
    return found


def _start(backend: str, cluster: str, via_parent: bool) -> tuple[subprocess.Popen, int]:
    """`paranic run` (or a shell that runs it: via_parent) in a new session; returns the
    Popen and the pid of `paranic run` once every node printed "up"."""
    cmd = PARANIC + ["run", "--backend", backend, "--nodes", "2", "--cluster", cluster, "--", *JOB]
    if via_parent:
        cmd = ["sh", "-c", 'exec 3>&1; "$@" & echo "run $!"; wait', "sh", *cmd]
    env = clean_env()
    env["PYTHONUNBUFFERED"] = "1"
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    run_pid = p.pid
    up: set[str] = set()
    lines = []
    t_end = time.monotonic() + 120
    while len(up) < 2:
        line = p.stdout.readline()
        if not line:
            pytest.fail("paranic run ended before its job ran:\n" + "".join(lines))
        lines.append(line)
        if line.startswith("run "):
            run_pid = int(line.split()[1])
        if line.rstrip().endswith(": up"):
            up.add(line.split(":")[0])
        assert time.monotonic() < t_end, "".join(lines)
    return p, run_pid


def _end_and_check(p: subprocess.Popen, run_pid: int, cluster: str, how: str) -> float:
    tree = _tree(run_pid)
    groups = {pg for _, pg, _ in tree.values()}
    sessions = {sid for _, _, sid in tree.values()}
    assert len(tree) >= 6, f"the job did not start: {tree}"   # run, 2 daemons, pn_launch, 2 x (sh, sleep)
    t0 = time.monotonic()
    if how == "parent-death":
        os.kill(p.pid, signal.SIGKILL)   # the shell that started `paranic run`
    else:
        os.kill(run_pid, getattr(signal, how))
    try:
        while True:
            ps = _procs()
            alive = sorted(pid for pid in tree if pid in ps and pid != p.pid)
            alive += sorted(pid for pid, (_, pg, sid) in ps.items()
                            if (pg in groups or sid in sessions) and pid not in tree)
            left = _leftovers(cluster)
            if not alive and not left:
                return time.monotonic() - t0
            if time.monotonic() - t0 > BOUND_S:
                pytest.fail(f"{how}: {BOUND_S} s later still alive: "
                            f"{[(pid, Path(f'/proc/{pid}/cmdline').read_bytes()[:80]) for pid in alive if pid in ps]}"
                            f"; left behind: {left}")
            time.sleep(0.1)
    finally:
        for pid in tree:   # whatever a failed test left: not into the next one
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        p.kill()
        p.communicate()
        from paranic import lib

        lib.sw_cluster_destroy(cluster, missing_ok=True)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "SIGINT", "parent-death"])
def test_run_sw_stops_everything(userlib_build, how):
    cluster = f"life-{os.getpid()}-{how.lower()}"
    p, run_pid = _start("sw", cluster, how == "parent-death")
    took = _end_and_check(p, run_pid, cluster, how)
    print(f"{how}: everything gone after {took:.2f} s")


def test_run_sim_stops_everything(userlib_build):
    from paranic.sim import build as simbuild

    simbuild.build("ring:4")   # cached
    cluster = f"life-{os.getpid()}-sim"
    p, run_pid = _start("sim", cluster, False)
    assert any("paranic-sim" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
               for pid in _tree(run_pid)), "no simulator under paranic run"
    took = _end_and_check(p, run_pid, cluster, "SIGTERM")
    print(f"sim SIGTERM: everything gone after {took:.2f} s")
