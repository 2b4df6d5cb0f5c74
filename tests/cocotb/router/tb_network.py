"""cocotb tests of router-only networks with hardware traffic generators/checkers.

The toplevel is ``paranic.sim.testnet.RouterNetwork(topo, with_traffic=True)``.
Parameters come from the environment (so one Verilator build serves all runs):

* ``TOPO`` (``ring:8`` ...)
* ``test_patterns``: ``PATTERNS`` (comma list of paranic.sim.traffic.PATTERNS),
  ``COUNT`` (packets per node), ``MIN_LEN``/``MAX_LEN`` (bytes), ``RATE``
  (0..65536), ``SEED``, ``MAX_CYCLES``, ``STALL_CYCLES``
* ``test_bubble``: ``PATTERN``, ``COUNT``, lengths as above: the same load with the
  bubble rule on must drain, with it off must deadlock.
* ``RESULT_JSON``: where to write the measurements.

The helpers and the benchmark's sweeps are in :mod:`paranic.bench.router_tb`.
"""

from __future__ import annotations

import os

import cocotb

from paranic.bench.router_tb import (RATE_ONE, cycles, env_int, rd, reset, run_traffic, start,
                                     write_result)
from paranic.spec import protocol as P
from paranic.spec.topo import Topology


def expected_rx(topo: Topology, pattern: str, count: int) -> list[int]:
    exp = [0] * topo.nodes
    for src in range(topo.nodes):
        exp[topo.pattern_dst(pattern, src)] += count
    return exp


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
