"""cocotb benches of router-only networks with hardware traffic generators/checkers.

The toplevel is ``paranic.hw.testnet.RouterNetwork(topo, with_traffic=True)``.
Parameters come from the environment (so one Verilator build serves all runs):

* ``NODES`` (node count, for the per-node expectations), ``TOPO`` (``ring:8`` ...)
* ``test_patterns``: ``PATTERNS`` (comma list of paranic.hw.traffic.PATTERNS),
  ``COUNT`` (packets per node), ``MIN_LEN``/``MAX_LEN`` (bytes), ``RATE``
  (0..65536), ``SEED``, ``MAX_CYCLES``, ``STALL_CYCLES``
* ``test_bubble``: ``PATTERN``, ``COUNT``, lengths as above: the same load with the
  bubble rule on must drain, with it off must deadlock.
* ``test_sweep``: ``LOADS`` (offered words/cycle/node, comma list), ``LEN``
  (bytes, fixed), ``WARMUP``, ``MEASURE`` (cycles), ``PATTERN``.
* ``test_search``: the same traffic run repeated with ``SEEDS`` seeds (reset in
  between), counting deadlocks (an exploration tool, e.g. for ``bubble="word"``).
* ``RESULT_JSON``: where to write the measurements.
"""

from __future__ import annotations

import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import Timer

from paranic import protocol as P
from paranic.hw.traffic import PATTERN, RATE_ONE
from paranic.topo import Topology

PERIOD_NS = 8


def env_int(name, default):
    return int(os.environ.get(name, default))


async def cycles(n: int) -> None:
    if n > 0:
        await Timer(n * PERIOD_NS, unit="ns")


def rd(dut, name: str) -> int:
    return int(getattr(dut, name).value)


async def reset(dut) -> None:
    for name in ("enable", "clear", "pattern", "rate", "count", "min_len", "max_len", "seed"):
        getattr(dut, name).value = 0
    dut.bubble_en.value = 1
    dut.sys_rst.value = 1
    await cycles(4)
    dut.sys_rst.value = 0
    await cycles(2)
    n = 0
    while not rd(dut, "ready"):
        await cycles(16)
        n += 16
        assert n < 10_000, "routing tables never became ready"


async def start(dut) -> None:
    cocotb.start_soon(Clock(dut.sys_clk, PERIOD_NS, unit="ns").start())
    await Timer(1, unit="ns")  # sample between clock edges from now on
    await reset(dut)


async def clear(dut) -> None:
    dut.clear.value = 1
    await cycles(1)
    dut.clear.value = 0
    await cycles(1)
    while rd(dut, "clearing"):
        await cycles(8)


def snapshot(dut, nodes: int) -> dict:
    s = {k: rd(dut, k) for k in ("cycle", "tx_packets", "tx_words", "rx_packets", "rx_words",
                                 "rx_bytes", "err_hdr", "err_len", "err_seq", "err_payload",
                                 "lat_sum", "lat_max", "router_errors", "backlog", "done")}
    ntx, nrx = rd(dut, "node_tx"), rd(dut, "node_rx")
    s["node_tx"] = [(ntx >> (32 * i)) & 0xFFFFFFFF for i in range(nodes)]
    s["node_rx"] = [(nrx >> (32 * i)) & 0xFFFFFFFF for i in range(nodes)]
    s["errors"] = s["err_hdr"] + s["err_len"] + s["err_seq"] + s["err_payload"]
    return s


