"""cocotb bench of HostInterface: a single-node loopback driven by the Python host model.

The Verilog top (:class:`HostLoopTop`) is a HostInterface whose ``tx_source`` feeds its
own ``rx_sink`` through a store-and-forward packet FIFO (``tx_hold`` stalls the
transmit side, to keep a PIO window busy). The cocotb tests live in ``tb_host.py``
and drive it with the host model (``tests/model/pcie.py`` through
``model.pcie_cocotb``) and the host software of ``tests/model/host.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from migen import If, Module, Signal
from litex.soc.interconnect import stream
from litepcie.common import completion_layout, request_layout

from paranic.spec import protocol as P
from paranic.sim.hdl import BUILD_ROOT, run_cocotb, write_verilog
from paranic.hw.common import packet_layout
from paranic.hw.host import HostInterface

HERE = Path(__file__).parent

#: Parameters of the bench's HostInterface (small, for build and run time).
BENCH = dict(n_ctx=4, mtu=256, max_request_bytes=512, max_payload_bytes=256)


class LoopFifo(Module):
    """Store-and-forward packet FIFO: ``source`` shows a packet once it is complete."""

    def __init__(self, depth: int = 512) -> None:
        self.sink = stream.Endpoint(packet_layout())
        self.source = stream.Endpoint(packet_layout())
        self.submodules.fifo = fifo = stream.SyncFIFO(packet_layout(), depth, buffered=True)
        packets = Signal(16)
        self.comb += [
            self.sink.connect(fifo.sink),
            self.source.valid.eq(fifo.source.valid & (packets != 0)),
            fifo.source.ready.eq(self.source.ready & (packets != 0)),
            self.source.data.eq(fifo.source.data),
            self.source.error.eq(fifo.source.error),
            self.source.first.eq(fifo.source.first),
            self.source.last.eq(fifo.source.last),
        ]
        self.sync += packets.eq(packets
                                + (self.sink.valid & self.sink.ready & self.sink.last)
                                - (self.source.valid & self.source.ready & self.source.last))


class HostLoopTop(Module):
    def __init__(self, **kw) -> None:
        self.submodules.host = h = HostInterface(**kw)
        self.submodules.loop = loop = LoopFifo(2048)
        self.tx_hold = Signal()
        self.tx_words = Signal(32)
        self.sync += If(h.tx_source.valid & h.tx_source.ready, self.tx_words.eq(self.tx_words + 1))
        self.node_id = Signal(P.NODE_BITS)
        self.comb += [
            h.node_id.eq(self.node_id),
            loop.sink.valid.eq(h.tx_source.valid & ~self.tx_hold),
            h.tx_source.ready.eq(loop.sink.ready & ~self.tx_hold),
            loop.sink.data.eq(h.tx_source.data),
            loop.sink.first.eq(h.tx_source.first),
            loop.sink.last.eq(h.tx_source.last),
            loop.source.connect(h.rx_sink),
        ]
        self.ios = {self.tx_hold, self.tx_words, self.node_id, h.irq}
        # Wishbone as bus_* ports.
        for n in ("adr", "dat_w", "dat_r", "sel", "cyc", "stb", "we", "ack"):
            s = getattr(h.bus, n)
            port = Signal(len(s), name=f"bus_{n}")
            if n in ("dat_r", "ack"):
                self.comb += port.eq(s)
            else:
                self.comb += s.eq(port)
            self.ios.add(port)
        # DMA ports as dma_rd_source_*, dma_rd_sink_*, dma_wr_source_*.
        for pname, port in (("dma_rd", h.dma_rd), ("dma_wr", h.dma_wr)):
            src = stream.Endpoint(request_layout(64, 64), name=f"{pname}_source")
            snk = stream.Endpoint(completion_layout(64), name=f"{pname}_sink")
            self.comb += [port.source.connect(src), snk.connect(port.sink)]
            self.ios |= set(src.flatten()) | set(snk.flatten())
        for s in (h.cfg_ctx, h.cfg_enable, h.cfg_rx_base, h.cfg_rx_log2, h.cfg_tx_base,
                  h.cfg_tx_log2, h.cfg_status_addr, h.cfg_win_base, h.cfg_win_size,
                  h.cfg_write, h.cfg_reset, h.cfg_state, h.barrier_enter, h.barrier_enter_ctx,
                  h.barrier_done_pulse, h.barrier_done_ctx, *h.counters.values()):
            self.ios.add(s)


#: The same bench with HostInterface's default parameters (16 contexts, MTU 1 KiB).
DEFAULTS = dict(n_ctx=P.DEFAULT_CONTEXTS, mtu=P.DEFAULT_MTU, max_request_bytes=512,
                max_payload_bytes=256)


def build(params: dict = BENCH, name: str = "host_loop") -> Path:
    top = HostLoopTop(**params)
    return write_verilog(top, top.ios, name, BUILD_ROOT / "verilog" / name)


def _env(params: dict = BENCH) -> dict:
    return {f"BENCH_{k.upper()}": str(v) for k, v in params.items()}


def test_host_loopback_cocotb():
    v = build()
    run_cocotb("host_loop", [v], "host_loop", "tb_host", test_dir=HERE, extra_env=_env())


@pytest.mark.slow
def test_host_loopback_cocotb_defaults():
    """All bench tests again with the default parameters (own Verilator build)."""
    v = build(DEFAULTS, "host_loop_default")
    run_cocotb("host_loop_default", [v], "host_loop_default", "tb_host", test_dir=HERE,
               extra_env=_env(DEFAULTS))
