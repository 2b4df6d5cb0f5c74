"""The split build (docs/simulator.md, "Split build"): one Verilated model per node, the
cables' delay in the harness. It must behave as the one-model cluster: the links train
in the same cycle (also with a cable cut) and the HAL's 8-byte hardware path takes the
same cycles."""

from __future__ import annotations

import re
import subprocess

import pytest

from paranic.sim import build as simbuild
from paranic.sim import run as simrun

from simtest import BUILD, TESTS, launch, sim_socket

#: The split build is opt-in and its node model is a build of its own (minutes): make test-all.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def split_binary():
    return simbuild.build("ring:4", split=True)


def _latency(sim) -> list[tuple[int, ...]]:
    r = launch(sim, [str(BUILD / "simtests" / "sim_latency"), "30", "8"], 2, "split-latency", timeout=200)
    assert r.rc == 0 and not r.fails(), r.out
    out = []
    for node in (0, 1):
        line = [ln for ln in r.nodes[node] if ln.startswith("direction")][0]
        out.append(tuple(map(int, re.search(
            r"min (\d+) median (\d+) max (\d+) cycles; issue->doorbell (\d+), doorbell->rx valid (\d+)",
            line).groups())))
    return out


def test_split_matches_one_model(split_binary, sim_binary, userlib_build):
    with simrun.start("ring:4", socket=sim_socket("split"), split=True) as sim:
        split_up = sim.info["links_up_cycle"]
        split_lat = _latency(sim)
    with simrun.start("ring:4", socket=sim_socket("onemodel")) as sim:
        one_up = sim.info["links_up_cycle"]
        one_lat = _latency(sim)
    assert split_up == one_up, (split_up, one_up)
    # The hardware path (doorbell -> RX valid) is the same number of cycles; issue->doorbell
    # is the harness's MMIO model, also the same.
    for s, o in zip(split_lat, one_lat):
        assert s[3:] == o[3:], (split_lat, one_lat)


def test_split_cut_cable(split_binary, sim_binary, userlib_build):
    """Cable 0 (nodes 0 and 1) cut from the start: the other links train in the same cycle
    in both builds (the cut cable's ends see nothing: the cut drops words at the cable's
    entry and exit in both)."""
    ups = []
    for split in (True, False):
        with simrun.start("ring:4", socket=sim_socket(f"cut-{split}"), split=split, cut=["0@0"]) as sim:
            ups.append(sim.info["links_up_cycle"])
            log = sim.log_text()
        assert "PCIe rule broken" not in log
    assert ups[0] == ups[1], ups


def test_split_worker_threads_match(split_binary, userlib_build):
    """--threads 2 (docs/simulator.md, "Worker threads"): the node models are evaluated on
    two threads between the harness's steps; the links train in the same cycle and the
    8-byte hardware path takes the same cycles as on one thread."""
    got = []
    for threads in (1, 2):
        with simrun.start("ring:4", socket=sim_socket(f"threads{threads}"), split=True,
                          extra_args=["--threads", str(threads)]) as sim:
            got.append((sim.info["links_up_cycle"], [x[3:] for x in _latency(sim)]))
            log = sim.log_text()
        if threads == 2:
            assert "2 threads evaluate the 4 node models" in log, log[-2000:]
    assert got[0] == got[1], got


