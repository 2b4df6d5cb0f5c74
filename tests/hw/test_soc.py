"""ParaNicSoC: elaboration and BAR0 decode through LitePCIe, in Migen's simulator.

The SoC's PCIe PHY is a stand-in at LitePCIe's PHY boundary (TLP streams, ``msi``,
``id``). The host side is a second LitePCIe endpoint whose crossbar master port issues
memory reads/writes: its packetizer makes the TLPs the SoC's depacketizer takes, and the
SoC's completions come back through its depacketizer. So every access crosses the SoC's
real TLP depacketizer/packetizer, crossbar, BAR0 Wishbone master, BAR0 window, the SoC
bus and the NicCore's decoder. (The cocotb bench in tests/cocotb/soc/ does the same
from a root-complex model at the Xilinx hard IP's boundary.)
"""

from __future__ import annotations

import pytest
from migen import Module, Signal, run_simulation
from litex.build.generic_platform import Pins
from litex.build.sim import SimPlatform
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litepcie.common import msi_layout, phy_layout
from litepcie.core import LitePCIeEndpoint
from litepcie.phy.common import get_bar_mask

from paranic.hw import soc as S
from paranic.hw.soc import ParaNicSoC
from paranic.spec import protocol as P

PARAMS = dict(n_links=2, n_ctx=4, mtu=256)


class StandInPHY(LiteXModule):
    """LitePCIe's PHY boundary (shared request/completion TLP streams, 64-bit)."""
    endianness = "little"
    qword_aligned = False

    def __init__(self, bar0_size: int = P.BAR0_BYTES) -> None:
        self.data_width = 64
        self.bar0_size = bar0_size
        self.bar0_mask = get_bar_mask(bar0_size)
        self.sink = stream.Endpoint(phy_layout(64))
        self.source = stream.Endpoint(phy_layout(64))
        self.msi = stream.Endpoint(msi_layout())
        self.id = Signal(16)
        self.max_request_size = Signal(16, reset=512)
        self.max_payload_size = Signal(16, reset=256)


