"""`paranic bench layers --backend sim --quick` on the cached ring:4 simulator (which it
starts itself): hardware-path rows for hal, rawdata, ports, sockets (the socket
program timed with the preload library's pn_sock_now_ns), pvm (when installed), am and
rma, os-tcp natively,
and figures within what the gateware allows. About 25 s."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from paranic.spec import protocol as P
from simtest import ROOT

PARANIC = [sys.executable, "-m", "paranic.cli"]


@pytest.mark.slow   # about 70 s; make test's budget. The sw run (tests/userlib) stays.
def test_layers_on_the_simulator(sim_binary, userlib_build):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    r = subprocess.run([*PARANIC, "bench", "layers", "--backend", "sim", "--quick", "--json"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=e)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "paranic bench: starting the ring:4 simulator" in r.stderr
    res = json.loads(r.stdout)
    rows = {x["layer"]: x for x in res["rows"]}
    pvm = [] if "pvm" in res["skipped"] else ["pvm"]   # PVM over the sockets, when installed
    assert list(rows) == ["hal", "rawdata", "ports", "sockets", *pvm, "am", "rma", "os-tcp"]
    from paranic.spec.link import link_efficiency
    link = P.WORD_BYTES * P.TARGET_CLK_HZ / 1e6 * link_efficiency(P.DEFAULT_MTU)   # 969.7 MB/s
    for name in ("hal", "rawdata", "ports", "sockets", *pvm, "am", "rma"):
        x = rows[name]
        assert x["sw_ns"] is None and x["latency_ns"] == x["hw_ns"], x            # hardware path only
        # One way over one hop: at least the PIO path's 60 cycles (PCIe model 38);
        # the upper bound is only a sanity check: simulated time runs on while a client waits
        # for a core, so a loaded machine inflates hw_ns (5.2 µs for rma seen once in CI).
        assert 480 <= x["hw_ns"] <= 50_000, x
        assert x["hw_cycles"] == round(x["hw_ns"] / P.TARGET_CLK_NS, 1), x
        # 1 MiB messages: no faster than the link's payload bandwidth, and well above half of it.
        assert link * 0.5 < x["hw_MBps"] <= link * 1.001 and x["MBps"] == x["hw_MBps"], x
    # An AM request or RMA put is a ports message with a longer header (24 bytes, an
    # RMA put 32 more of arguments), and its answer one too: more PIO stores each way
    # and the library's handler turn-around (192 and 288 ns one way while a store took
    # two bus cycles, docs/benchmarks.md; am 132 ns over ports since a store takes one).
    # A run descheduled in every one of its 30 iterations only ever comes out slower:
    # compare when ports was undisturbed (its path is 844-880 ns).
    ports = rows["ports"]["hw_ns"]
    for name in ("am", "rma"):
        x = rows[name]
        assert x["below"] == "ports" and x["added_hw_ns"] == round(x["hw_ns"] - ports, 1), x
        if ports < 900:
            assert x["hw_ns"] >= ports + 100, (x, rows["ports"])
    if pvm:   # PVM's header and its own message (pvm_pkbyte's fragment) over the same socket
        x = rows["pvm"]
        assert x["below"] == "sockets" and x["added_hw_ns"] == round(x["hw_ns"] - rows["sockets"]["hw_ns"], 1), x
    os_tcp = rows["os-tcp"]
    assert os_tcp["hw_ns"] is None and os_tcp["sw_ns"] > 0 and os_tcp["native_only"], os_tcp
