"""paranicd on the sw backend (docs/paranicd.md): membership over the NIC, attach
checks in pn_open, the job registry, and the clean-up after a crashed process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from paranic import daemon as PD
from paranic import launch as L
from paranic.launch import TESTS, Run, cluster_name

FAST = ["--hello-ms", "100", "--down-ms", "600"]


def _name(tag: str) -> str:
    return cluster_name(f"pyd-{os.getpid()}-{tag}")


@pytest.fixture
def daemons(userlib_build):
    """Start the daemons of a fresh sw cluster: daemons(tag, nodes, *args)."""
    started: list[PD.Daemons] = []

    def start(tag: str, nodes: int, *args: str) -> PD.Daemons:
        d = PD.Daemons.start(_name(tag), nodes, args=[*FAST, *args])
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def run_attached(cluster: str, nodes: int, prog: list[str], env: dict[str, str] | None = None,
                 extra: list[str] | None = None, timeout: int = 60) -> Run:
    """pn_launch --attach: the processes join the daemons' cluster."""
    e = L.clean_env()
    e.update(env or {})
    return L.launch(prog, nodes, cluster, env=e, extra=["-f", "--attach", *(extra or [])], timeout=timeout)


def open_line(r: Run, node: int) -> dict[str, str]:
    line = next(ln for ln in r.nodes[node] if ln.startswith("open "))
    head, reason = line.split(" reason=", 1)
    rc, ctx, err = head[5:].split(" ", 2)
    return {"rc": int(rc[3:]), "ctx": int(ctx[4:]), "err": err[4:], "reason": reason}


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "paranic.cli", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_membership_and_down(daemons):
    d = daemons("memb", 3)
    host = socket.gethostname()
    for view in range(3):
        st = PD.status(d.cluster, view)
        assert (st["node"], st["nodes"], st["ctx"], st["num_ctx"], st["backend"]) == (view, 3, 15, 16, "sw")
        assert [(m["node"], m["state"], m["addr"], m["host"]) for m in st["members"]] == \
            [(n, "up", f"10.77.0.{n + 1}", host[:63]) for n in range(3)]
        assert [m["pid"] for m in st["members"]] == [d.procs[n].pid for n in range(3)]
        assert st["hellos_recv"] >= 2
    r = cli("daemon", "status", "--cluster", d.cluster, "--node", "1")
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines()[2:]]
    assert [(row[0], row[2], row[3]) for row in rows] == [("0", "10.77.0.1", "up"), ("1", "10.77.0.2", "up"),
                                                          ("2", "10.77.0.3", "up")], r.stdout
    # node 2's daemon dies: the others mark it down after the down timeout (600 ms)
    t0 = time.monotonic()
    d.kill(2)
    d.wait_members(5, up=[0, 1], node=0)
    d.wait_members(5, up=[0, 1], node=1)
    assert 0.3 < time.monotonic() - t0 < 3
    assert "node 2 down" in d.log(0)
    # a new daemon on node 2 takes the dead one's context over and is seen again
    d.procs[2] = subprocess.Popen([str(PD.DAEMON), "--cluster", d.cluster, "--node", "2", "--nodes", "3", *FAST],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=d.env,
                                  start_new_session=True)
    d.wait_ready(2, 10)
    d.wait_members(5)


def test_attach_checks(daemons, tmp_path):
    d = daemons("att", 2)
    prog = [str(TESTS / "daemon_test"), "open"]
    r = run_attached(d.cluster, 2, prog)
    assert r.rc == 0, r.out
    assert [open_line(r, n)["rc"] for n in range(2)] == [0, 0] and open_line(r, 0)["ctx"] == 1
    # another minor version is accepted, another major refused (-EPROTO) with the reason
    r = run_attached(d.cluster, 2, prog, env={"PARANIC_DAEMON_FAKE_ABI": "0x10009"})
    assert open_line(r, 0)["rc"] == 0, r.out
    r = run_attached(d.cluster, 2, prog, env={"PARANIC_DAEMON_FAKE_ABI": "0x20000"})
    o = open_line(r, 1)
    assert o["rc"] == -71 and "ABI version refused by paranicd" in o["err"], r.out
    assert o["reason"] == "library ABI 2.0, paranicd 1.0: major versions differ"
    # a context that is not the caller's
    r = run_attached(d.cluster, 2, prog, env={"PARANIC_DAEMON_FAKE_CTX": "3"})
    o = open_line(r, 0)
    assert o["rc"] == -13 and o["reason"].startswith("context 3 is owned by pid 0, not by the caller"), r.out
    # the refused contexts were released: the next open gets context 1 again
    r = run_attached(d.cluster, 2, prog)
    assert [open_line(r, n)["ctx"] for n in range(2)] == [1, 1], r.out
    assert PD.status(d.cluster, 1)["refused"] == 2 and PD.status(d.cluster, 0)["refused"] == 2
    assert PD.procs(d.cluster, 0) == []   # closed contexts (DETACH) are gone from the list


def test_attach_uid_not_allowed(daemons):
    assert os.getuid() != 12345
    d = daemons("uid", 2, "--allow-uid", "12345")
    r = run_attached(d.cluster, 2, [str(TESTS / "daemon_test"), "open"])
    for n in range(2):
        o = open_line(r, n)
        assert o["rc"] == -13 and o["err"].startswith("refused by paranicd"), r.out
        assert o["reason"] == f"uid {os.getuid()} (gid {os.getgid()}) is not allowed on node {n}"
    with pytest.raises(PD.DaemonError, match="not allowed"):
        PD.job_start(d.cluster, 0, "j", 2, 1, "x")


