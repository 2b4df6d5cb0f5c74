"""The SoC cluster (docs/simulator.md, "SoC clusters"): whole SoCs (VexRiscv, ROM, SRAM,
NicCore behind the Bar0Window), one LiteX-built node module instantiated per node, booting
firmware built by firmware/Makefile. The firmware here is the bring-up probe
(firmware/probe/): it writes its node id and routes from the CPU, the harness writes none.

The ring:4 build is made once per session and cached (build/sim/cluster-soc-ring4-*);
the 2x2 torus is a second build (``slow``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from paranic.sim import build as simbuild, run as simrun
from paranic.sim.socbuild import ROM_PLUSARG, build_node, make_firmware
from simtest import TESTS, launch, sim_socket

#: Configured ids: node index i gets id i+1 mod 4. A rotation of the ring, so the probe's
#: routes by id are right, while id != index shows that clients attach by id.
ROTATION = {i: (i + 1) % 4 for i in range(4)}


@pytest.fixture(scope="module")
def soc4(soc_ring_binary, userlib_build):
    t0 = time.time()
    sim = simrun.start("ring:4", soc=True, firmware="probe", node_ids=ROTATION,
                       socket=sim_socket("soc4"), timeout=300)
    print(f"SoC ring:4 booted and ready in {time.time() - t0:.1f} s wall, "
          f"bring-up {sim.bringup_cycles} cycles")
    try:
        yield sim
    finally:
        rc = sim.stop()
        log = sim.log_text()
        assert rc == 0, f"simulator exited with {rc}:\n{log[-3000:]}"
        assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-3000:]


def test_node_build():
    """The node module: LiteX's Builder output, the ports of the contract, the ROM loaded
    from the plusarg, and the libraries the firmware links."""
    node = build_node()
    names = {n: (w, d) for n, w, d in node.ports}
    assert names["dna"] == (64, "in") and names["cfg_node"] == (16, "in")
    assert names["bus_adr"] == (30, "in") and names["bus_dat_r"] == (32, "out")
    for p in range(2):
        assert names[f"link{p}_tx_payload_data"] == (64, "out")
        assert names[f"link{p}_rx_payload_ctrl"] == (1, "in")
    assert f'$value$plusargs("{ROM_PLUSARG}=%s"' in node.verilog.read_text()
    for lib in ("libbase/libbase.a", "libc/libc.a", "libcompiler_rt/libcompiler_rt.a"):
        assert (node.software_dir / lib).is_file(), lib
    gen = node.include_dir / "generated"
    assert (gen / "regions.ld").is_file() and (gen / "csr.h").is_file() and (gen / "pn_csr.h").is_file()


def test_soc_cluster_ports():
    """SocCluster: NicCluster's host-side port names per node, the identity inputs, and the
    same cables (with their cut/BER inputs), wired by NicCluster's cable loop."""
    from paranic.sim.cluster import SocCluster
    from paranic.spec.topo import Topology

    topo = Topology.parse("ring:4")
    top = SocCluster(topo, build_node())
    names = {sig.backtrace[-1][0] if sig.name_override is None else sig.name_override for sig in top.ios}
    for i in range(4):
        for port in ("bus_adr", "bus_ack", "dma_rd_source_valid", "dma_wr_sink_ready", "irq", "dna", "cfg_node"):
            assert f"n{i}_{port}" in names, (i, port)
    for k in range(len(topo.cables())):
        assert f"cable{k}_cut" in names and f"cable{k}_ber" in names
    assert len(top.phys) == len(topo.links()) == 8


def _check_image(image, node) -> None:
    """An RV32IM image (no A, no C) that fits the ROM, one hex word per line."""
    words = image.read_text().split()
    assert words and all(len(w) == 8 for w in words)
    assert len(words) * 4 <= node.rom_bytes
    r = subprocess.run(["riscv64-unknown-elf-readelf", "-A", "-h", str(image.with_suffix(".elf"))],
                       capture_output=True, text=True)
    assert "RISC-V" in r.stdout and "ELF32" in r.stdout
    assert "rv32i2p1_m2p0" in r.stdout and "_a2p" not in r.stdout and "_c2p" not in r.stdout, r.stdout


def test_probe_image():
    """The bring-up probe, built by firmware/Makefile's rules against the node."""
    _check_image(make_firmware(2, probe_topo="ring:4"), build_node())


def test_firmware_image():
    """`make firmware`'s image: the firmware (firmware/*.c, core/, spec/c, ctxseq.c)."""
    _check_image(make_firmware(2), build_node())


def test_probe_brings_the_ring_up(soc4):
    """The probe on every node: ROUTED with one fingerprint, its configured ids taken
    (id != index), bring-up time in the ready file, the harness wrote no route."""
    assert soc4.soc and soc4.info["topo"] == "ring:4"
    assert soc4.node_ids == [ROTATION[i] for i in range(4)]
    assert 0 < soc4.bringup_cycles < soc4.info["links_up_cycle"]
    log = soc4.log_text()
    assert "firmware brought the cluster up in" in log
    for i in range(4):
        assert f"node index {i}: node id {ROTATION[i]}, fw_state 3" in log
    print(f"bring-up (reset -> all nodes ROUTED): {soc4.bringup_cycles} cycles "
          f"({soc4.bringup_cycles * 1e6 / soc4.info['clk_hz']:.1f} us simulated)")


