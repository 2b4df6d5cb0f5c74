"""paranic.hw.pcie_bar0.Bar0Master (Migen simulator): multi-dword BAR0 writes become one
Wishbone write per dword; 1-dword reads are completed; LitePCIe's master loses every
dword after the first (the finding the module documents)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from litex.soc.interconnect import stream, wishbone
from litepcie.common import completion_layout, request_layout
from litepcie.frontend.wishbone import LitePCIeWishboneMaster
from migen import Module, Signal, passive, run_simulation

from paranic.hw.pcie_bar0 import Bar0Master

WORDS = 64
CMP_ID = 0x0100


class Dut(Module):
    def __init__(self, kind: str, data_width: int = 64, wishbone_width: int = 32) -> None:
        self.port = port = SimpleNamespace(sink=stream.Endpoint(request_layout(data_width)),
                                           source=stream.Endpoint(completion_layout(data_width)))
        phy_id = Signal(16, reset=CMP_ID)
        if kind == "paranic":
            self.submodules.master = m = Bar0Master(port, phy_id, data_width=data_width,
                                                    wishbone_width=wishbone_width)
        else:
            ep = SimpleNamespace(crossbar=SimpleNamespace(get_slave_port=lambda dec: port),
                                 phy=SimpleNamespace(id=phy_id))
            self.submodules.master = m = LitePCIeWishboneMaster(ep)
        ww = len(m.wishbone.dat_w)
        self.submodules.ram = ram = wishbone.SRAM(WORDS * 4, bus=wishbone.Interface(ww, 32))
        self.comb += m.wishbone.connect(ram.bus)
        self.writes: list[tuple[int, int]] = []

    @passive
    def beat_monitor(self):
        """Records every acknowledged Wishbone write as (word address, sel, data)."""
        b = self.master.wishbone
        while True:
            yield
            if (yield b.cyc) and (yield b.stb) and (yield b.we) and (yield b.ack):
                self.writes.append(((yield b.adr), (yield b.sel), (yield b.dat_w)))


def _dwords_to_beats(dwords: list[int], n_dw: int) -> list[int]:
    out = []
    for i in range(0, len(dwords), n_dw):
        chunk = dwords[i:i + n_dw] + [0xDEADBEEF] * (n_dw - len(dwords[i:i + n_dw]))
        out.append(sum(d << (32 * k) for k, d in enumerate(chunk)))
    return out


def _request(dut, we: int, adr: int, dwords: list[int], length: int | None = None,
             tag: int = 0, n_dw: int = 2, valid_gap: bool = False):
    """Sends one request (``dwords`` data for a write, none for a read) on the port."""
    s = dut.port.sink
    beats = _dwords_to_beats(dwords, n_dw) if we else [0]
    for k, dat in enumerate(beats):
        yield s.valid.eq(1)
        yield s.first.eq(k == 0)
        yield s.last.eq(k == len(beats) - 1)
        yield s.we.eq(we)
        yield s.adr.eq(adr)
        yield s.len.eq(len(dwords) if length is None else length)
        yield s.tag.eq(tag)
        yield s.req_id.eq(0x0000)
        yield s.dat.eq(dat)
        yield
        while not (yield s.ready):
            yield
        if valid_gap:
            yield s.valid.eq(0)
            yield
    yield s.valid.eq(0)


def _ram(dut, n: int):
    """The first ``n`` dwords of the RAM (either width)."""
    out = []
    if len(dut.ram.bus.dat_w) == 64:
        for i in range((n + 1) // 2):
            q = yield dut.ram.mem[i]
            out += [q & 0xFFFFFFFF, q >> 32]
        return out[:n]
    for i in range(n):
        out.append((yield dut.ram.mem[i]))
    return out


def _run(kind: str, gen, data_width: int = 64, wishbone_width: int = 32) -> Dut:
    dut = Dut(kind, data_width, wishbone_width)
    run_simulation(dut, [gen(dut), _completions(dut), dut.beat_monitor()])
    return dut


@passive
def _completions(dut):
    """Takes every completion (ready always) into ``dut.cpl``."""
    src = dut.port.source
    dut.cpl = []
    yield src.ready.eq(1)
    while True:
        yield
        if (yield src.valid):
            dut.cpl.append(dict(dat=(yield src.dat) & 0xFFFFFFFF, tag=(yield src.tag),
                                len=(yield src.len), cmp_id=(yield src.cmp_id)))


@pytest.mark.parametrize("data_width,wishbone_width", [(64, 32), (128, 32), (64, 64), (128, 64)])
def test_multi_dword_writes_and_reads(data_width, wishbone_width):
    n_dw = data_width // 32
    seen = {}

    def gen(dut):
        # A 64-bit store: one 2-dword MWr at word 4.
        yield from _request(dut, 1, 4 * 4, [0x11111111, 0x22222222], n_dw=n_dw)
        # 5 dwords (3 beats at 64 bits), with gaps between the beats.
        yield from _request(dut, 1, 10 * 4, [0xA0 + i for i in range(5)], n_dw=n_dw, valid_gap=True)
        # A 1-dword write, then reads of what was written.
        yield from _request(dut, 1, 20 * 4, [0xCAFEF00D], n_dw=n_dw)
        for k, w in enumerate((4, 5, 14, 20, 21)):
            yield from _request(dut, 0, w * 4, [], length=1, tag=k, n_dw=n_dw)
        for _ in range(4):
            yield
        seen["ram"] = yield from _ram(dut, WORDS)
        seen["cpl"] = list(dut.cpl)

    _run("paranic", gen, data_width, wishbone_width)
    ram = seen["ram"]
    assert ram[4:6] == [0x11111111, 0x22222222]
    assert ram[10:15] == [0xA0 + i for i in range(5)]
    assert ram[15] == 0 and ram[9] == 0                   # nothing beyond the length
    assert ram[20] == 0xCAFEF00D and ram[21] == 0          # 1-dword write: one word only
    assert [c["dat"] for c in seen["cpl"]] == [0x11111111, 0x22222222, 0xA4, 0xCAFEF00D, 0]
    assert [c["tag"] for c in seen["cpl"]] == [0, 1, 2, 3, 4]
    assert all(c["len"] == 1 and c["cmp_id"] == CMP_ID for c in seen["cpl"])


@pytest.mark.parametrize("data_width", [64, 128])
def test_wide_bus_one_beat_per_qword(data_width):
    """wishbone_width=64: a 64-bit store (2-dword MWr, 8-aligned) is ONE Wishbone write with
    sel 0xFF; 1-dword writes are one beat on their half; an unaligned 2-dword write is two
    beats; a 5-dword write from an odd dword is three (upper, full, full)."""
    n_dw = data_width // 32
    seen = {}

    def gen(dut):
        yield from _request(dut, 1, 4 * 4, [0x11111111, 0x22222222], n_dw=n_dw)   # qword 2
        yield from _request(dut, 1, 9 * 4, [0x33333333], n_dw=n_dw)               # qword 4, upper
        yield from _request(dut, 1, 12 * 4, [0x44444444], n_dw=n_dw)              # qword 6, lower
        yield from _request(dut, 1, 15 * 4, [0x55, 0x66], n_dw=n_dw)              # qwords 7, 8
        yield from _request(dut, 1, 21 * 4, [0xA0 + i for i in range(5)], n_dw=n_dw, valid_gap=True)
        for _ in range(4):
            yield
        seen["ram"] = yield from _ram(dut, WORDS)

    dut = _run("paranic", gen, data_width, wishbone_width=64)
    ram = seen["ram"]
    assert dut.writes[0] == (2, 0xFF, 0x22222222_11111111)
    assert dut.writes[1][:2] == (4, 0xF0) and dut.writes[1][2] >> 32 == 0x33333333
    assert dut.writes[2][:2] == (6, 0x0F) and dut.writes[2][2] & 0xFFFFFFFF == 0x44444444
    assert [w[:2] for w in dut.writes[3:5]] == [(7, 0xF0), (8, 0x0F)]
    assert [w[:2] for w in dut.writes[5:]] == [(10, 0xF0), (11, 0xFF), (12, 0xFF)]
    assert ram[4:6] == [0x11111111, 0x22222222] and ram[8] == 0 and ram[9] == 0x33333333
    assert ram[12:14] == [0x44444444, 0] and ram[15:17] == [0x55, 0x66]
    assert ram[21:26] == [0xA0 + i for i in range(5)] and ram[20] == 0 and ram[26] == 0


@pytest.mark.parametrize("wishbone_width", [32, 64])
def test_length_beyond_data_and_stray_beats(wishbone_width):
    """A request whose beats end before its length stops at its last beat; beats past
    a short length are drained; a beat without ``first`` is dropped; the master then
    serves the next request normally."""
    seen = {}

    def gen(dut):
        yield from _request(dut, 1, 0, [1, 2], length=3)          # says 3, carries 2
        yield from _request(dut, 1, 8 * 4, [5, 6, 7, 8], length=1)  # says 1, carries 4
        s = dut.port.sink                                         # a stray beat
        yield s.valid.eq(1); yield s.first.eq(0); yield s.last.eq(1); yield s.we.eq(1)
        yield s.dat.eq(0x99)
        yield
        yield s.valid.eq(0)
        yield from _request(dut, 1, 16 * 4, [0x77, 0x78])
        for _ in range(4):
            yield
        seen["ram"] = yield from _ram(dut, WORDS)

    _run("paranic", gen, wishbone_width=wishbone_width)
    ram = seen["ram"]
    assert ram[0:3] == [1, 2, 0]
    assert ram[8:12] == [5, 0, 0, 0]
    assert ram[16:18] == [0x77, 0x78]
    assert 0x99 not in ram


def test_litepcie_master_drops_the_upper_dword():
    """The finding: LitePCIe's BAR0 master writes only the first dword of a 64-bit store."""
    seen = {}

    def gen(dut):
        yield from _request(dut, 1, 4 * 4, [0x11111111, 0x22222222])
        for _ in range(4):
            yield
        seen["ram"] = yield from _ram(dut, 8)

    _run("litepcie", gen)
    assert seen["ram"][4] == 0x11111111
    assert seen["ram"][5] == 0            # the upper half never reached the bus


def test_bad_width():
    port = SimpleNamespace(sink=stream.Endpoint(request_layout(64)),
                           source=stream.Endpoint(completion_layout(64)))
    with pytest.raises(ValueError, match="multiple of 32"):
        Bar0Master(port, Signal(16), data_width=48)
    with pytest.raises(ValueError, match="wishbone_width"):
        Bar0Master(port, Signal(16), wishbone_width=128)
