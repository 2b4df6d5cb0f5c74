"""The Xilinx UltraScale PCIe hard IP (``pcie_us``, Vivado-generated) cut out at its port
boundary, for simulation.

LitePCIe's ``pcie_us_support.v`` (USPCIEPHY) instantiates ``pcie_us`` and puts its own
AXI-stream adapters and MSI logic around it. :func:`shim_verilog` writes a module of that
name with exactly the ports that instance connects and no logic at all: the IP's outputs
are undriven variables and its inputs plain ports, so cocotbext-pcie's
``UltraScalePcieDevice`` (the root complex's view of the hard IP: configuration space,
TLPs on the CQ/CC/RQ/RC streams, MSI) drives and samples them through the hierarchy.
Port widths are those of the pcie3_ultrascale core (PG156) at :data:`DATA_WIDTH`; port
directions and names are read from LitePCIe's support file, so a LitePCIe that connects
the IP differently fails here, not silently.
"""

from __future__ import annotations

import re
from pathlib import Path

import litepcie

US_DIR = Path(litepcie.__file__).parent / "phy" / "xilinx_us"
#: The hard IP's AXI-stream width (U250's choice). Known limit (docs/soc.md): LitePCIe's
#: 128-bit requester adapter (s_axis_rq_adapt_128b.v) drives tkeep all ones on every
#: beat but a lone fifth dword, so a DMA write of n dwords reaches the hard IP with
#: 4 * ceil((4 + n) / 4) - 4 dwords unless n % 4 is 0 or 1; cocotbext-pcie refuses those.
#: At 256 bits (KCU105's choice) LitePCIe's requester adapter garbles the 64-bit address.
DATA_WIDTH = 128
#: PG156's user clock for Gen3 x4 at that width.
USER_CLK_HZ = {128: 250e6, 256: 125e6}[DATA_WIDTH]

#: Ports the hard IP drives (the rest are its inputs).
_OUT = set("""pci_exp_txn pci_exp_txp int_qpll1lock_out int_qpll1outrefclk_out int_qpll1outclk_out
user_clk user_reset user_lnk_up phy_rdy_out s_axis_rq_tready m_axis_rc_tdata m_axis_rc_tuser
m_axis_rc_tlast m_axis_rc_tkeep m_axis_rc_tvalid m_axis_cq_tdata m_axis_cq_tuser m_axis_cq_tlast
m_axis_cq_tkeep m_axis_cq_tvalid s_axis_cc_tready pcie_rq_seq_num pcie_rq_seq_num_vld pcie_rq_tag
pcie_rq_tag_vld pcie_cq_np_req_count pcie_rq_tag_av cfg_phy_link_down cfg_phy_link_status
cfg_negotiated_width cfg_current_speed cfg_max_payload cfg_max_read_req cfg_function_status
cfg_function_power_state cfg_vf_status cfg_vf_power_state cfg_link_power_state cfg_err_cor_out
cfg_err_nonfatal_out cfg_err_fatal_out cfg_ltr_enable cfg_ltssm_state cfg_rcb_status
cfg_dpa_substate_change cfg_obff_enable cfg_pl_status_change cfg_tph_requester_enable cfg_tph_st_mode
cfg_vf_tph_requester_enable cfg_vf_tph_st_mode cfg_mgmt_read_data cfg_mgmt_read_write_done
pcie_tfc_nph_av pcie_tfc_npd_av cfg_msg_received cfg_msg_received_data cfg_msg_received_type
cfg_msg_transmit_done cfg_fc_ph cfg_fc_pd cfg_fc_nph cfg_fc_npd cfg_fc_cplh cfg_fc_cpld
cfg_per_func_status_data cfg_hot_reset_out cfg_per_function_update_done
cfg_power_state_change_interrupt cfg_flr_in_process cfg_vf_flr_in_process cfg_local_error
cfg_interrupt_sent cfg_interrupt_msi_enable cfg_interrupt_msi_sent cfg_interrupt_msi_fail
cfg_interrupt_msi_vf_enable cfg_interrupt_msi_mmenable cfg_interrupt_msi_mask_update
cfg_interrupt_msi_data pcie_perstn0_out pcie_perstn1_out""".split())

