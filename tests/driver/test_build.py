"""paranic.ko builds against Debian's kernel headers with W=1 and under sparse, without
a single warning; the CSR header it uses is generated from the gateware's map.

Skipped (with the reason) where the headers of linux-headers-amd64 are not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import paranic.spec.protocol as P
from paranic.hw import gen
from paranic.spec import cgen

ROOT = Path(__file__).resolve().parents[2]
from paranic.qemu import KDIR   # Debian's linux-headers-amd64 (scripts/kver.sh), never `uname -r`
OUT = ROOT / "build" / "driver-test"
needs_kernel = pytest.mark.skipif(not (KDIR / "Makefile").exists(),
                                  reason=f"kernel headers missing: {KDIR} (apt install linux-headers-amd64)")


def make(*targets: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "userlib/python"))
    return subprocess.run(["make", "-C", str(ROOT / "driver"), f"KDIR={KDIR}", f"OUT={OUT}",
                           f"PY={sys.executable}", *targets], capture_output=True, text=True, env=env,
                          timeout=600)


def warnings(r: subprocess.CompletedProcess) -> list[str]:
    text = r.stdout + r.stderr
    return [ln for ln in text.splitlines()
            if re.search(r"\b(warning|error):", ln, re.I)]


@pytest.fixture(scope="module")
def module_build():
    shutil.rmtree(OUT, ignore_errors=True)
    r = make("module")
    assert r.returncode == 0 and not warnings(r), r.stdout[-4000:] + r.stderr[-4000:]
    return OUT / "paranic.ko"


@needs_kernel
def test_module_builds_with_w1_and_no_warnings(module_build):
    assert module_build.exists()
    info = subprocess.run(["/usr/sbin/modinfo", str(module_build)], capture_output=True, text=True,
                          check=True).stdout
    # Probes exactly the project's PCI IDs, GPL, the module parameters documented.
    assert f"pci:v{P.PCI_VENDOR_ID:08X}d{P.PCI_DEVICE_ID:08X}sv*sd*bc*sc*i*" in info
    assert re.search(r"^license:\s+GPL$", info, re.M)
    for p in ("rx_log2", "tx_log2", "window_max_mb", "quiesce_ms"):
        assert re.search(rf"^parm:\s+{p}:", info, re.M), p


@needs_kernel
@pytest.mark.skipif(shutil.which("sparse") is None, reason="sparse not installed")
def test_sparse_clean(module_build):
    r = make("sparse")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "CHECK" in r.stdout            # sparse really ran over the files
    assert not warnings(r), warnings(r)


def test_bar0_layout_matches_gateware():
    """The standalone NicCore's CSR bank lies in BAR0's CSR region, its context pages
    below it (the spec's BAR0 map), and every CSR of the elaborated map is inside."""
    for links in (2, 4):
        regs = gen.csr_map(links=links)
        cgen.check_csr_map(regs)   # every CSR inside BAR0's CSR region
        assert min(r["addr"] for r in regs.values()) == P.BAR0_CSR_OFFSET   # the bank starts there
    assert P.BAR0_CTX_OFFSET + P.BAR0_CTX_BYTES <= P.BAR0_CSR_OFFSET
    assert P.BAR0_CSR_OFFSET + P.BAR0_CSR_BYTES <= P.BAR0_BYTES
    assert P.BAR0_BYTES & (P.BAR0_BYTES - 1) == 0   # a BAR is a power of two


def test_csr_header_from_simulator_map():
    """A gateware build's csr.json (here the cached ring:4 simulator's) gives its own
    addresses and sizes; the simulator's NicCore has a 16-entry routing table, so its
    map differs from the default NicCore's (256) in route_adr's size and map id, while
    the host CSRs sit at the same offsets."""
    from paranic import qemu
    from paranic.sim import build as simbuild
    simbuild.build("ring:4")   # cached after the first build
    sim = gen.load_csr_json(qemu.default_csr_json())
    h = cgen.csr_header(sim)
    for name in cgen.REQUIRED_CSRS:
        assert f"#define PN_CSR_{name.upper()} 0x{sim[name]['addr']:x}u" in h
        assert f"#define PN_CSR_{name.upper()}_SIZE {sim[name]['size']}" in h
    dflt = gen.csr_map(links=2)
    assert {n: r["addr"] for n, r in sim.items() if n.startswith("host_")} == \
        {n: r["addr"] for n, r in dflt.items() if n.startswith("host_")}
    assert "#define PN_CSR_ROUTER_ROUTE_ADR_SIZE 4" in h
    assert h.splitlines()[6] != cgen.csr_header(dflt).splitlines()[6]


def test_csr_header_content():
    regs = gen.csr_map(links=2)
    h = cgen.csr_header(regs)
    for name in cgen.REQUIRED_CSRS:
        assert f"#define PN_CSR_{name.upper()} 0x{regs[name]['addr']:x}u" in h
    assert "#define PN_CSR_LINK_PORTS 2" in h
    assert "X(host_err_desc, PN_CSR_HOST_ERR_DESC)" in h
    # Another map (torus: four links) moves addresses and changes the map id.
    h4 = cgen.csr_header(gen.csr_map(links=4))
    assert "#define PN_CSR_LINK_PORTS 4" in h4
    assert h4.splitlines()[6] != h.splitlines()[6]   # PN_CSR_MAP_ID


def test_csr_map_refused_when_incomplete_or_outside_bar(tmp_path):
    regs = gen.csr_map(links=2)
    bad = dict(regs)
    del bad["host_ctx_win_size"]
    with pytest.raises(ValueError, match="host_ctx_win_size"):
        cgen.csr_header(bad)
    bad = json.loads(json.dumps(regs))
    bad["node"]["addr"] = P.BAR0_CSR_OFFSET + P.BAR0_CSR_BYTES
    with pytest.raises(ValueError, match="outside"):
        cgen.csr_header(bad)
    f = tmp_path / "csr.json"
    f.write_text(json.dumps(regs))
    out = tmp_path / "pn_csr.h"
    assert gen.main(["--csr-header", str(out), "--from-csr-json", str(f)]) == 0
    assert out.read_text() == cgen.csr_header(regs)
