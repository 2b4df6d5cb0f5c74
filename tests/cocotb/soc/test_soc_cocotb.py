"""ParaNicSoC behind LitePCIe's UltraScale PHY, driven by cocotbext-pcie's root complex.

The Verilog top is one ParaNicSoC (no CPU) with a USPCIEPHY (64-bit core data path,
128-bit hard-IP interface, CDC between ``sys`` and the IP's ``pcie`` clock). LitePCIe's
own Verilog around the hard IP (``pcie_us_support.v`` and its AXI-stream adapters) is
simulated; the hard IP itself (``pcie_us``) is the port-only shim of ``hardip_shim.py``,
driven by cocotbext-pcie's ``UltraScalePcieDevice`` under a ``RootComplex``. The cocotb
tests live in ``tb_soc.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from litex.build.generic_platform import Pins, Subsignal
from litex.build.io import CRG
from litex.build.sim import SimPlatform
from migen import Module

from paranic.hw.pcie_phy import USPCIEPHY
from paranic.hw.soc import ParaNicSoC
from paranic.hw.standalone import csr_dict
from paranic.sim.hdl import BUILD_ROOT, constant_comb_for_verilator, run_cocotb
from paranic.spec import protocol as P

import hardip_shim

HERE = Path(__file__).parent
PARAMS = dict(n_links=2, n_ctx=4, mtu=256)
LANES = 4

_IO = [("sys_clk", 0, Pins(1)), ("sys_rst", 0, Pins(1)),
       ("pcie", 0, Subsignal("rst_n", Pins(1)), Subsignal("clk_p", Pins(1)), Subsignal("clk_n", Pins(1)),
        Subsignal("rx_p", Pins(LANES)), Subsignal("rx_n", Pins(LANES)),
        Subsignal("tx_p", Pins(LANES)), Subsignal("tx_n", Pins(LANES)))]


class _Platform(SimPlatform):
    """The simulator's platform; timing constraints (the PHY's) mean nothing here."""

    def add_period_constraint(self, *args, **kwargs) -> None:
        pass

    def add_false_path_constraints(self, *args, **kwargs) -> None:
        pass


class SocTop(Module):
    def __init__(self) -> None:
        self.platform = platform = _Platform("sim", _IO)
        self.pads = pads = platform.request("pcie")
        self.submodules.soc = soc = ParaNicSoC(platform, 125e6, with_cpu=False, **PARAMS)
        sys_clk, sys_rst = platform.request("sys_clk"), platform.request("sys_rst")
        soc.crg = CRG(sys_clk, rst=sys_rst)
        soc.pcie_phy = phy = USPCIEPHY(platform, pads, speed="gen3", data_width=64,
                                       pcie_data_width=hardip_shim.DATA_WIDTH, cd="sys",
                                       bar0_size=P.BAR0_BYTES)
        phy.external_hard_ip = True   # the shim stands in for the Vivado IP
        soc.add_paranic_pcie(phy, msi_type="msi-x")
        self.ios = set(pads.flatten()) | {sys_clk, sys_rst}


def build(name: str = "soc_pcie") -> tuple[list[Path], Path]:
    out = BUILD_ROOT / "verilog" / name
    top = SocTop()
    # The platform's conversion (its special overrides: the CDC's reset synchronizers).
    out.mkdir(parents=True, exist_ok=True)
    v = out / f"{name}.v"
    conv = top.platform.get_verilog(top, ios=top.ios, name=name)
    text = constant_comb_for_verilator(conv.main_source)
    for fname, content in conv.data_files.items():   # memory inits, by absolute path
        (out / fname).write_text(content)
        text = text.replace(f'$readmemh("{fname}"', f'$readmemh("{out / fname}"')
    if not v.exists() or v.read_text() != text:
        v.write_text(text)
    shim = out / "pcie_us_shim.v"
    text = hardip_shim.shim_verilog(LANES)
    if not shim.exists() or shim.read_text() != text:
        shim.write_text(text)
    csr = out / f"{name}.csr.json"
    csr.write_text(json.dumps(csr_dict(top.soc.nic.csr_map()), indent=1, sort_keys=True))
    return [shim, *hardip_shim.sources(), v], csr


def test_soc_pcie_cocotb():
    sources, csr = build()
    run_cocotb("soc_pcie", sources, "soc_pcie", "tb_soc", test_dir=HERE,
               extra_env={"SOC_CSR": str(csr), "SOC_N_CTX": str(PARAMS["n_ctx"]),
                          "SOC_MTU": str(PARAMS["mtu"])},
               build_args=["-Wno-MULTIDRIVEN", "-Wno-PINMISSING", "-Wno-IMPLICIT", "--timescale", "1ns/1ps"])
