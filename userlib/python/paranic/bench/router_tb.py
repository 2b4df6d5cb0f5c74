"""cocotb benches of the router benchmark (``paranic bench router``), under Verilator.

They run against Verilog from :mod:`paranic.sim.testnet` (built and cached by
:mod:`paranic.bench.router`); the tests in ``tests/cocotb/router`` reuse the helpers.

* ``test_hop_latency`` (one ``RouterTop``): for every (input, output) pair, two
  figures. *Complete to header out*: cycles from the cycle a small packet is complete
  at the head of the input FIFO (``in_packets_<in>`` turns non-zero) to the cycle its
  header is valid at the output register (``hdr_out_<out>``): the router's decision
  and crossbar time. *Header in to header out* for an MTU packet: cycles from the
  cycle its header word enters the input to the cycle the header is valid at the
  output. Link inputs are cut-through (the header leaves before the tail is in);
  the injection input is store-and-forward, so its figure includes writing the
  packet's words.
* ``test_sweep`` (a ``RouterNetwork`` with traffic generators): an offered-load sweep,
  accepted throughput and mean latency per point. Env: ``TOPO``, ``LOADS`` (offered
  words/cycle/node, comma list), ``LEN`` (bytes, fixed), ``WARMUP``, ``MEASURE``
  (cycles), ``PATTERN``, ``SEED`` (of the first point; +2 per point), ``BUBBLE``
  (0: bubble rule off).
* ``test_search``: the same traffic run repeated with ``SEEDS`` seeds (reset in
  between), counting deadlocks (an exploration tool, e.g. for ``bubble="word"``).

Results go to the JSON file ``RESULT_JSON`` names.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer

from paranic.sim.traffic import PATTERN, RATE_ONE
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

PERIOD_NS = 8
NAMES = ["local", "xp", "xm", "yp", "ym"]

# ---- one router ------------------------------------------------------------------------------


def nports(dut) -> int:
    return 5 if hasattr(dut, "yp_sink_valid") else 3


async def reset_until_ready(dut) -> None:
    """Hold reset for 3 cycles, then wait (at falling edges) until the routing tables
    are loaded (``ready``)."""
    dut.sys_rst.value = 1
    for _ in range(3):
        await RisingEdge(dut.sys_clk)
    dut.sys_rst.value = 0
    while True:
        await FallingEdge(dut.sys_clk)
        if int(dut.ready.value):
            break


async def setup(dut):
    cocotb.start_soon(Clock(dut.sys_clk, PERIOD_NS, unit="ns").start())
    n = nports(dut)
    dut.bubble_en.value = 1
    dut.table_we.value = 0
    dut.local_source_ready.value = 1
    for p in range(n):
        getattr(dut, f"{NAMES[p]}_sink_valid").value = 0
    for p in range(1, n):
        nm = NAMES[p]
        getattr(dut, f"{nm}_source_ready").value = 1
        getattr(dut, f"{nm}_credit_valid").value = 0
        getattr(dut, f"{nm}_credit_words").value = 0
        getattr(dut, f"{nm}_up").value = 1
    await reset_until_ready(dut)


async def load_table(dut, table: dict[int, int]):
    for adr, port in table.items():
        await FallingEdge(dut.sys_clk)
        dut.table_we.value = 1
        dut.table_adr.value = adr
        dut.table_dat.value = port
    await FallingEdge(dut.sys_clk)
    dut.table_we.value = 0


def packet(dst: int, src: int, length: int, tag: int, rng: random.Random) -> list[int]:
    w0, _ = P.header_words(dst_node=dst, src_node=src, length=length)
    return [w0, tag] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


async def _send(dut, src: int, words: list[int]) -> int:
    """Drive ``words`` into input ``src``, one per cycle; returns the cycle its header
    word is on the input (taken at the next rising edge: the input FIFO is empty)."""
    nm = NAMES[src]
    t_hdr = -1
    for i, w in enumerate(words):
        await FallingEdge(dut.sys_clk)
        if i == 0:
            t_hdr = int(dut.cycle.value)
        getattr(dut, f"{nm}_sink_valid").value = 1
        getattr(dut, f"{nm}_sink_payload_data").value = w
        getattr(dut, f"{nm}_sink_first").value = int(i == 0)
        getattr(dut, f"{nm}_sink_last").value = int(i == len(words) - 1)
        getattr(dut, f"{nm}_sink_payload_error").value = 0
    await FallingEdge(dut.sys_clk)
    getattr(dut, f"{nm}_sink_valid").value = 0
    return t_hdr


async def _hop(dut, src: int, dst: int, length: int, rng: random.Random) -> tuple[int, int]:
    """One packet of ``length`` bytes from input ``src`` to output ``dst``: (cycles from
    complete at the input to header out, cycles from header in to header out)."""
    words = packet(dst, src, length, src * 16 + dst, rng)
    seen = {}

    async def watch():
        # watched while the packet is being sent: from a link input (cut-through) the
        # header leaves before the tail is in
        for _ in range(len(words) + 40):
            cyc = int(dut.cycle.value)
            if "in" not in seen and int(getattr(dut, f"in_packets_{NAMES[src]}").value):
                seen["in"] = cyc
            if "out" not in seen and int(getattr(dut, f"hdr_out_{NAMES[dst]}").value):
                seen["out"] = cyc
            if len(seen) == 2:
                return
            await FallingEdge(dut.sys_clk)

    watcher = cocotb.start_soon(watch())
    t_hdr = await _send(dut, src, words)
    await watcher
    t_in, t_out = seen.get("in"), seen.get("out")
    assert t_in is not None and t_out is not None, (src, dst, length)
    for _ in range(len(words) + 20):  # let it drain
        await FallingEdge(dut.sys_clk)
    if dst:  # give the credits back
        getattr(dut, f"{NAMES[dst]}_credit_valid").value = 1
        getattr(dut, f"{NAMES[dst]}_credit_words").value = len(words)
        await FallingEdge(dut.sys_clk)
        getattr(dut, f"{NAMES[dst]}_credit_valid").value = 0
    return t_out - t_in, t_out - t_hdr


@cocotb.test()
async def test_hop_latency(dut):
    """Unloaded hop latency, every input to every output: 4 cycles from a complete
    packet to its header out with the route kernel's Migen twin (the router's default
    ``route_fn``; 3 with the table alone), the same for every pair; header in to
    header out for an MTU packet."""
    await setup(dut)
    n = nports(dut)
    await load_table(dut, {d: d for d in range(n)})
    rng = random.Random(1)
    small = 24
    pairs, mtu_pairs = {}, {}
    for src in range(n):
        for dst in range(n):
            key = f"{NAMES[src]}->{NAMES[dst]}"
            pairs[key], _ = await _hop(dut, src, dst, small, rng)
            _, mtu_pairs[key] = await _hop(dut, src, dst, P.DEFAULT_MTU, rng)
    dut._log.info("complete -> header out per pair: %s", pairs)
    dut._log.info("MTU packet, header in -> header out per pair: %s", mtu_pairs)
    res = {"pairs": pairs, "max": max(pairs.values()), "min": min(pairs.values()),
           "small_bytes": small, "mtu_bytes": P.DEFAULT_MTU,
           "mtu_header_pairs": mtu_pairs, "mtu_header_max": max(mtu_pairs.values()),
           "mtu_header_min": min(mtu_pairs.values())}
    write_result(res)
    assert res["max"] <= 4
    assert len(set(pairs.values())) == 1
    # link inputs are cut-through: the header leaves long before the tail is in; the
    # injection input is store-and-forward: not before the last word is in
    link_in = [v for k, v in mtu_pairs.items() if not k.startswith(NAMES[0] + "->")]
    local_in = [v for k, v in mtu_pairs.items() if k.startswith(NAMES[0] + "->")]
    res["mtu_header_link_max"] = max(link_in)
    res["mtu_header_local_min"] = min(local_in)
    write_result(res)
    assert max(link_in) <= 8
    assert min(local_in) >= P.packet_words(P.DEFAULT_MTU)


# ---- networks of routers with traffic generators ---------------------------------------------


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


def write_result(obj) -> None:
    path = os.environ.get("RESULT_JSON")
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


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
    seed0 = env_int("SEED", 1000)
    await start(dut)
    # BUBBLE=0: bubble rule off (to measure what it costs; can deadlock a torus)
    dut.bubble_en.value = env_int("BUBBLE", 1)
    points = []
    for i, load in enumerate(loads):
        rate = min(RATE_ONE, max(1, round(load / words * 65536)))
        offered = rate / 65536 * words
        dut.pattern.value = PATTERN[pattern]
        dut.count.value = 0
        dut.min_len.value = length
        dut.max_len.value = length
        dut.rate.value = rate
        # + 2 per point: the generators force their seeds odd, so seeds 2k and 2k+1
        # would repeat the same traffic
        dut.seed.value = seed0 + 2 * i
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
