"""The Verilator cluster simulator (sim/, paranic.sim) and libparanic's `sim`
backend (userlib/src/hal_sim.c): build cache, start/stop, the HAL conformance vectors
and rawdata against the simulated 4-node ring, a client killed with SIGKILL, the
hardware-path latency from the simulator's trace records, and the harness's side of
the client protocol (rawclient.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simtest import BUILD, TESTS, launch, sim_socket
from paranic.spec import protocol as P
from paranic.spec import sim as S
from paranic.sim import build as simbuild, run as simrun
from paranic.hw.standalone import read_csr_json
from rawclient import OP_R32, OP_W32, RawClient, Refused

CASES_2 = ["vectors", "stamp", "errors", "fullring", "barrier"]
CASES_3 = CASES_2 + ["multisend"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait(pred, timeout: float = 30.0, what: str = "condition"):
    t0 = time.time()
    while not pred():
        assert time.time() - t0 < timeout, f"{what} not reached within {timeout} s"
        time.sleep(0.05)


# ---- build and lifetime --------------------------------------------------------------------


def test_build_is_cached(sim_binary):
    """A second build() finds the binary (no rebuild) in build/sim/cluster-ring4-<hash>."""
    mtime = sim_binary.stat().st_mtime_ns
    again = simbuild.build("ring:4", quiet=True)
    assert again == sim_binary and again.stat().st_mtime_ns == mtime
    bdir = sim_binary.parent
    assert re.fullmatch(r"cluster-ring4-[0-9a-f]{12}", bdir.name)
    info = json.loads((bdir / "info.json").read_text())
    assert (info["topo"], info["nodes"], info["mtu"], info["n_ctx"]) == ("ring:4", 4, P.DEFAULT_MTU,
                                                                        P.DEFAULT_CONTEXTS)
    with pytest.raises(ValueError):
        simbuild.build("ring:17")
    with pytest.raises(ValueError):
        simbuild.build("torus:5x2")


def test_start_stop_clean(sim_binary, userlib_build):
    """Ready file and socket after start; the clock stands still with nobody attached;
    a second simulator on the same socket refuses; SIGTERM and SIGINT stop it leaving
    no socket, shared memory, ready file or process; a socket left by a simulator
    killed with SIGKILL is taken over; clients find a simulator by cluster name."""
    sock = sim_socket("startstop")
    sim = simrun.start("ring:4", socket=sock)
    info = sim.info
    assert (info["topo"], info["nodes"], info["n_ctx"], info["mtu"], info["clk_hz"]) == \
        ("ring:4", 4, P.DEFAULT_CONTEXTS, P.DEFAULT_MTU, P.TARGET_CLK_HZ)
    # The default latency model (paranic.spec.sim, realistic): a DMA write is visible to the
    # polling CPU after the PCIe part and its cache miss; the cable is the build's.
    c = S.latency_model(S.DEFAULT_MODEL).cycles()
    assert info["model"] == S.DEFAULT_MODEL
    assert info["latency_cycles"] == {"mmio_write": c["mmio_write"], "mmio_read": c["mmio_read"],
                                      "dma_read": c["dma_read"], "dma_write": c["dma_write"] + c["poll_miss"],
                                      "dma_write_pcie": c["dma_write"], "poll_miss": c["poll_miss"],
                                      "cable": simbuild.DEFAULT_PHY_DELAY}
    assert info["links_up_cycle"] > 0
    assert stat.S_ISSOCK(os.stat(sock).st_mode) and Path(info["shm"]).exists()
    c0 = sim.cycle()
    assert c0 >= info["links_up_cycle"]
    time.sleep(0.5)
    assert sim.cycle() == c0, "the clock ran with nobody attached"
    assert sim.counters()["clients"] == 0
    with pytest.raises(RuntimeError, match="another simulator listens"):
        simrun.start("ring:4", socket=sock, timeout=60)
    assert sim.alive()
    assert sim.stop() == 0
    for p in (sock, sim.ready_file, Path(info["shm"])):
        assert not p.exists(), p
    assert _gone(info["pid"])

    sim = simrun.start("ring:4", socket=sock)
    sim.proc.send_signal(signal.SIGINT)
    assert sim.proc.wait(30) == 0
    assert not sock.exists() and not Path(sim.info["shm"]).exists()

    killed = simrun.start("ring:4", socket=sock)
    killed.proc.kill()
    killed.proc.wait()
    assert sock.exists(), "a killed simulator cannot remove its socket"
    sim = simrun.start("ring:4", socket=sock)
    assert sim.alive()
    assert sim.stop() == 0
    assert not sock.exists()
    os.unlink(killed.info["shm"])
    killed.ready_file.unlink()

    # Without PARANIC_SIM_SOCKET the sim backend uses build/run/sim-<cluster>.sock.
    cluster = f"pytest-{os.getpid()}-named"
    with simrun.start("ring:4", cluster=cluster) as sim:
        assert sim.socket == simrun.RUN_DIR / f"sim-{cluster}.sock"
        r = launch(None, [str(TESTS / "hal_conformance"), "sim", "--case", "stamp"], 2, "named",
                   extra=["-f", "-c", cluster])
        assert r.rc == 0 and r.nodes[0][-1] == "PASS", r.out
    assert not sim.socket.exists()
    sim.log.unlink()


def test_threads_need_a_split_build(sim_binary, tmp_path):
    """--threads N evaluates the models of a split build on N threads; the one-model build
    has one model, and says so instead of starting. Out-of-range counts are refused."""
    base = [str(sim_binary), "--socket", str(tmp_path / "s.sock"), "--shm", str(tmp_path / "shm"),
            "--max-cycles", "10"]
    r = subprocess.run(base + ["--threads", "2"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--threads 2 needs a split build" in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == []
    for bad in ("0", "5"):   # ring:4: 1..4
        r = subprocess.run(base + ["--threads", bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--threads" in r.stderr, r.stderr


def test_large_clusters_are_split_by_default():
    """Above 4 nodes a NicCore cluster is built one model per node unless told otherwise
    (one cluster's Verilog does not fit the machine at 16 nodes, and ring:8 shares ring:4's
    split node); SoC clusters never are; the launcher takes --split / --one-model, not both."""
    from paranic.spec.topo import Topology

    assert [simbuild.default_split(Topology.parse(t)) for t in ("ring:2", "ring:4", "torus:2x2")] == [False] * 3
    assert [simbuild.default_split(Topology.parse(t)) for t in ("ring:5", "ring:8", "torus:2x4", "torus:4x4")] == [True] * 4
    assert not simbuild.default_split(Topology.parse("torus:4x4"), soc=True)
    r = subprocess.run([sys.executable, "-m", "paranic.sim", "--split", "--one-model", "--build-only"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not allowed with argument" in r.stderr, r.stderr


def test_no_simulator(userlib_build):
    """pn_open on the sim backend with no simulator running: -ECONNREFUSED, at once."""
    r = launch(None, [str(TESTS / "hal_conformance"), "sim"], 1, "nosim",
               env={"PARANIC_SIM_SOCKET": str(sim_socket("nobody-listens"))})
    assert r.rc != 0
    assert r.nodes[0] == ["FAIL open: pn_open returned -111 (Connection refused)"], r.out


# ---- the HAL and rawdata on the simulated cluster ---------------------------------------------


@pytest.mark.parametrize("n", [2, 4])
def test_conformance(sim4, n):
    """The HAL conformance vectors (the same program and figures as for `sw`)."""
    r = launch(sim4, [str(TESTS / "hal_conformance"), "sim"], n, f"conf{n}", timeout=400)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.launch[-1] == "launch: all nodes exited 0"
    for node in range(n):
        assert r.nodes[node][0] == f"open backend=sim node={node} nodes={n} ctx=1 mtu={P.DEFAULT_MTU}"
        assert r.nodes[node][-1] == "PASS", r.out
        for case in (CASES_3 if n >= 3 else CASES_2):
            r.ok(node, case)
    assert "17 vectors, 1104 packets received" in r.ok(0, "vectors")
    assert r.ok(0, "errors") == "ok errors 17 HAL refusals, 7 NIC refusals counted, nothing delivered"
    assert r.ok(1, "fullring").startswith(
        "ok fullring received 773 PIO + 1024 DMA packets in order; ring held exactly 256 while full")
    if n >= 3:
        assert r.ok(0, "multisend").startswith(
            f"ok multisend received {(n - 1) * 3000} messages from {n - 1} senders in order")
    assert r.ok(0, "barrier").startswith(f"ok barrier 30 barriers of {n} nodes")


def test_rawdata_sizes(sim4):
    """rawdata: 0, 1, MTU-1, MTU, MTU+1, 256, 257, 1 MiB, 9 chunks + 5 bytes, to a peer,
    to itself and back from registered memory."""
    r = launch(sim4, [str(TESTS / "rawdata_test"), "sizes", "sim"], 2, "rd-sizes", timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "sizes") == "ok sizes 9 sizes to node 1, to itself and back, 0 .. 1179653 bytes"
    assert r.ok(1, "sizes") == "ok sizes received and echoed 9 messages"


def test_rawdata_bounce_ring(sim4):
    """rawdata's bounce ring on the hardware path: 60 DMA messages of 257 B .. 100 KB from
    plain memory, many in flight (the NIC completes them while the sender copies the
    next); the receiver gets each exactly once, in order, intact."""
    import re
    r = launch(sim4, [str(TESTS / "rawdata_test"), "inflight", "sim"], 2, "rd-inflight", timeout=300,
               env={"RD_MESSAGES": "60"})
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "inflight") == "ok inflight received 60 messages once each, in order"
    m = re.fullmatch(r"ok inflight sent 60 messages, up to (\d+) in flight", r.ok(1, "inflight"))
    assert m and int(m.group(1)) > 2, r.ok(1, "inflight")


def test_killed_client(sim4):
    """Node 3's process is killed with SIGKILL in the middle of 1 MiB-sized rawdata
    traffic: the harness detaches it, disables its context (the survivors' packets for
    it are dropped and counted, nobody blocks), resets and frees it, a new process
    takes the same context, and all four finish; the simulator carries on."""
    # The previous test's clients may still be detaching: count from a quiet simulator.
    _wait(lambda: sim4.counters()["clients"] == 0 and sim4.counters()["job_nodes"] == 0, 60,
          "the previous test's clients detached")
    log0 = len(sim4.log_text())
    r = launch(sim4, [str(TESTS / "rawdata_test"), "kill", "sim"], 4, "kill",
               extra=["-f", "-k", "3:300:phase-b", "-r", "500"], timeout=300)
    assert r.rc == 0 and not r.fails(), r.out
    assert "launch: node 3 killed by signal 9, respawning in 500 ms" in r.launch, r.out
    m = re.match(r"ok kill reborn node 3: 3 acks, \d+ late phase-B messages, (\d+) packets dropped while dead",
                 r.ok(3, "kill reborn"))
    assert m and int(m.group(1)) > 0, r.out
    victim = int(re.search(r"launch: killing node 3 \(pid (\d+)\)", r.out).group(1))
    assert sim4.alive()
    _wait(lambda: sim4.counters()["clients"] == 0 and sim4.counters()["job_nodes"] == 0, 60,
          "every client detached")
    log = sim4.log_text()[log0:]
    i_det = log.index(f"(pid {victim}) detached from node 3 ctx 0")
    i_free = log.index("node 3 ctx 0: reset and free", i_det)
    log.index("attached: node 3 ctx 0", i_free)   # the new process, in the same context
    assert len(re.findall(r"detached from node \d ctx 0", log)) == 5


def test_latency(sim4):
    """8-byte HAL ping-pong; one-way hardware path from the trace records:
    issue (first PIO store taken from the queue) -> RX valid word visible at the peer."""
    r = launch(sim4, [str(BUILD / "simtests" / "sim_latency"), "50", "8"], 2, "latency", timeout=200)
    assert r.rc == 0 and not r.fails(), r.out
    lat = sim4.info["latency_cycles"]
    for node in (0, 1):
        line = [ln for ln in r.nodes[node] if ln.startswith("direction")][0]
        mn, med, mx, db, net = map(int, re.search(
            r"min (\d+) median (\d+) max (\d+) cycles; issue->doorbell (\d+), doorbell->rx valid (\d+)",
            line).groups())
        assert mn <= med <= mx and med - mn <= 2, line
        # The harness's MMIO model: the stores reach the bus after the write latency, one
        # access per cycle (a write is acknowledged in the cycle it is presented; it was
        # one every two cycles with the registered acknowledge: + 2 * 3 - 1); on the
        # 64-bit bus each 64-bit store is one access: payload, tag, then header word 0
        # through PIO_SEND (the store+doorbell), recorded in the cycle it is acknowledged.
        assert db == lat["mmio_write"] + 3 - 1, line
        assert net > lat["dma_write"], line
        assert med == db + net or abs(med - (db + net)) <= 1, line
    ok = r.ok(0, "latency")
    print(f"\n{ok}\n" + "\n".join(r.nodes[0] + r.nodes[1]))


# ---- the harness's side of the protocol -----------------------------------------------------


def test_protocol_and_throttle(sim4, sim_binary):
    """Bad hellos are refused with the documented codes; a good raw client reads its
    registers and a CSR through the queue, sends a PIO packet to itself and finds it
    in its RX ring, stamped; bad queue entries are ignored and logged; with nothing in
    flight the harness throttles the clock and a queue entry wakes it; on close the
    context is disabled, reset and freed."""
    sock = sim4.socket
    regs = read_csr_json(sim_binary.parent / "csr.json")
    _wait(lambda: sim4.counters()["clients"] == 0, 60, "no clients")

    def refused(**kw) -> int:
        c = RawClient(sock, **kw)
        try:
            c.attach()
        except Refused as e:
            return e.status
        finally:
            c.close()
        raise AssertionError(f"attach {kw} accepted")

    assert refused(seal=False) == -22          # memory not sealed against shrinking
    assert refused(version=99) == -71          # -EPROTO
    assert refused(node=4) == -22
    assert refused(ctx=16) == -22
    assert refused(rx_log2=17) == -22
    c = RawClient(sock)
    with pytest.raises(Refused) as e:
        c.attach(raw_hello=b"short")
    assert e.value.status == -71
    c.close()

    log0 = len(sim4.log_text())
    c = RawClient(sock, node=2)
    w = c.attach()
    assert (w["node"], w["nodes"], w["sim_nodes"], w["ctx"], w["n_ctx"], w["mtu"], w["topo"]) == \
        (2, 4, 4, 1, P.DEFAULT_CONTEXTS, P.DEFAULT_MTU, "ring:4")
    assert w["dma_base"] == 2 << 36 and w["csr_dropped"] == regs["host_err_unknown_ctx"].addr
    assert refused(node=2, ctx=1) == -16       # -EBUSY: taken
    assert c.reg(P.CtxReg.STATUS) == P.StatusBit.ENABLED
    assert c.csr(regs["host_info_mtu"].addr) == P.DEFAULT_MTU
    assert c.csr(regs["host_info_n_ctx"].addr) == P.DEFAULT_CONTEXTS
    assert c.csr(regs["node"].addr) == 2

    c.pio_send(2, 1, b"hello, me", tag=0x1234, src_node=7, src_ctx=9)
    _wait(lambda: c.rx_slot(0)[0] == 1, 30, "the packet in slot 0")
    valid, hdr, payload = c.rx_slot(0)
    assert payload == b"hello, me"
    assert (hdr["src_node"], hdr["src_ctx"], hdr["dst_node"], hdr["dst_ctx"], hdr["tag"], hdr["length"]) == \
        (2, 1, 2, 1, 0x1234, 9)
    _wait(lambda: c.status()["pio_done"] == 1, 30, "pio_done")
    assert c.reg(P.CtxReg.RX_TAIL) == 1
    tr = sim4.trace(2, 1)
    assert (tr["pio_doorbells"], tr["rx_valids"], tr["rx_valid_count"]) == (1, 1, 1)
    assert tr["issue_cycle"] < tr["pio_doorbell_cycle"] < tr["rx_valid_cycle"]

    c.push(77, 0)                              # unknown kind
    c.push(OP_W32, 5000, 1)                    # beyond the page
    assert c.read(OP_R32, 2) == 0xFFFFFFFF     # misaligned load
    assert c.reg(P.CtxReg.ERRORS) == 0
    log = sim4.log_text()[log0:]
    assert "bad queue entry ignored: unknown kind 77" in log
    assert "bad queue entry ignored: store at page offset 0x1388" in log
    assert "bad queue entry ignored: load at page offset 0x2" in log

    # Nothing in flight: after idle_cycles the harness ticks slowly (100 cycles per
    # 20 ms); a queue entry wakes it at once.
    _wait(lambda: sim4.counters()["sleeping"] == 1, 60, "the harness idles")
    c0 = sim4.cycle()
    time.sleep(1.0)
    idle_rate = sim4.cycle() - c0
    assert idle_rate < 20000, f"{idle_rate} cycles in 1 s while idle"
    t0 = time.time()
    assert c.reg(P.CtxReg.RX_TAIL) == 1
    wake_s = time.time() - t0
    assert wake_s < 5, wake_s
    print(f"\nidle: {idle_rate} cycles/s; a read while idle answered in {wake_s * 1e3:.1f} ms wall")

    c.close()
    _wait(lambda: "node 2 ctx 1: reset and free" in sim4.log_text()[log0:], 60, "teardown")
    assert sim4.counters()["clients"] == 0
    assert f"(pid {os.getpid()}) detached from node 2 ctx 1" in sim4.log_text()[log0:]


# ---- longer runs ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("case,n,env", [
    ("emsgsize", 2, {}),
    ("many_to_one", 3, {"RD_MESSAGES": "20"}),
    ("all_to_all", 4, {"RD_MESSAGES": "10"}),
    ("from_given", 4, {}),
])
def test_rawdata_more(sim4, case, n, env):
    """The other rawdata cases of the sw suite, with fewer messages (simulated time)."""
    r = launch(sim4, [str(TESTS / "rawdata_test"), case, "sim"], n, f"rd-{case}", timeout=900, env=env)
    assert r.rc == 0 and not r.fails(), r.out
    assert all(any(ln.startswith(f"ok {case}") for ln in r.nodes[k]) for k in range(n)), r.out


@pytest.mark.slow
def test_conformance_torus(userlib_build):
    """The conformance vectors on a 2x2 torus (its own build: minutes the first time)."""
    with simrun.start("torus:2x2", socket=sim_socket("torus"), timeout=300) as sim:
        assert sim.info["topo"] == "torus:2x2"
        r = launch(sim, [str(TESTS / "hal_conformance"), "sim"], 4, "torus", timeout=600)
        assert r.rc == 0 and not r.fails(), r.out
        assert all(r.nodes[k][-1] == "PASS" for k in range(4)), r.out
    log = sim.log_text()
    assert "PCIe rule broken" not in log and "outside client memory" not in log


@pytest.mark.slow
def test_bit_errors(sim_binary, userlib_build):
    """With bit errors on every cable (BER 1e-6) the link layers replay: the vectors
    still arrive intact and in order."""
    with simrun.start("ring:4", socket=sim_socket("ber"), ber=1e-6) as sim:
        assert sim.info["ber"] == 1e-6
        r = launch(sim, [str(TESTS / "hal_conformance"), "sim", "--case", "vectors", "--case", "fullring"], 4,
                   "ber", timeout=600)
        assert r.rc == 0 and not r.fails(), r.out
        assert "17 vectors, 1104 packets received" in r.ok(0, "vectors")


@pytest.mark.slow
def test_speed(sim_binary, userlib_build):
    """Simulator speed (printed, not asserted): cycles per wall second with the clock
    free-running and nobody attached, and under rawdata all-to-all traffic of 4 nodes."""
    with simrun.start("ring:4", socket=sim_socket("speed-idle"), extra_args=["--free-run"]) as sim:
        time.sleep(1)
        c0, t0 = sim.cycle(), time.time()
        time.sleep(5)
        idle = (sim.cycle() - c0) / (time.time() - t0)
    with simrun.start("ring:4", socket=sim_socket("speed-load")) as sim:
        c0, t0 = sim.cycle(), time.time()
        r = launch(sim, [str(TESTS / "rawdata_test"), "all_to_all", "sim"], 4, "speed", timeout=900,
                   env={"RD_MESSAGES": "30"})
        loaded = (sim.cycle() - c0) / (time.time() - t0)
        assert r.rc == 0, r.out
    print(f"\nring:4 simulator: {idle:.0f} cycles/s idle (free-running), {loaded:.0f} cycles/s loaded; "
          f"load average {os.getloadavg()[0]:.1f}")
    assert idle > 0 and loaded > 0
