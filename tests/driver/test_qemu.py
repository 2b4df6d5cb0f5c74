"""The real driver and library in a QEMU guest (docs/driver.md, "The driver in a QEMU guest").

Debian's 6.1 kernel boots under qemu-system-x86_64 7.2 (q35, TCG) with an initramfs
the project builds (paranic.qemu). The ParaNIC is QEMU's ``x-pci-proxy-dev`` talking
to ``pn_proxydev`` (sim/qemu/), our device process: with ``--model`` it models the
registers the probe reads; with ``--sim`` it is node 0 of a running paranic-sim, so
BAR0 accesses run on the Verilated NicCore and its DMA reads and writes guest RAM.
Every test scans the whole guest console (kernel log included) for oopses and
warnings.

The default selection boots the guest three times: without a device, with the register
model (bad input, then the device falls off the bus) and once as node 0 of a simulated
ring beside a host node (``every_run``: a HAL conformance subset, a process killed during
DMA, the hand-over, deregistration during DMA, the sysfs status), each boot shared by
several tests. The full conformance suite, rawdata and the adversarial run are ``slow``."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from paranic.spec import protocol as P
from paranic import qemu

ROOT = Path(__file__).resolve().parents[2]
HOST_TESTS = ROOT / "build/userlib/tests"

needs = []
if not shutil.which(qemu.QEMU):
    needs.append("qemu-system-x86_64")
if not qemu.KERNEL.exists():
    needs.append(str(qemu.KERNEL))
if not (qemu.KDIR / "Makefile").exists():
    needs.append(f"kernel headers {qemu.KDIR}")
if not qemu.BUSYBOX.exists():
    needs.append("busybox-static")
pytestmark = pytest.mark.skipif(bool(needs), reason=f"missing: {', '.join(needs)}")


@pytest.fixture(scope="module")
def initrd() -> Path:
    from paranic.sim import build as simbuild
    simbuild.build("ring:4")   # the guest's module is built for this simulator's CSR map (cached)
    qemu.sim_dir()
    return qemu.build_initramfs()


def clean(r: qemu.GuestRun) -> None:
    """The guest ran its script to the end and the kernel said nothing bad."""
    assert not r.timed_out, r.console[-3000:]
    assert r.oopses == [], "\n".join(r.oopses) + "\n" + r.console[-3000:]
    assert r.exit_status == 0, r.console[-4000:]
    assert "PN-DMESG-END" in r.console


def test_boot_insmod_rmmod_without_device(initrd):
    """The guest boots; paranic.ko loads and unloads twice with no device present."""
    r = qemu.boot("insmod", initrd=initrd, timeout=180)
    clean(r)
    assert r.steps == ["insmod 1: 1 module(s)", "rmmod 1: 0 module(s)",
                       "insmod 2: 1 module(s)", "rmmod 2: 0 module(s)"], r.console[-2000:]
    assert "no /dev/paranic*" in r.console
    assert r.boot_seconds is not None and r.seconds < 120


@pytest.fixture(scope="module")
def model_run(initrd) -> qemu.GuestRun:
    """One boot with pn_proxydev --model: probe, bad input, then (module loaded again)
    the device falls off the bus (a config write to MODEL_REMOVE_CFG)."""
    return qemu.boot("probe", ["bad", f"dead:{qemu.MODEL_REMOVE_CFG:#x}"], device="model", initrd=initrd,
                     timeout=400, device_args=["--remove-at", f"{qemu.MODEL_REMOVE_CFG:#x}"])


def test_probe_and_bad_input_against_the_register_model(model_run):
    """pn_proxydev --model: the guest sees the ids and the 1 MiB BAR0, the driver probes
    (info CSRs read through the proxy), GET_INFO works, and bad input gets errno results:
    random ioctls (unprivileged), mmap beyond each region and read-only regions for
    writing, no CAP_NET_ADMIN, double close, all contexts busy, close before munmap.
    No context is left in use; the module unloads."""
    r = model_run
    clean(r)
    pci = [ln.split() for ln in r.console.splitlines() if ln.startswith("PN-PCI ")]
    ours = [p for p in pci if p[2] == f"{P.PCI_VENDOR_ID:#06x}" and p[3] == f"{P.PCI_DEVICE_ID:#06x}"]
    assert len(ours) == 1, pci
    start, end = int(ours[0][5], 16), int(ours[0][6], 16)
    assert end - start + 1 == P.BAR0_BYTES and start % P.BAR0_BYTES == 0
    assert ours[0][4] == "0x028000"   # network controller, "other"
    assert re.search(rf"paranic0: gateware version {P.NIC_VERSION}, {P.DEFAULT_CONTEXTS} contexts, MTU {P.DEFAULT_MTU}, 0 MSI vectors", r.console)
    assert "no MSI/MSI-X" in r.console   # the proxy has no MSI: polled mode
    assert f"n_ctx {P.DEFAULT_CONTEXTS} mtu {P.DEFAULT_MTU}" in r.console and "irq 0" in r.console
    bad = r.console.split("PN-STEP contexts-before-rmmod")[0]   # the dead-device part is the next test's
    fails = [ln for ln in bad.splitlines() if ln.startswith("FAIL")]
    assert not fails, r.console[-4000:]
    for case in ("random-ioctls", "mmap-ctx-page@csr", "mmap-rx-ring-write", "mmap-status+1", "mmap-region-5",
                 "mprotect-rx-write", "no-cap-net-admin", "double-close", "all-contexts-busy",
                 "close-then-munmap"):
        assert f"ok {case}" in r.console, case
    m = re.search(r"random ioctls: (\d+) refused, (\d+) accepted, 0 with an unexpected errno", r.console)
    assert m and int(m.group(1)) > 10000, r.console[-3000:]
    assert "PASS 0" in bad
    assert f"contexts-before-rmmod 0 {P.DEFAULT_CONTEXTS}" in r.steps and "rmmod 0" in r.steps
    # the device process saw the config cycles and BAR0 accesses and QEMU closing cleanly
    m = re.search(r"QEMU closed the connection; (\d+) config reads, (\d+) config writes, (\d+) BAR0 reads, "
                  r"(\d+) BAR0 writes, (\d+) SYNC_SYSMEM, 0 bad accesses", r.device_log)
    assert m and int(m.group(3)) >= 3 and int(m.group(4)) > 0 and int(m.group(5)) >= 1, r.device_log


def test_device_gone_gives_enodev_at_once(model_run):
    """The device falls off the bus (the model reads all ones from then on, like a
    surprise-removed card or a dead link; the module loaded with quiesce_ms=60000): a
    sysfs counter, open(), a kernel send waiting for the PIO window and MEM_DEREGISTER
    all fail with ENODEV instead of reading 0xffffffff as a value, waiting a minute or
    answering EBUSY; the files close and the module unloads without an oops."""
    r = model_run
    clean(r)
    g = r.console
    assert "the device is removed" in r.device_log, r.device_log[-2000:]
    for case in ("dead-setup", "dead-remove", "dead-sysfs", "dead-open", "dead-send", "dead-deregister"):
        assert f"ok {case}" in g, (case, g[-4000:])
    assert re.search(r"PN-STEP dead exit 0 after ", g), g[-4000:]
    assert "dead rmmod 0" in r.steps, r.steps
    m = re.search(r"dead device: open ([0-9.]+) ms, kernel send ([0-9.]+) ms", g)
    assert m, g[-3000:]
    print(f"dead device: open {m.group(1)} ms, kernel send {m.group(2)} ms (quiesce_ms 60000)")


def _sim_clean(log: str) -> None:
    assert "PCIe rule broken" not in log and "outside client memory" not in log, log[-3000:]
    assert "device client" in log and "attached: node 0" in log
    assert "every context reset, guest RAM released" in log, log[-3000:]


@pytest.mark.slow
def test_guest_node_runs_hal_conformance_with_a_host_node(initrd):
    """The HAL conformance vectors between the guest (node 0: pci backend, paranic.ko,
    pn_proxydev, the Verilated NicCore, DMA in guest RAM) and a host process (node 1: sim
    backend) of the same simulated ring. Both pass every case."""
    host = [HOST_TESTS / "hal_conformance", "sim", "--ctx", "0"]
    c = qemu.cluster_run(["conformance", "--ctx", "0"], nodes=2, host_cmds={1: host}, cluster="qemu-conf")
    clean(c.guest)
    g = c.guest.console
    assert "open backend=pci node=0 nodes=2 ctx=0" in g
    assert "ok vectors 17 vectors, 1104 packets received" in g
    assert re.search(r"^PASS", g, re.M), g[-4000:]
    h = c.hosts[0]
    assert h.returncode == 0 and h.output.rstrip().endswith("PASS"), h.output
    assert "contexts-after 0 16" in c.guest.steps
    _sim_clean(c.sim_log)
    # DMA went to and from guest RAM
    reads = [int(x) for x in re.findall(r"(\d+) DMA reads", c.sim_log)]
    assert reads and max(reads) > 100, c.sim_log[-2000:]


@pytest.mark.slow
def test_guest_node_rawdata_sizes_with_a_host_node(initrd):
    """rawdata between the guest (node 0) and a host node: 0, 1, MTU-1, MTU, MTU+1, 256,
    257, 1 MiB and 9 chunks + 5 bytes, to the peer, to itself and echoed back."""
    host = [HOST_TESTS / "rawdata_test", "sizes", "sim"]
    c = qemu.cluster_run(["rawdata", "sizes"], nodes=2, host_cmds={1: host}, cluster="qemu-raw")
    clean(c.guest)
    assert "ok sizes 9 sizes to node 1, to itself and back, 0 .. 1179653 bytes" in c.guest.console
    h = c.hosts[0]
    assert h.returncode == 0 and "ok sizes received and echoed 9 messages" in h.output, h.output
    _sim_clean(c.sim_log)


@pytest.mark.slow
def test_guest_bad_input_and_kill_during_dma_on_the_simulated_nic(initrd):
    """On the simulated NIC (a one-node job): the bad-input cases, then a process
    SIGKILLed while its 1 MiB DMA messages to itself run: its context is quiesced and
    given back, and can be opened again. No oops."""
    c = qemu.cluster_run(["adversarial"], nodes=1, cluster="qemu-bad")
    clean(c.guest)
    g = c.guest.console
    assert not [ln for ln in g.splitlines() if ln.startswith("FAIL")], g[-4000:]
    for case in ("random-ioctls", "no-cap-net-admin", "double-close", "all-contexts-busy", "kill-during-dma",
                 "dma-pages-not-reused", "next-owner-works", "reopen-after-kill"):
        assert f"ok {case}" in g, case
    assert "contexts-after 0 16" in c.guest.steps
    _sim_clean(c.sim_log)
    # the killed process's DMA really ran: the NIC read descriptors and payload from guest RAM
    reads = [int(x) for x in re.findall(r"(\d+) DMA reads", c.sim_log)]
    assert reads and max(reads) > 100, c.sim_log[-2000:]


# ---- every run: one boot of the guest beside a host node ---------------------------------------

#: The HAL conformance subset both nodes run: sends both ways (PIO and DMA, 0 bytes to
#: 1 MiB), source stamping, barriers.
EVERY_RUN_CASES = ["--case", "vectors", "--case", "stamp", "--case", "barrier", "--barriers", "5"]


@pytest.fixture(scope="module")
def every_run(initrd) -> qemu.ClusterRun:
    """The guest (node 0: pci backend, paranic.ko, the Verilated NicCore through
    pn_proxydev) and a host process (node 1: sim backend) of one simulated ring, one
    boot: the conformance subset on both nodes, then in the guest a process killed
    during DMA, the hand-over of a context, deregistration during DMA."""
    host = [HOST_TESTS / "hal_conformance", "sim", "--ctx", "0", *EVERY_RUN_CASES]
    parts = ["conformance:" + ":".join(["--ctx", "0", *EVERY_RUN_CASES]), "killdma", "deregbusy", "handover"]
    return qemu.cluster_run(["suite", *parts], nodes=2, host_cmds={1: host}, cluster="qemu-every")


def _part(c: qemu.ClusterRun, name: str) -> None:
    """The guest ran part ``name`` of the suite and it passed."""
    assert f"part {name} exit 0" in " ".join(c.guest.steps), (name, c.guest.steps, c.guest.console[-4000:])


def test_guest_every_run_is_clean(every_run):
    """The boot ran every part to the end, no oops or warning in the kernel log, no
    context left in use, and the simulator saw no PCIe rule broken and tore the device
    client down (every context reset, guest RAM released)."""
    g = every_run.guest
    assert not g.timed_out, g.console[-3000:]
    assert g.oopses == [], "\n".join(g.oopses) + "\n" + g.console[-3000:]
    assert "PN-DMESG-END" in g.console and "rmmod 0" in g.steps, g.console[-3000:]
    assert f"contexts-after 0 {P.DEFAULT_CONTEXTS}" in g.steps
    _sim_clean(every_run.sim_log)
    times = re.findall(r"PN-STEP part (\S+) exit \d+ after ([0-9.]+) s", g.console)
    print(f"every run: guest {g.seconds:.1f} s wall, boot {g.boot_seconds} s; parts (guest s): {times}")


def test_guest_hal_conformance_subset_with_a_host_node(every_run):
    """The HAL conformance subset between the guest and the host node: both pass
    vectors (PIO and DMA, 0 .. 1 MiB, both ways), stamp and 5 barriers; the NIC read
    the guest's DMA payloads from guest RAM."""
    c = every_run
    _part(c, "conformance")
    g = c.guest.console
    assert "open backend=pci node=0 nodes=2 ctx=0" in g
    assert re.search(r"ok vectors \d+ vectors, \d+ packets received", g), g[-4000:]
    assert "ok stamp" in g and "ok barrier 5 barriers of 2 nodes" in g, g[-4000:]
    h = c.hosts[0]
    assert h.returncode == 0 and h.output.rstrip().endswith("PASS"), h.output
    assert "ok vectors" in h.output and "ok barrier 5 barriers" in h.output, h.output
    reads = [int(x) for x in re.findall(r"(\d+) DMA reads", c.sim_log)]
    assert reads and max(reads) > 100, c.sim_log[-2000:]