def test_no_daemon_and_require(userlib_build):
    prog = [str(TESTS / "daemon_test"), "open"]
    e = L.clean_env()
    r = L.launch(prog, 2, _name("req"), env=e)
    assert [open_line(r, n)["rc"] for n in range(2)] == [0, 0], r.out   # development mode
    r = L.launch(prog, 2, _name("req"), env=dict(e, PARANIC_DAEMON="require"))
    o = open_line(r, 0)
    assert o["rc"] == -107 and "no paranicd answers for this node" in o["err"], r.out
    assert "PARANIC_DAEMON=require" in o["reason"]


def test_job_registry(daemons, tmp_path):
    d = daemons("jobs", 2)
    job = "job-" + d.cluster
    for n in range(2):
        PD.job_start(d.cluster, n, job, 2, 1, ["daemon_test", "hold"])
    with pytest.raises(PD.DaemonError, match="registered already"):
        PD.job_start(d.cluster, 0, job, 2, 1, "again")
    release = tmp_path / "release"
    e = L.clean_env()
    e["PARANIC_JOB"] = job
    p = subprocess.Popen(L.launch_cmd([str(TESTS / "daemon_test"), "hold", str(release)], 2, d.cluster,
                                      extra=["-f", "--attach"], timeout=60),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e)
    held: dict[int, dict[str, str]] = {}
    assert p.stdout is not None
    for line in p.stdout:
        if ": ok hold " in line:
            node = int(line.split(":")[0])
            held[node] = dict(kv.split("=") for kv in line.split("ok hold ")[1].split())
            if len(held) == 2:
                break
        assert "FAIL" not in line, line
    try:
        r = cli("daemon", "jobs", "--cluster", d.cluster, "--json")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert [(j["id"], j["nodes"], j["ppn"], j["uid"], j["procs"], j["command"]) for j in out["jobs"]] == \
            [(job, 2, 1, os.getuid(), 1, "daemon_test hold")]
        assert sorted((q["node"], q["ctx"], q["pid"], q["job"]) for q in out["procs"]) == \
            [(n, int(held[n]["ctx"]), int(held[n]["pid"]), job) for n in range(2)]
        r = cli("daemon", "jobs", "--cluster", d.cluster)
        assert job in r.stdout and r.returncode == 0
    finally:
        release.touch()
        rest, _ = p.communicate(timeout=60)
    assert p.returncode == 0, rest
    assert PD.procs(d.cluster, 0) == [] and PD.procs(d.cluster, 1) == []
    PD.job_end(d.cluster, 0, job)
    assert PD.jobs(d.cluster, 0) == [] and len(PD.jobs(d.cluster, 1)) == 1


def test_crash_cleanup(daemons):
    """A process SIGKILLed in the middle of a 16 MiB rendezvous transfer: its daemon
    frees its context and sends PEER-DEAD; the peer's pending receive ends with
    -ECONNRESET at once although the liveness timeout is 60 s, and a new process gets
    exactly the dead one's context (context 1, not 2)."""
    d = daemons("crash", 2)
    t0 = time.monotonic()
    r = run_attached(d.cluster, 2, [str(TESTS / "daemon_test"), "crash"],
                     env={"PARANIC_PORT_TIMEOUT_MS": "60000"}, extra=["-k", "1:0:midway"], timeout=60)
    wall = time.monotonic() - t0
    assert "launch: node 1 killed by signal 9" in r.out and not r.fails(), r.out
    assert r.ok(0, "crash").startswith("ok crash rc=-104")
    after_ms = int(r.ok(0, "crash").split("after_ms=")[1])
    assert after_ms < 3000 and wall < 20, r.out
    assert r.ok(0, "reclaim") == "ok reclaim node=1 ctx=1"
    st = PD.status(d.cluster, 1)
    assert st["cleanups"] == 1 and st["notices_sent"] == 2 * 15 - 1
    assert "died on context 1: context freed; PEER-DEAD sent" in d.log(1)


def test_crash_without_daemon_waits_for_liveness(userlib_build):
    """The control: without daemons the same receive only ends by the liveness timeout."""
    e = L.clean_env()
    e["PARANIC_PORT_TIMEOUT_MS"] = "1500"
    r = L.launch([str(TESTS / "daemon_test"), "crash"], 2, _name("nod"), env=e, extra=["-k", "1:0:midway"])
    assert any("receive ended with -110" in ln for ln in r.fails()), r.out


def test_paranic_run_starts_daemons(userlib_build):
    prog = ["sh", "-c", f"{PD.DAEMON} jobs --json; {TESTS / 'daemon_test'} open"]
    r = cli("run", "--nodes", "2", "--cluster", _name("run"), "--", *prog)
    assert r.returncode == 0, r.stdout + r.stderr
    run = Run.parse(0, r.stdout)
    for n in range(2):
        jobs = json.loads(run.nodes[n][0])
        assert [(j["id"], j["nodes"], j["procs"]) for j in jobs] == [(_name("run"), 2, 0)]
        assert open_line(run, n)["rc"] == 0
    assert not os.path.exists(f"/tmp/paranic-{_name('run')}")   # daemons stopped, run directory gone
    r = cli("run", "--nodes", "2", "--no-daemon", "--", *prog)
    run = Run.parse(r.returncode, r.stdout)   # development mode: no daemon to ask, pn_open works
    assert r.returncode == 0 and all("no paranicd answers" in run.nodes[n][0] for n in range(2)), r.stdout
    assert [open_line(run, n)["rc"] for n in range(2)] == [0, 0]