def test_rawdata_through_bar0window(soc4):
    """The host path: libparanic's sim backend through each SoC's Bar0Window (context
    pages, CSRs, DMA), over the routes the CPUs loaded: rawdata of 0 .. 1 MiB between
    node ids 0 and 1 (node indices 3 and 0)."""
    t0 = time.time()
    r = launch(soc4, [str(TESTS / "rawdata_test"), "sizes", "sim"], 2, "soc-rd-sizes", timeout=600)
    print(f"rawdata sizes on the SoC ring: {time.time() - t0:.0f} s wall")
    assert r.rc == 0 and not r.fails(), r.out
    assert r.ok(0, "sizes") == "ok sizes 9 sizes to node 1, to itself and back, 0 .. 1179653 bytes"
    assert r.ok(1, "sizes") == "ok sizes received and echoed 9 messages"
    log = soc4.log_text()
    # Node id 0 is node index 3: its client was attached there.
    assert "attached: node 3 ctx" in log and "attached: node 0 ctx" in log, log[-2000:]


def test_probe_ids_from_dna(soc_ring_binary):
    """No configured ids: the probe takes the low 12 bits of its DNA (``--dna``)."""
    dnas = {i: 0x1234_5678_9ABC_D000 + ROTATION[i] for i in range(4)}
    with simrun.start("ring:4", soc=True, firmware="probe", node_ids={}, dnas=dnas,
                      socket=sim_socket("soc-dna"), timeout=300) as sim:
        assert sim.node_ids == [ROTATION[i] for i in range(4)]
        assert "node index 0: dna 0x123456789abcd001, no configured id" in sim.log_text()


def test_probe_bad_id_reports_error(soc_ring_binary):
    """With the default DNAs (``sim_dna``: index + 1 in the low bits) node index 3 gets id
    4, outside the ring: the probe reports ERROR and the simulator stops with a clear
    message (exit status 4) instead of waiting for ever."""
    with pytest.raises(RuntimeError, match="node 3: the firmware reports ERROR"):
        simrun.start("ring:4", soc=True, firmware="probe", node_ids={}, socket=sim_socket("soc-noid"),
                     timeout=300)


def test_bad_options(soc_ring_binary, tmp_path):
    """Bad firmware-mode input is refused with a clear error."""
    def run(*args):
        return subprocess.run([str(soc_ring_binary), "--socket", str(tmp_path / "s.sock"), *args],
                              capture_output=True, text=True, timeout=60)
    r = run("--node-id", "4=1")
    assert r.returncode == 2 and "INDEX in 0..3" in r.stderr
    r = run("--node-id", "0=5000")
    assert r.returncode == 2 and "0..4095" in r.stderr
    r = run("--dna", "1=0")
    assert r.returncode == 2 and "no DNA" in r.stderr
    r = run("--firmware", str(tmp_path / "none.init"))
    assert r.returncode == 2 and "No such file" in r.stderr
    (tmp_path / "bad.init").write_text("hello\n")
    r = run("--firmware", str(tmp_path / "bad.init"))
    assert r.returncode == 2 and "not a ROM image" in r.stderr
    (tmp_path / "big.init").write_text("0000006f\n" * (build_node().rom_bytes // 4 + 1))
    r = run("--firmware", str(tmp_path / "big.init"))
    assert r.returncode == 2 and "the ROM holds" in r.stderr
    with pytest.raises(ValueError, match="soc=True"):
        simrun.start("ring:4", firmware="probe")
    with pytest.raises(ValueError, match="no node index 7"):
        simrun.start("ring:4", soc=True, firmware="probe", node_ids={7: 0})


def test_cli(soc_ring_binary):
    """`python -m paranic.sim --soc` finds the cached build; --soc/--firmware misuse is refused."""
    r = subprocess.run([sys.executable, "-m", "paranic.sim", "--soc", "--topo", "ring:4", "--build-only"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == str(soc_ring_binary), r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "paranic.sim", "--firmware", "probe", "--build-only"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--firmware needs --soc" in r.stderr
    r = subprocess.run([str(Path(sys.executable).with_name("paranic")), "run", "--backend", "sw", "--soc", "--", "true"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "need --backend sim" in r.stderr, r.stderr


@pytest.mark.slow
def test_probe_torus(userlib_build):
    """A 2x2 torus of SoCs (its own build: minutes the first time): the probe routes it,
    and rawdata crosses it."""
    t0 = time.time()
    simbuild.build("torus:2x2", soc=True)
    print(f"SoC torus:2x2 simulator ready in {time.time() - t0:.0f} s")
    with simrun.start("torus:2x2", soc=True, firmware="probe", socket=sim_socket("soc-torus"),
                      timeout=300) as sim:
        assert sim.info["topo"] == "torus:2x2" and sim.node_ids == [0, 1, 2, 3]
        assert sim.bringup_cycles > 0
        print(f"torus bring-up: {sim.bringup_cycles} cycles")
        r = launch(sim, [str(TESTS / "rawdata_test"), "all_to_all", "sim"], 4, "soc-torus-a2a", timeout=900)
        assert r.rc == 0 and not r.fails(), r.out
