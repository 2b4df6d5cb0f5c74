"""paranicd from Python: start a cluster's daemons, ask them (membership, jobs,
attached processes), register jobs; and ``paranic daemon ...`` (docs/paranicd.md).

Everything goes through the ``paranicd`` binary (its client mode prints JSON), so the
socket protocol is defined once, in C (``userlib/src/daemon_proto.h``), and the
socket path rule once, in ``pn_daemon_socket_path`` (``PARANIC_DAEMON_SOCKET``, else
``$PARANIC_DAEMON_DIR`` (default ``/tmp``) ``/paranic-<cluster>/node<N>.sock``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from paranic import launch as L

DAEMON = L.BIN / "paranicd"


class DaemonError(RuntimeError):
    """A paranicd query or start failed (the message holds its words)."""


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    return dict(os.environ if env is None else env)


def query(what: str, cluster: str, node: int, env: Mapping[str, str] | None = None,
          timeout: float = 10) -> Any:
    """``paranicd WHAT --json`` against (cluster, node)'s daemon: WHAT is ``status``
    (a dict with ``members``), ``procs`` or ``jobs`` (lists). Raises DaemonError."""
    r = subprocess.run([str(DAEMON), what, "--cluster", cluster, "--node", str(node), "--json"],
                       capture_output=True, text=True, env=_env(env), timeout=timeout)
    if r.returncode != 0:
        raise DaemonError(r.stderr.strip() or f"paranicd {what}: exit status {r.returncode}")
    return json.loads(r.stdout)


def status(cluster: str, node: int = 0, env: Mapping[str, str] | None = None) -> dict:
    return query("status", cluster, node, env)


def procs(cluster: str, node: int = 0, env: Mapping[str, str] | None = None) -> list[dict]:
    return query("procs", cluster, node, env)


def jobs(cluster: str, node: int = 0, env: Mapping[str, str] | None = None) -> list[dict]:
    return query("jobs", cluster, node, env)


def _ctl(args: Sequence[str], cluster: str, node: int, env: Mapping[str, str] | None) -> None:
    r = subprocess.run([str(DAEMON), *args, "--cluster", cluster, "--node", str(node)],
                       capture_output=True, text=True, env=_env(env), timeout=10)
    if r.returncode != 0:
        raise DaemonError(r.stderr.strip())


def job_start(cluster: str, node: int, job_id: str, nodes: int, ppn: int, command: Sequence[str] | str,
              env: Mapping[str, str] | None = None) -> None:
    cmd = command if isinstance(command, str) else " ".join(command)
    _ctl(["job-start", "--id", job_id, "--nodes", str(nodes), "--ppn", str(ppn), "--command", cmd[:255]],
         cluster, node, env)


def job_end(cluster: str, node: int, job_id: str, env: Mapping[str, str] | None = None) -> None:
    _ctl(["job-end", "--id", job_id], cluster, node, env)


@dataclass
class Daemons:
    """The paranicds of one cluster, one process per node, started by :meth:`start`."""

    cluster: str
    nodes: int
    env: dict[str, str]
    procs: dict[int, subprocess.Popen] = field(default_factory=dict)
    logs: dict[int, str] = field(default_factory=dict)

    @classmethod
    def start(cls, cluster: str, nodes: int, backend: str = "sw", env: Mapping[str, str] | None = None,
              args: Sequence[str] = (), wait: float = 20.0, log_dir: str | None = None,
              die_with_parent: bool = False) -> "Daemons":
        """Start one paranicd per node (``args`` go to each: ``--allow-uid``, ``--hello-ms``
        ...) and wait until each answers and sees every node up. ``die_with_parent``:
        each gets SIGTERM when the calling thread ends (PR_SET_PDEATHSIG; ``paranic run``,
        whose daemons must not outlive it), not for daemons meant to stay
        (``paranic daemon start``)."""
        e = dict(L.clean_env() if env is None else env)
        if env is None and "PARANIC_DAEMON_DIR" in os.environ:
            e["PARANIC_DAEMON_DIR"] = os.environ["PARANIC_DAEMON_DIR"]
        e.pop("PARANIC_DAEMON_SOCKET", None)   # one socket per node
        d = cls(cluster, nodes, e)
        try:
            for n in range(nodes):
                log = os.path.join(log_dir or "/tmp", f"paranicd-{cluster}-{n}.log")
                d.logs[n] = log
                with open(log, "w") as f:
                    d.procs[n] = subprocess.Popen(
                        [str(DAEMON), "--cluster", cluster, "--node", str(n), "--nodes", str(nodes),
                         "--backend", backend, *args],
                        stdout=f, stderr=subprocess.STDOUT, env=e, start_new_session=True,
                        preexec_fn=functools.partial(L.set_parent_death_signal, signal.SIGTERM)
                        if die_with_parent else None)
                if n == 0:
                    d.wait_ready(0, wait)   # node 0's daemon creates the sw cluster
            for n in range(nodes):
                d.wait_ready(n, wait)
            d.wait_members(wait)
        except BaseException:
            d.stop()
            raise
        return d

    def log(self, node: int) -> str:
        try:
            with open(self.logs[node]) as f:
                return f.read()
        except OSError:
            return ""

    def wait_ready(self, node: int, wait: float) -> None:
        t_end = time.monotonic() + wait
        while True:
            p = self.procs.get(node)
            if p is not None and p.poll() is not None:
                raise DaemonError(f"paranicd of node {node} exited with {p.returncode}: {self.log(node)}")
            try:
                status(self.cluster, node, self.env)
                return
            except DaemonError:
                if time.monotonic() > t_end:
                    raise DaemonError(f"paranicd of node {node} does not answer: {self.log(node)}") from None
                time.sleep(0.05)

    def wait_members(self, wait: float, up: Sequence[int] | None = None, node: int | None = None) -> None:
        """Wait until the daemons (or ``node``'s) see exactly the nodes ``up`` (default: all) up."""
        want = set(range(self.nodes) if up is None else up)
        t_end = time.monotonic() + wait
        while True:
            views = [node] if node is not None else [n for n in self.procs if self.procs[n].poll() is None]
            if all({m["node"] for m in status(self.cluster, n, self.env)["members"] if m["state"] == "up"} == want
                   for n in views):
                return
            if time.monotonic() > t_end:
                raise DaemonError(f"membership not {sorted(want)} after {wait} s")
            time.sleep(0.05)

    def kill(self, node: int, sig: int = signal.SIGKILL) -> None:
        p = self.procs[node]
        if p.poll() is None:
            p.send_signal(sig)
            p.wait(10)

    def stop(self) -> None:
        """SIGTERM every daemon (SIGKILL after 5 s), then remove the sw cluster."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        from paranic import lib

        lib.sw_cluster_destroy(self.cluster, missing_ok=True)
        for log in self.logs.values():
            try:
                os.unlink(log)
            except OSError:
                pass

    def __enter__(self) -> "Daemons":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# ---- paranic daemon ... -------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("what", choices=["status", "jobs", "start", "stop"],
                   help="status: membership table; jobs: jobs and attached processes of every node; "
                        "start/stop: the daemons of a sw cluster (in the background)")
    p.add_argument("--cluster", default=os.environ.get("PARANIC_CLUSTER", "default"))
    from paranic.cliopts import int_in
    from paranic.spec import protocol as P

    p.add_argument("--node", type=int_in(0, P.MAX_NODES - 1), default=0, help="status: whose view (default 0)")
    p.add_argument("--nodes", "-n", type=int_in(1, P.MAX_NODES), default=2, help="start: nodes (default 2)")
    p.add_argument("--backend", choices=["sw", "sim"], default=os.environ.get("PARANIC_BACKEND", "sw"))
    p.add_argument("--json", action="store_true")


def _print_status(st: dict) -> None:
    print(f"cluster {st['cluster']} ({st['backend']}), seen from node {st['node']} "
          f"(paranicd pid {st['pid']}, context {st['ctx']})")
    print(f"{'node':<5} {'host':<16} {'address':<15} {'state':<5} {'pid':<8} heard")
    for m in st["members"]:
        heard = "never" if m["age_ms"] < 0 else f"{m['age_ms']} ms ago"
        print(f"{m['node']:<5} {m['host'] or '-':<16} {m['addr']:<15} {m['state']:<5} {m['pid']:<8} {heard}")


def run(a: argparse.Namespace) -> int:
    try:
        L.build_userlib(quiet=True)
        if a.what == "status":
            st = status(a.cluster, a.node)
            print(json.dumps(st)) if a.json else _print_status(st)
            return 0
        if a.what == "jobs":
            st = status(a.cluster, a.node)
            out: dict[str, Any] = {"jobs": jobs(a.cluster, a.node), "procs": []}
            for m in st["members"]:
                if m["state"] == "up":
                    try:
                        out["procs"] += procs(a.cluster, m["node"])
                    except DaemonError as e:
                        print(f"paranic daemon: node {m['node']}: {e}", file=sys.stderr)
            if a.json:
                print(json.dumps(out))
                return 0
            print(f"{'job':<24} {'uid':<6} {'nodes':<5} {'ppn':<4} command")
            for j in out["jobs"]:
                print(f"{j['id']:<24} {j['uid']:<6} {j['nodes']:<5} {j['ppn']:<4} {j['command']}")
            print(f"\n{'node':<5} {'ctx':<4} {'pid':<8} {'uid':<6} job")
            for p in sorted(out["procs"], key=lambda p: (p["node"], p["ctx"])):
                print(f"{p['node']:<5} {p['ctx']:<4} {p['pid']:<8} {p['uid']:<6} {p['job'] or '-'}")
            return 0
        if a.what == "start":
            d = Daemons.start(a.cluster, a.nodes, a.backend, env=os.environ)
            for n, p in d.procs.items():
                print(f"node {n}: paranicd pid {p.pid}")
            return 0
        if a.what == "stop":
            st = status(a.cluster, a.node)
            for m in st["members"]:
                if m["pid"] and m["state"] == "up":
                    os.kill(m["pid"], signal.SIGTERM)
            if st["backend"] == "sw":
                time.sleep(0.5)
                from paranic import lib

                lib.sw_cluster_destroy(a.cluster, missing_ok=True)
            return 0
    except (DaemonError, L.BuildError, OSError) as e:
        print(f"paranic daemon {a.what}: {e}", file=sys.stderr)
        return 1
    return 2