async def run_traffic(dut, nodes: int, pattern: str, count: int, min_len: int, max_len: int,
                      rate: int = RATE_ONE, seed: int = 1, max_cycles: int = 50_000_000,
                      stall_cycles: int = 20_000, chunk: int = 2_000) -> dict:
    """Send ``count`` packets from every node; wait until all arrived, or no packet
    arrives for ``stall_cycles`` (deadlock), or ``max_cycles`` pass."""
    dut.pattern.value = PATTERN[pattern]
    dut.count.value = count
    dut.min_len.value = min_len
    dut.max_len.value = max_len
    dut.rate.value = rate
    dut.seed.value = seed
    await clear(dut)
    t0 = rd(dut, "cycle")
    dut.enable.value = 1
    last_rx, last_change = -1, t0
    status = "timeout"
    while True:
        await cycles(chunk)
        s = snapshot(dut, nodes)
        now = s["cycle"]
        if s["done"] and s["rx_packets"] == s["tx_packets"] == count * nodes:
            status = "drained"
            break
        if s["rx_packets"] != last_rx:
            last_rx, last_change = s["rx_packets"], now
        elif now - last_change >= stall_cycles:
            status = "deadlock"
            break
        if now - t0 > max_cycles:
            break
    dut.enable.value = 0
    s["status"] = status
    s["cycles"] = s["cycle"] - t0
    s["in_flight"] = s["tx_packets"] - s["rx_packets"]
    s["pattern"] = pattern
    dut._log.info("%s: %s after %d cycles: tx=%d rx=%d in_flight=%d errors=%d mean_lat=%.1f",
                  pattern, status, s["cycles"], s["tx_packets"], s["rx_packets"], s["in_flight"],
                  s["errors"], s["lat_sum"] / max(1, s["rx_packets"]))
    return s


def expected_rx(topo: Topology, pattern: str, count: int) -> list[int]:
    exp = [0] * topo.nodes
    for src in range(topo.nodes):
        exp[topo.pattern_dst(pattern, src)] += count
    return exp