def _platform() -> SimPlatform:
    return SimPlatform("sim", [("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1))])


class Bench(Module):
    def __init__(self, msi_type: str = "msi-multi-vector") -> None:
        self.submodules.soc = soc = ParaNicSoC(_platform(), 125e6, with_cpu=False, **PARAMS)
        phy = StandInPHY()
        soc.pcie_phy = phy
        soc.add_paranic_pcie(phy, msi_type=msi_type)
        self.submodules.host_phy = host_phy = StandInPHY(bar0_size=1 << 30)
        self.submodules.host = host = LitePCIeEndpoint(host_phy, endianness="little", address_width=32)
        self.port = host.crossbar.get_master_port()
        self.comb += [
            host_phy.sink.connect(phy.source),
            phy.sink.connect(host_phy.source),
            phy.msi.ready.eq(1),
        ]


def _access(port, adr: int, data: int | None = None):
    """One 32-bit BAR0 access from the host side; returns the read data."""
    src, snk = port.source, port.sink
    yield src.valid.eq(1)
    yield src.first.eq(1)
    yield src.last.eq(1)
    yield src.we.eq(data is not None)
    yield src.adr.eq(adr)
    yield src.len.eq(1)
    yield src.dat.eq(0 if data is None else data)
    yield src.channel.eq(port.channel)
    while True:
        yield
        if (yield src.ready):
            break
    yield src.valid.eq(0)
    if data is not None:
        for _ in range(40):  # let the posted write land
            yield
        return None
    yield snk.ready.eq(1)
    for _ in range(400):
        yield
        if (yield snk.valid):
            v = (yield snk.dat) & 0xFFFFFFFF
            yield
            yield snk.ready.eq(0)
            return v
    raise TimeoutError(f"no completion for BAR0 read {adr:#x}")


def test_soc_elaborates_without_pcie():
    soc = ParaNicSoC(_platform(), 125e6, with_cpu=False, **PARAMS)
    soc.finalize()
    assert soc.bus.regions["paranic"].origin == S.PARANIC_ORIGIN
    assert soc.bus.regions["paranic"].size == P.BAR0_BYTES
    # The NicCore's CSRs stay in its own bank (BAR0's CSR region), not in LiteX's.
    assert not any(name.startswith("nic") for name in soc.csr.regions)


def test_soc_rejects_bad_input():
    soc = ParaNicSoC(_platform(), 125e6, with_cpu=False, **PARAMS)
    phy = StandInPHY()
    phy.data_width = 128
    with pytest.raises(ValueError, match="64 bits"):
        soc.add_paranic_pcie(phy)
    with pytest.raises(ValueError, match="bar0_size"):
        soc.add_paranic_pcie(StandInPHY(bar0_size=1 << 16))
    with pytest.raises(ValueError, match="msi_type"):
        soc.add_paranic_pcie(StandInPHY(), msi_type="legacy")
    with pytest.raises(ValueError, match="link port 2"):
        soc.add_link_phy(2, None)
    with pytest.raises(ValueError, match="LEDs"):
        soc.add_link_leds([0])
    with pytest.raises(ValueError, match="node_id"):
        ParaNicSoC(_platform(), 125e6, with_cpu=False, node_id=P.MAX_NODES, **PARAMS)


def test_msix_table_at_spec_offsets():
    tb = Bench("msi-x")
    tb.soc.finalize()
    csr = tb.soc.bus.regions["csr"].origin
    regions = tb.soc.csr.regions
    assert regions["pcie_msi_table"].origin - csr + P.BAR0_SOC_CSR_OFFSET == P.BAR0_MSIX_TABLE_OFFSET
    assert regions["pcie_msi"].origin - csr + P.BAR0_SOC_CSR_OFFSET + S.MSIX_PBA_BANK_OFFSET == \
        P.BAR0_MSIX_PBA_OFFSET
    assert [c.name for c in regions["pcie_msi"].obj][:3] == ["enable", "reserved0", "pba"]


@pytest.mark.slow   # about 60 s of Migen simulation; make test's cocotb SoC bench reads the
# identity, a context page and the doorbell over BAR0 through the PCIe root-complex model
def test_bar0_decode(msi_type="msi-multi-vector"):
    """Context pages, the NicCore's CSR bank and the SoC's CSR window, over BAR0."""
    from paranic.hw.standalone import NicCoreStandalone
    regs = NicCoreStandalone(**PARAMS).csr_map()
    tb = Bench(msi_type)
    got = {}

    def gen():
        for _ in range(10):
            yield
        port = tb.port
        rd = lambda a: _access(port, a)  # noqa: E731
        got["ident"] = yield from rd(regs["ident"].addr)
        got["version"] = yield from rd(regs["version"].addr)
        yield from _access(port, regs["node"].addr, 0x2A)
        got["node"] = yield from rd(regs["node"].addr)
        got["n_ctx"] = yield from rd(regs["host_info_n_ctx"].addr)
        # Enable context 2 over the privileged CSRs: only its page says ENABLED.
        yield from _access(port, regs["host_ctx_sel"].addr, 2)
        yield from _access(port, regs["host_ctx_enable"].addr, 1)
        yield from _access(port, regs["host_ctx_write"].addr, 1)
        page = lambda c: P.BAR0_CTX_OFFSET + c * P.CTX_PAGE_BYTES  # noqa: E731
        got["status"] = []
        for c in range(4):
            got["status"].append((yield from rd(page(c) + P.CtxReg.STATUS)))
        # A doorbell on a disabled context (1) is refused and counted.
        yield from _access(port, page(1) + P.CtxReg.PIO_DOORBELL, 0)
        got["err_pio"] = yield from rd(regs["host_err_pio"].addr)
        # SoC CSR window: the MSI enable CSR (first word of its bank) resets to all on.
        got["msi_enable"] = yield from rd(P.BAR0_SOC_CSR_OFFSET + S.MSI_CSR_LOC * tb.soc.csr.paging)
        # ... aliased up to BAR0's end.
        got["msi_alias"] = yield from rd(P.BAR0_SOC_CSR_OFFSET + P.BAR0_SOC_CSR_BYTES
                                         + S.MSI_CSR_LOC * tb.soc.csr.paging)

    run_simulation(tb, gen())
    assert got["ident"] == P.NIC_IDENT
    assert got["version"] == P.NIC_VERSION
    assert got["node"] == 0x2A
    assert got["n_ctx"] == PARAMS["n_ctx"]
    assert [st & P.StatusBit.ENABLED for st in got["status"]] == [0, 0, P.StatusBit.ENABLED, 0]
    assert got["err_pio"] == 1
    assert got["msi_enable"] == 2 ** PARAMS["n_ctx"] - 1
    assert got["msi_alias"] == got["msi_enable"]