def test_guest_kill_during_dma_and_the_next_owner(every_run):
    """A guest process SIGKILLed while its 1 MiB DMA messages to a receiver in the guest
    run: the driver reclaims its context; every packet of its messages that arrived
    carries its own bytes, although the next owner got the same context at once and
    filled its heap with other bytes (so its pages were not handed out while the NIC
    read them); the next owner's messages arrive whole; the context opens again."""
    c = every_run
    _part(c, "killdma")
    g = c.guest.console
    for case in ("kill-during-dma", "dma-pages-not-reused", "next-owner-works", "reopen-after-kill"):
        assert f"ok {case}" in g, (case, g[-4000:])
    m = re.search(r"receiver got (\d+) packets of the killed sender's messages, 0 with other bytes.*"
                  r"\((the same|other) pages\)", g)
    assert m and int(m.group(1)) > 0, g[-3000:]
    print(f"kill during DMA: {m.group(1)} packets of the killed sender checked; next owner on {m.group(2)} pages")


def test_guest_deregister_with_dma_pending(every_run):
    """MEM_DEREGISTER of a window while the NIC reads a 1 MiB DMA from it: -EBUSY while
    the window is mapped; after munmap it returns 0 only once the NIC has completed the
    descriptor (tx_done), so the pages are never freed under the DMA."""
    c = every_run
    _part(c, "deregbusy")
    g = c.guest.console
    assert "ok dereg-busy" in g and "ok dereg-waits-for-dma" in g, g[-4000:]
    assert "(the DMA was still pending when it was called)" in g, g[-3000:]