def _free_run(binary, tmp_path, args: list[str]) -> tuple[str, int, str]:
    """A free-running split ring:4 (nobody attached): its cable words' fingerprint, the
    cycle it stopped at, its log."""
    r = subprocess.run([str(binary), "--socket", str(tmp_path / "w.sock"), "--shm", str(tmp_path / "w.shm"),
                        "--free-run", "--max-cycles", "120000", "--ber-threshold", "40000",
                        "--cut", "1@50000", "--mend", "1@70000", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PCIe rule broken" not in r.stderr
    fp = re.search(r"cable words fingerprint ([0-9a-f]{16})", r.stderr).group(1)
    stop = int(re.search(r"stopped at cycle (\d+)", r.stderr).group(1))
    return fp, stop, r.stderr


def test_window_free_run_exact(split_binary, tmp_path):
    """--window (docs/simulator.md, "Windows"): nodes advanced in lock-step windows of up
    to the cable's delay, each thread its nodes and their hosts through a whole window.
    With bit errors on every cable (replays, retraining) and cable 1 cut and mended
    mid-run, every word on every cable in every cycle (the fingerprint) is the serial
    run's: windows of 13 (auto) and 5 cycles, on one and two threads. Most cycles run in
    windows (the rest: bring-up and status scripts, cycle by cycle)."""
    want = _free_run(split_binary, tmp_path, [])
    for args in (["--window", "auto"], ["--window", "auto", "--threads", "2"], ["--window", "5", "--threads", "2"]):
        fp, stop, log = _free_run(split_binary, tmp_path, args)
        assert (fp, stop) == want[:2], (args, fp, stop, want[:2])
        m = re.search(r"windows of at most (\d+) cycles: (\d+) windows, (\d+) cycles in them", log)
        assert m and int(m.group(1)) == (13 if args[1] == "auto" else 5), log[-2000:]
        assert int(m.group(3)) > 0.9 * stop, m.group(0)
        assert re.search(r"cable 1 \(node .*\) cut at cycle 50000", log), log[-2000:]


def test_window_matches_serial(split_binary, userlib_build):
    """With clients: the links train in the same cycle and the HAL's 8-byte hardware path
    (issue -> doorbell, doorbell -> RX valid) takes the same cycles with --window auto on
    one and two threads as cycle by cycle."""
    got = []
    for extra in ([], ["--window", "auto"], ["--window", "auto", "--threads", "2"]):
        with simrun.start("ring:4", socket=sim_socket(f"win{len(extra)}"), split=True, extra_args=extra) as sim:
            got.append((sim.info["links_up_cycle"], [x[3:] for x in _latency(sim)]))
            log = sim.log_text()
        assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-2000:]
        if extra:
            assert "lock-step windows of at most 13 cycles" in log, log[-2000:]
    assert got[1] == got[0] and got[2] == got[0], got


def test_window_rawdata(split_binary, userlib_build):
    """Traffic through windows on two threads: rawdata's sizes (0 B .. 1 MiB and 9 chunks
    + 5 bytes to a peer, to itself and back), every message's data checked by the
    receiver and the echo by the sender."""
    with simrun.start("ring:4", socket=sim_socket("win-rd"), split=True,
                      extra_args=["--window", "auto", "--threads", "2"]) as sim:
        r = launch(sim, [str(TESTS / "rawdata_test"), "sizes", "sim"], 2, "win-rd-sizes", timeout=400)
    log = sim.log_text()
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "sizes") == "ok sizes 9 sizes to node 1, to itself and back, 0 .. 1179653 bytes"
    assert r.ok(1, "sizes") == "ok sizes received and echoed 9 messages"
    assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-2000:]
    # Most of the transfer's cycles ran in windows (not cycle by cycle).
    m = re.search(r"stopped at cycle (\d+).*?windows of at most 13 cycles: (\d+) windows, (\d+) cycles", log, re.S)
    assert m and int(m.group(3)) > 0.5 * int(m.group(1)), log[-2000:]


def test_window_needs_a_split_build(sim_binary, split_binary, tmp_path):
    """--window on the one-model build says so instead of starting; a window longer than
    the cable's delay is shortened to it (the lookahead), and bad values are refused."""
    base = ["--socket", str(tmp_path / "s.sock"), "--shm", str(tmp_path / "shm"), "--max-cycles", "10"]
    r = subprocess.run([str(sim_binary), *base, "--window", "auto"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--window needs a split build" in r.stderr, r.stderr
    r = subprocess.run([str(split_binary), *base, "--window", "50"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "window of 50 cycles shortened to 13" in r.stderr, r.stderr[-2000:]
    for bad in ("-1", "x", "13x"):
        r = subprocess.run([str(split_binary), *base, "--window", bad], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "--window" in r.stderr, r.stderr


def test_window_killed_client(split_binary, userlib_build):
    """A client killed in the middle of rawdata traffic through windows on two threads:
    its detach, context reset and the new process's attach run at the windows'
    boundaries (cycle by cycle while their scripts run); all four finish, the survivors'
    packets for it are dropped, the simulator lives on."""
    with simrun.start("ring:4", socket=sim_socket("win-kill"), split=True,
                      extra_args=["--window", "auto", "--threads", "2"]) as sim:
        r = launch(sim, [str(TESTS / "rawdata_test"), "kill", "sim"], 4, "win-kill",
                   extra=["-f", "-k", "3:300:phase-b", "-r", "500"], timeout=300)
        assert sim.alive()
    log = sim.log_text()
    assert r.rc == 0 and not r.fails(), r.out
    m = re.match(r"ok kill reborn node 3: 3 acks, \d+ late phase-B messages, (\d+) packets dropped while dead",
                 r.ok(3, "kill reborn"))
    assert m and int(m.group(1)) > 0, r.out
    assert len(re.findall(r"detached from node \d ctx 0", log)) == 5, log[-3000:]
    assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-2000:]
