"""The Python bindings (``paranic.lib``) against the running 4-node ring simulator: two
nodes of a 2-node job in this process (the simulator found through
``PARANIC_SIM_SOCKET``, as ``hal_sim.c`` looks for it), a threaded barrier, and what
only the sim backend has: ``sim_info()``, simulated time and trace records."""

from __future__ import annotations

import errno
import os
import random
import threading
import time

import pytest

from paranic.spec import protocol as P


@pytest.fixture(scope="module")
def L(userlib_build):
    from paranic import lib

    return lib


@pytest.fixture
def sim(sim4, monkeypatch):
    """sim4, with this process's environment pointing libparanic at it."""
    for k in list(os.environ):
        if k.startswith("PARANIC_"):
            monkeypatch.delenv(k)
    for k, v in sim4.env({}).items():
        monkeypatch.setenv(k, v)
    return sim4


@pytest.fixture
def pair(L, sim):
    """Nodes 0 and 1 of a 2-node job, any free context each."""
    a = L.Hal.open(node=0, nodes=2)
    b = L.Hal.open(node=1, nodes=2)
    yield a, b
    a.close()
    b.close()


def run(fn) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


def test_exchange_and_barrier(L, pair):
    a, b = pair
    assert (a.backend, a.num_nodes, b.node_id, a.mtu) == ("sim", 2, 1, P.DEFAULT_MTU)
    # PIO node 0 -> node 1
    a.send_pio(1, b.ctx_id, 0x1234_5678_9ABC_DEF0, b"8 bytes!")
    hdr, data = b.recv(timeout_ns=20_000_000_000)
    assert (hdr.src_node, hdr.src_ctx, hdr.dst_node, hdr.dst_ctx, hdr.type, hdr.tag, hdr.som, hdr.eom, data) == \
        (0, a.ctx_id, 1, b.ctx_id, P.PacketType.DATA, 0x1234_5678_9ABC_DEF0, True, True, b"8 bytes!")
    # DMA node 1 -> node 0: three packets (send_dma copies into the simulated host's DMA heap)
    msg = random.Random(1).randbytes(2 * a.mtu + 5)
    b.send_dma(0, a.ctx_id, 77, msg)
    parts = [a.recv(timeout_ns=20_000_000_000) for _ in range(3)]
    assert [(h.src_node, h.tag, h.length, h.som, h.eom) for h, _ in parts] == \
        [(1, 77, a.mtu, True, False), (1, 77, a.mtu, False, False), (1, 77, 5, False, True)]
    assert b"".join(p for _, p in parts) == msg
    # barrier: two nodes in two threads, twice
    done0 = a.status()["barrier_done"], b.status()["barrier_done"]
    for _ in range(2):
        t = run(b.barrier)
        a.barrier()
        t.join(30)
        assert not t.is_alive()
    assert (a.status()["barrier_done"] - done0[0], b.status()["barrier_done"] - done0[1]) == (2, 2)
    # rawdata over the same contexts, both ways at once
    ra, rb = L.RawData.attach(a), L.RawData.attach(b)
    big = random.Random(2).randbytes(5000)
    t = run(lambda: (rb.send(0, big[::-1]), rb.hal.tx_wait()))
    ra.send(1, big)
    assert rb.recv(src=0, timeout_ns=30_000_000_000) == (0, big)
    assert ra.recv(timeout_ns=30_000_000_000) == (1, big[::-1])
    t.join(30)
    ra.close()
    rb.close()


def test_info_time_and_trace(L, pair, sim):
    a, b = pair
    info = a.sim_info()
    assert list(info) == [f for f, _ in L.ffi.typeof("pn_sim_info_t").fields]
    lat = sim.info["latency_cycles"]
    assert (info["nodes"], info["topo_x"], info["topo_y"], info["clk_hz"]) == (4, 4, 1, P.TARGET_CLK_HZ)
    assert (info["mmio_write_cycles"], info["mmio_read_cycles"], info["dma_read_cycles"],
            info["dma_write_cycles"]) == (lat["mmio_write"], lat["mmio_read"], lat["dma_read"], lat["dma_write"])
    assert 0 < info["cycle"] <= sim.cycle() and info["dma_refused"] == 0

    # simulated time: cycles() and now_ns() are one clock; an MMIO read round trip takes
    # at least mmio_read cycles of it
    ns_per_cycle = 10**9 // P.TARGET_CLK_HZ
    c0 = a.cycles()
    t0 = a.now_ns()
    a.status()                                   # reads STATUS and RX_TAIL through the simulator
    t1 = a.now_ns()
    assert c0 * ns_per_cycle <= t0 and t1 - t0 >= lat["mmio_read"] * ns_per_cycle
    assert a.cycles() * ns_per_cycle >= t1
    w0, s0 = time.monotonic_ns(), a.now_ns()
    time.sleep(0.05)
    assert 0 < a.now_ns() - s0 < (time.monotonic_ns() - w0) / 10   # far slower than the wall clock

    # trace records: one 8-byte PIO send, one hop, one packet in flight at a time
    latencies = []
    for i in range(3):
        sa0, sb0 = a.sim_trace(0, a.ctx_id), a.sim_trace(1, b.ctx_id)
        a.send_pio(1, b.ctx_id, i, b"12345678")
        assert b.recv(timeout_ns=20_000_000_000)[1] == b"12345678"
        sa, sb = a.sim_trace(0, a.ctx_id), b.sim_trace(1, b.ctx_id)
        assert sb == sim.trace(1, b.ctx_id)     # the bindings and the simulator's shared memory agree
        assert (sa["pio_doorbells"] - sa0["pio_doorbells"], sb["rx_valids"] - sb0["rx_valids"],
                sb["rx_valid_count"] - sb0["rx_valid_count"]) == (1, 1, 1)
        assert sa0["issue_cycle"] < sa["issue_cycle"] < sa["pio_doorbell_cycle"] < sb["rx_valid_cycle"]
        assert sb["rx_valid_cycle"] > sb0["rx_valid_cycle"] and sa["generation"] >= 1
        latencies.append(sb["rx_valid_cycle"] - sa["issue_cycle"])
    # docs/simulator.md ("Trace records"): issue -> valid word = the model's MMIO write,
    # DMA write (to the polling CPU) and cable plus about 40 cycles of bus and NIC work
    # (more when the client was descheduled between its stores)
    base = lat["mmio_write"] + lat["dma_write"] + lat["cable"]
    assert base + 20 <= min(latencies) <= base + 60, (latencies, lat)
    with pytest.raises(L.PnError) as e:
        a.sim_trace(99, 0)
    assert e.value.errno == errno.EINVAL
