"""Whole NicCores in a simulated cluster (cocotb + Verilator), driven by host models."""

from __future__ import annotations

from pathlib import Path

import pytest

from paranic.sim.hdl import BUILD_ROOT, run_cocotb
from paranic.sim.cluster import cached_cluster_verilog
from paranic.spec.topo import Topology

HERE = Path(__file__).parent
MTU = 256
N_CTX = 16


def _run(topo: str, testcase: str, **env: str) -> None:
    t = Topology.parse(topo)
    name = f"cluster_{topo.replace(':', '_')}"
    v, top, csr = cached_cluster_verilog(t, BUILD_ROOT / "verilog" / name, name=name, n_ctx=N_CTX,
                                  mtu=MTU)
    run_cocotb(name, [v], top, "tb_cluster", test_dir=HERE, testcase=testcase,
               extra_env={"CLUSTER_TOPO": topo, "CLUSTER_CSR": str(csr),
                          "CLUSTER_MTU": str(MTU), "CLUSTER_CTX": str(N_CTX), **env})


# Each case runs in a second or two once the ring's Verilog and model are built (generated
# once: cached_cluster_verilog); the torus has its own build of several minutes (slow).
@pytest.mark.parametrize("case", ["test_bring_up_and_routes", "test_bad_input", "test_all_pairs_pio_and_dma",
                                  "test_barrier", "test_bit_errors"])
def test_ring4(case):
    _run("ring:4", case)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["test_all_pairs_pio_and_dma", "test_barrier",
                                  "test_bit_errors"])
def test_torus_3x3(case):
    _run("torus:3x3", case, CLUSTER_BER_MSGS="100")