#: Widths (bits) other than 1.
_W = dict(
    s_axis_rq_tdata=DATA_WIDTH, m_axis_rc_tdata=DATA_WIDTH, m_axis_cq_tdata=DATA_WIDTH,
    s_axis_cc_tdata=DATA_WIDTH,
    s_axis_rq_tkeep=DATA_WIDTH // 32, m_axis_rc_tkeep=DATA_WIDTH // 32,
    m_axis_cq_tkeep=DATA_WIDTH // 32, s_axis_cc_tkeep=DATA_WIDTH // 32,
    s_axis_rq_tuser=60, m_axis_rc_tuser=75, m_axis_cq_tuser=85, s_axis_cc_tuser=33,
    pcie_rq_seq_num=4, pcie_rq_tag=6, pcie_cq_np_req_count=6, pcie_rq_tag_av=2,
    cfg_phy_link_status=2, cfg_negotiated_width=4, cfg_current_speed=3, cfg_max_payload=3,
    cfg_max_read_req=3, cfg_function_status=16, cfg_function_power_state=12, cfg_vf_status=16,
    cfg_vf_power_state=24, cfg_link_power_state=2, cfg_ltssm_state=6, cfg_rcb_status=4,
    cfg_dpa_substate_change=4, cfg_obff_enable=2, cfg_tph_requester_enable=4, cfg_tph_st_mode=12,
    cfg_vf_tph_requester_enable=8, cfg_vf_tph_st_mode=24,
    cfg_mgmt_addr=19, cfg_mgmt_write_data=32, cfg_mgmt_byte_enable=4, cfg_mgmt_read_data=32,
    pcie_tfc_nph_av=2, pcie_tfc_npd_av=2, cfg_msg_received_data=8, cfg_msg_received_type=5,
    cfg_msg_transmit_type=3, cfg_msg_transmit_data=32,
    cfg_fc_ph=8, cfg_fc_pd=12, cfg_fc_nph=8, cfg_fc_npd=12, cfg_fc_cplh=8, cfg_fc_cpld=12, cfg_fc_sel=3,
    cfg_per_func_status_control=3, cfg_per_func_status_data=16, cfg_per_function_number=4,
    cfg_flr_in_process=4, cfg_flr_done=4, cfg_vf_flr_in_process=8, cfg_vf_flr_done=8,
    cfg_dsn=64, cfg_ds_bus_number=8, cfg_ds_device_number=5, cfg_ds_function_number=3,
    cfg_ds_port_number=8, cfg_subsys_vend_id=16, cfg_interrupt_int=4, cfg_interrupt_pending=4,
    cfg_interrupt_msi_enable=4, cfg_interrupt_msi_int=32, cfg_interrupt_msi_vf_enable=8,
    cfg_interrupt_msi_mmenable=12, cfg_interrupt_msi_data=32, cfg_interrupt_msi_select=4,
    cfg_interrupt_msi_pending_status=32, cfg_interrupt_msi_attr=3, cfg_interrupt_msi_tph_type=2,
    cfg_interrupt_msi_tph_st_tag=9, cfg_interrupt_msi_pending_status_function_num=4,
    cfg_interrupt_msi_function_number=4,
)


def instance_ports(support: Path = US_DIR / "pcie_us_support.v") -> list[str]:
    """The port names LitePCIe's support file connects on its ``pcie_us`` instance."""
    text = support.read_text()
    m = re.search(r"\bpcie_us\s+pcie_us_i\s*\((.*?)\);", text, re.S)
    if m is None:
        raise RuntimeError(f"no pcie_us instance in {support}")
    body = re.sub(r"//[^\n]*", "", m.group(1))
    return re.findall(r"\.(\w+)\s*\(", body)


def shim_verilog(lanes: int = 4) -> str:
    L = ["// GENERATED by tests/cocotb/soc/hardip_shim.py: the pcie_us hard IP's ports, no logic;",
         "// cocotbext-pcie drives them. Simulation only.", "module pcie_us ("]
    decls = []
    for p in instance_ports():
        w = lanes if p.startswith("pci_exp_") else _W.get(p, 1)
        rng = f"[{w - 1}:0] " if w > 1 else ""
        decls.append(f"  {'output reg' if p in _OUT else 'input wire'} {rng}{p}")
    L.append(",\n".join(decls))
    L += [");", "endmodule", "",
          "// The GT reference clock buffer: passes the clock through.",
          "module IBUFDS_GTE3 #(parameter REFCLK_HROW_CK_SEL = 0) (input I, input IB, input CEB,"
          " output O, output ODIV2);",
          "  assign O = I;", "  assign ODIV2 = I;", "endmodule", ""]
    return "\n".join(L)


def sources() -> list[Path]:
    """LitePCIe's Verilog around the hard IP (128-bit adapters, support wrapper)."""
    names = ["axis_iff.v", *(f"{n}_{DATA_WIDTH}b.v" for n in
             ("s_axis_rq_adapt", "m_axis_rc_adapt", "m_axis_cq_adapt", "s_axis_cc_adapt")),
             "pcie_us_support.v"]
    return [US_DIR / n for n in names]
