"""paranicd on the simulated ring:4 (docs/paranicd.md): daemons see each other over
the simulated NIC, and a process killed mid-transfer is cleaned up: the harness frees
its context when its socket closes, the daemon's PEER-DEAD ends the peer's receive with
-ECONNRESET long before the 60 s liveness timeout, and a new process can open on the node."""

from __future__ import annotations

from paranic import daemon as PD
from paranic import launch as L
from simtest import TESTS


def test_daemons_and_crash_on_sim(sim4):
    cluster = "pytest-daemon-sim"
    env = sim4.env(L.clean_env())
    with PD.Daemons.start(cluster, 2, "sim", env=env, args=["--hello-ms", "100", "--down-ms", "1000"]) as d:
        st = PD.status(cluster, 1, env)
        assert st["backend"] == "sim" and [m["state"] for m in st["members"]] == ["up", "up"]
        e = dict(env, PARANIC_PORT_TIMEOUT_MS="60000", DAEMON_TEST_MIDWAY="200000")
        r = L.launch([str(TESTS / "daemon_test"), "crash"], 2, cluster, backend="sim", env=e,
                     extra=["-f", "--attach", "-k", "1:0:midway"], timeout=120)
        assert "launch: node 1 killed by signal 9" in r.out and not r.fails(), r.out
        assert r.ok(0, "crash").startswith("ok crash rc=-104")
        assert int(r.ok(0, "crash").split("after_ms=")[1]) < 10000, r.out
        # the harness frees the context after its teardown (the NIC may no longer DMA into the
        # dead process's memory): an open right away may get the next free context
        assert r.ok(0, "reclaim") in ("ok reclaim node=1 ctx=1", "ok reclaim node=1 ctx=2")
        st = PD.status(cluster, 1, env)
        assert st["cleanups"] == 1 and st["notices_sent"] == 2 * 15 - 1
        assert "context freed by the backend; PEER-DEAD sent" in d.log(1)