def test_guest_handover_hides_the_previous_owners_pio_bytes(every_run):
    """PIO isolation across owners through the driver (docs/reliability.md): a first process stages 1000 PIO bytes and
    exits; a second process opening the same context reads none of them from its
    page's PIO window (write-only: it reads as zeros), and a header of length
    1000 with no payload staged does not send them: the NIC refuses it (the staged-word
    rule; the packet neither arrives nor carries the first owner's bytes)."""
    c = every_run
    g = c.guest.console
    assert "ok handover-pio-read" in g, g[-4000:]
    assert "ok handover-pio-send" in g, g[-4000:]
    assert "the unstaged 1000-byte PIO packet: refused by the NIC" in g, g[-4000:]
    _part(c, "handover")


def test_guest_cluster_status_through_sysfs(every_run):
    """The driver's firmware/ and links/ sysfs files and pn_cluster_status on the pci
    backend (which reads them), on the simulated NIC: no firmware (state none), the
    simulator's DNA, both links up, index 1 -ENOENT."""
    from paranic.spec.sim import sim_dna

    c = every_run
    g = c.guest.console
    assert re.search(rf"PN-STATUS node 0 dna 0x{sim_dna(0):016x} cfg_node 0 fw_state 0 fw_error 0 "
                     rf"epoch 0 flags 1 n_links 2", g), g[-4000:]
    for p in (0, 1):
        assert re.search(rf"PN-STATUS-LINK {p} port {p + 1} state 2 ", g), g[-4000:]
    assert "PN-STATUS index1 -2" in g
    sysfs = dict(ln.strip().split(maxsplit=2)[1:] for ln in g.splitlines()
                 if ln.startswith("PN-SYSFS ") and len(ln.split()) >= 3)
    assert sysfs["state"] == "none" and sysfs["error"] == "none" and sysfs["epoch"] == "0"
    assert sysfs["dna"] == f"0x{sim_dna(0):016x}" and sysfs["link0"] == "up" and sysfs["link1"] == "up"
    assert sysfs["node"] == "0" and sysfs["topo"] == "0 0" and sysfs["fingerprint"] == "0x0"
