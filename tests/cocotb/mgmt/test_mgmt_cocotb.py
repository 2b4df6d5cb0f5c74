"""The management port on Verilated NicCore clusters (cocotb): link-local CONTROL packets
on every port of a ring and a torus router, routed CONTROL packets, RX back-pressure,
host contexts refused, the TX target (a DOWN link's router input)."""

from __future__ import annotations

from pathlib import Path

import pytest

from paranic.sim.cluster import cached_cluster_verilog
from paranic.sim.hdl import BUILD_ROOT, run_cocotb
from paranic.spec.topo import Topology

HERE = Path(__file__).parent
MTU = 256
N_CTX = 16   # the parameters of tests/cocotb/niccore: the ring:4 build is shared with it


def _run(topo: str, testcase: str) -> None:
    t = Topology.parse(topo)
    name = f"cluster_{topo.replace(':', '_')}"
    v, top, csr = cached_cluster_verilog(t, BUILD_ROOT / "verilog" / name, name=name, n_ctx=N_CTX, mtu=MTU)
    run_cocotb(name, [v], top, "tb_mgmt", test_dir=HERE, testcase=testcase,
               extra_env={"CLUSTER_TOPO": topo, "CLUSTER_CSR": str(csr),
                          "CLUSTER_MTU": str(MTU), "CLUSTER_CTX": str(N_CTX)})


# Each case runs in a few seconds once the ring is built (its Verilog and model are
# tests/cocotb/niccore's); the torus has its own build of several minutes (slow).
@pytest.mark.parametrize("case", ["test_host_cannot_send_control", "test_tx_target_link_input",
                                  "test_link_local_every_port", "test_routed_control_and_slow_cpu"])
def test_ring4(case):
    _run("ring:4", case)


@pytest.mark.slow   # its own Verilator build (~5 min); make test covers the torus's four
@pytest.mark.parametrize("case", ["test_link_local_every_port", "test_routed_control_and_slow_cpu"])
def test_torus_2x2(case):  # ports with the firmware (tests/sim/test_firmware_sim.py)
    _run("torus:2x2", case)
