"""Two ParaNicSoCs on LitePCIe's 7-series PHY, each under its own TLP-level root
complex (``model.pcie_s7``), cabled to each other.

The Verilog top is two ParaNicSoCs (no CPU), each with ``paranic.hw.pcie_phy.S7PCIEPHY``
(64-bit core path, 64-bit hard-IP interface: x4 Gen2 at a 250 MHz user clock, PG054;
sys/pcie clock crossing), their link ports joined by ``paranic.sim.cable.SimPhy`` (the
``CableEnd`` adapters of ``test_soc_cocotb.py``). LitePCIe's Migen around the hard IP is
simulated; the hard IP ``pcie_s7`` and its clocking primitives are port-only shims
(``s7_shim.py``), the IP's ports driven by ``model.pcie_s7.S7RootPort``. The cocotb
tests live in ``tb_soc_s7_pair.py``.
"""

from __future__ import annotations

import json

import pytest
from migen import ClockDomainsRenamer, Module

from litex.build.io import CRG

from paranic.hw.pcie_phy import S7PCIEPHY
from paranic.hw.soc import ParaNicSoC
from paranic.hw.standalone import csr_dict
from paranic.sim.cable import SimPhy
from paranic.sim.hdl import BUILD_ROOT, constant_comb_for_verilator, run_cocotb
from paranic.spec import protocol as P

import s7_shim
from test_soc_cocotb import HERE, LANES, PAIR_TOPO, PARAMS, CableEnd, _IO, _Platform, _pcie_io

#: The S7 PHY's clock domains besides sys: renamed per SoC (one hard IP each).
S7_DOMAINS = ("pcie", "clk125", "clk250", "userclk1", "userclk2", "pclk")


def _s7_soc(platform, pads, bar0_master: str = "paranic", **params) -> ParaNicSoC:
    soc = ParaNicSoC(platform, 125e6, with_cpu=False, **{**PARAMS, **params})
    soc.pcie_phy = phy = S7PCIEPHY(platform, pads, data_width=64, pcie_data_width=64, cd="sys",
                                   bar0_size=P.BAR0_BYTES, msi_type="msi-multi-vector")
    phy.external_hard_ip = True      # the shim stands in for Vivado's pcie_7x
    soc.add_paranic_pcie(phy, msi_type="msi-multi-vector", bar0_master=bar0_master)
    return soc


class S7PairTop(Module):
    """Two SoCs cabled as a ring of two, one sys clock, each its own hard IP."""

    def __init__(self, bar0_master: str = "paranic") -> None:
        self.platform = platform = _Platform("sim", _IO[:2] + _pcie_io(2))
        sys_clk, sys_rst = platform.request("sys_clk"), platform.request("sys_rst")
        self.ios = {sys_clk, sys_rst}
        self.socs = []
        for i in range(PAIR_TOPO.nodes):
            pads = platform.request("pcie", i)
            soc = _s7_soc(platform, pads, bar0_master, n_links=PAIR_TOPO.link_ports)
            for p in range(PAIR_TOPO.link_ports):
                soc.add_link_phy(p, CableEnd())
            if i == 0:
                soc.crg = CRG(sys_clk, rst=sys_rst)
            soc = ClockDomainsRenamer({d: f"{d}{i}" for d in S7_DOMAINS})(soc)
            setattr(self.submodules, f"soc{i}", soc)
            self.socs.append(soc)
            self.ios |= set(pads.flatten())
        for k, (n, pn, m, pm) in enumerate(PAIR_TOPO.links()):
            cable = SimPhy(delay=8, seed=k + 1)
            setattr(self.submodules, f"cable{k}", cable)
            self.comb += [
                getattr(self.socs[n], f"link_phy{pn - 1}").sink.connect(cable.sink),
                cable.source.connect(getattr(self.socs[m], f"link_phy{pm - 1}").source),
            ]


def build(name: str, top_cls=S7PairTop, **top_kw):
    out = BUILD_ROOT / "verilog" / name
    out.mkdir(parents=True, exist_ok=True)
    top = top_cls(**top_kw)
    conv = top.platform.get_verilog(top, ios=top.ios, name=name)
    text = constant_comb_for_verilator(conv.main_source)
    for fname, content in conv.data_files.items():
        (out / fname).write_text(content)
        text = text.replace(f'$readmemh("{fname}"', f'$readmemh("{out / fname}"')
    files = {out / f"{name}.v": text, out / "pcie_s7_shim.v": s7_shim.shim_verilog(top)}
    for path, t in files.items():
        if not path.exists() or path.read_text() != t:
            path.write_text(t)
    csr = out / f"{name}.csr.json"
    csr.write_text(json.dumps(csr_dict(top.socs[0].nic.csr_map()), indent=1, sort_keys=True))
    return list(files), csr


def _run(name: str, test_module: str, testcase=None, bar0_master: str = "paranic") -> None:
    sources, csr = build(name, bar0_master=bar0_master)
    run_cocotb(name, sources, name, test_module, test_dir=HERE, testcase=testcase,
               extra_env={"SOC_CSR": str(csr), "SOC_N_CTX": str(PARAMS["n_ctx"]),
                          "SOC_MTU": str(PARAMS["mtu"]), "SOC_TOPO": str(PAIR_TOPO),
                          "SOC_BAR0_MASTER": bar0_master},
               build_args=["-Wno-MULTIDRIVEN", "-Wno-PINMISSING", "-Wno-IMPLICIT", "-Wno-WIDTH",
                           "-Wno-PINCONNECTEMPTY", "--timescale", "1ns/1ps"])


@pytest.mark.slow   # its own build; make test runs the UltraScale SoC (test_soc_cocotb.py)
def test_soc_s7_pair_cocotb():
    _run("soc_s7_pair", "tb_soc_s7_pair")


@pytest.mark.slow
def test_soc_s7_litepcie_bar0_master_loses_upper_dword():
    """The finding, on the bench: with LitePCIe's BAR0 master a 64-bit store is lost."""
    _run("soc_s7_pair_lpbar0", "tb_soc_s7_pair", testcase="test_bar0_64bit_store",
         bar0_master="litepcie")


@pytest.mark.slow
def test_soc_s7_pair_hal_vectors_1mib_cocotb():
    """The HAL conformance vectors including the 1 MiB DMA message."""
    import os
    os.environ["SOC_BIG_VECS"] = "1"
    try:
        _run("soc_s7_pair", "tb_soc_s7_pair", testcase="test_hal_conformance_vectors")
    finally:
        del os.environ["SOC_BIG_VECS"]