def write_result(obj) -> None:
    path = os.environ.get("RESULT_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


@cocotb.test()
async def test_patterns(dut):
    """Every packet delivered exactly once, intact, in order; the network drains."""
    topo = Topology.parse(os.environ["TOPO"])
    nodes = topo.nodes
    count = env_int("COUNT", 200)
    min_len, max_len = env_int("MIN_LEN", 0), env_int("MAX_LEN", 256)
    results = {}
    await start(dut)
    for i, pattern in enumerate(os.environ.get("PATTERNS", "uniform").split(",")):
        s = await run_traffic(dut, nodes, pattern, count, min_len, max_len,
                              rate=env_int("RATE", RATE_ONE), seed=env_int("SEED", 1) + i,
                              max_cycles=env_int("MAX_CYCLES", 50_000_000),
                              stall_cycles=env_int("STALL_CYCLES", 20_000))
        results[pattern] = s
        assert s["status"] == "drained", f"{pattern}: {s['status']} with {s['in_flight']} in flight"
        assert s["in_flight"] == 0
        assert s["tx_packets"] == s["rx_packets"] == count * nodes
        assert s["node_tx"] == [count] * nodes
        if pattern != "uniform":
            assert s["node_rx"] == expected_rx(topo, pattern, count), pattern
        assert s["errors"] == 0, {k: s[k] for k in ("err_hdr", "err_len", "err_seq", "err_payload")}
        assert s["router_errors"] == 0
        assert s["rx_words"] == s["tx_words"]
        # the network is empty: nothing arrives after a pause
        await cycles(2_000)
        assert rd(dut, "rx_packets") == s["rx_packets"]
    write_result(results)


@cocotb.test()
async def test_bubble(dut):
    """The same heavy load drains with the bubble rule and deadlocks without it."""
    topo = Topology.parse(os.environ["TOPO"])
    nodes = topo.nodes
    pattern = os.environ.get("PATTERN", "tornado")
    count = env_int("COUNT", 2000)
    min_len, max_len = env_int("MIN_LEN", P.DEFAULT_MTU), env_int("MAX_LEN", P.DEFAULT_MTU)
    stall = env_int("STALL_CYCLES", 20_000)
    await start(dut)
    on = await run_traffic(dut, nodes, pattern, count, min_len, max_len, seed=7,
                           stall_cycles=stall)
    await reset(dut)
    dut.bubble_en.value = 0
    off = await run_traffic(dut, nodes, pattern, count, min_len, max_len, seed=7,
                            stall_cycles=stall)
    write_result({"bubble_on": on, "bubble_off": off})
    assert on["status"] == "drained" and on["errors"] == 0 and on["in_flight"] == 0
    assert off["status"] == "deadlock", off["status"]
    assert off["in_flight"] > 0 and off["errors"] == 0 and off["router_errors"] == 0


@cocotb.test()
async def test_sweep(dut):
    """Offered load sweep: accepted throughput and mean latency per point."""
    topo = Topology.parse(os.environ["TOPO"])
    nodes = topo.nodes
    pattern = os.environ.get("PATTERN", "uniform")
    length = env_int("LEN", P.DEFAULT_MTU)
    words = P.packet_words(length)
    warm, meas = env_int("WARMUP", 20_000), env_int("MEASURE", 50_000)
    loads = [float(x) for x in os.environ.get("LOADS", "0.1,0.5,1.0").split(",")]
    await start(dut)
    points = []
    for i, load in enumerate(loads):
        rate = min(RATE_ONE, max(1, round(load / words * 65536)))
        offered = rate / 65536 * words
        dut.pattern.value = PATTERN[pattern]
        dut.count.value = 0
        dut.min_len.value = length
        dut.max_len.value = length
        dut.rate.value = rate
        dut.seed.value = 1000 + i
        await clear(dut)
        dut.enable.value = 1
        await cycles(warm)
        a = snapshot(dut, nodes)
        await cycles(meas)
        b = snapshot(dut, nodes)
        dut.enable.value = 0
        dc = b["cycle"] - a["cycle"]
        accepted = (b["rx_words"] - a["rx_words"]) / dc / nodes
        npk = b["rx_packets"] - a["rx_packets"]
        lat = (b["lat_sum"] - a["lat_sum"]) / max(1, npk)
        # drain before the next point (all started packets must arrive intact)
        for _ in range(1000):
            await cycles(500)
            s = snapshot(dut, nodes)
            if s["rx_packets"] == s["tx_packets"]:
                await cycles(500)
                s2 = snapshot(dut, nodes)
                if s2["rx_packets"] == s2["tx_packets"] == s["tx_packets"]:
                    break
        s = snapshot(dut, nodes)
        assert s["rx_packets"] == s["tx_packets"], "network did not drain"
        assert s["errors"] == 0 and s["router_errors"] == 0
        dut._log.info("offered %.3f accepted %.3f words/cycle/node, mean latency %.1f cycles",
                      offered, accepted, lat)
        points.append([round(offered, 4), round(accepted, 4), round(lat, 1)])
    write_result({"pattern": pattern, "packet_bytes": length, "packet_words": words,
                  "points": points})


@cocotb.test()
async def test_search(dut):
    """Repeat a traffic run with different seeds (reset in between); report how
    many ended in deadlock. Env: PATTERN, COUNT, MIN_LEN, MAX_LEN, SEEDS, RATE."""
    topo = Topology.parse(os.environ["TOPO"])
    pattern = os.environ.get("PATTERN", "uniform")
    count = env_int("COUNT", 2000)
    min_len, max_len = env_int("MIN_LEN", 0), env_int("MAX_LEN", 64)
    runs = []
    await start(dut)
    for seed in range(env_int("SEEDS", 10)):
        if seed:
            await reset(dut)
        s = await run_traffic(dut, topo.nodes, pattern, count, min_len, max_len,
                              rate=env_int("RATE", RATE_ONE), seed=seed + 1,
                              stall_cycles=env_int("STALL_CYCLES", 5_000))
        runs.append({k: s[k] for k in ("status", "cycles", "rx_packets", "in_flight", "errors")})
        assert s["errors"] == 0 and s["router_errors"] == 0
    write_result({"runs": runs, "deadlocks": sum(r["status"] == "deadlock" for r in runs)})
