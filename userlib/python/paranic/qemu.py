"""The driver's QEMU proof route (docs/driver.md, "The driver in a QEMU guest").

* :func:`build_initramfs` builds the guest image: busybox-static, ``paranic.ko``
  (built against Debian's 6.1 headers and the CSR map of the gateware it will drive),
  statically linked test programs (HAL conformance, rawdata, pn_bench, the guest tool
  ``pn_guest``), the scripts of ``driver/qemu/scripts`` and ``driver/qemu/init.sh`` as
  ``/init``. Cached under ``build/qemu``.
* :func:`build_proxydev` builds ``pn_proxydev`` (sim/qemu/pn_proxydev.c), the device
  process that QEMU's ``x-pci-proxy-dev`` talks to.
* :func:`build_sim` builds a ``paranic-sim`` harness of this tree into ``build/qemu``
  against the cached Verilated ring:4 model (never touching the shared build).
* :func:`boot` runs the guest: ``qemu-system-x86_64 -M q35 -accel tcg``, the script
  ``pn.run=NAME`` on the kernel command line, optionally with the ParaNIC proxy device.

``python -m paranic.qemu --help`` for the command line.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence


from paranic.paths import DRIVER, INCLUDE, SCRIPTS, TREE, USERLIB, USERLIB_BUILD
from paranic.sim.paths import build_lock

BUILD = TREE / "build" / "qemu"
KVER = subprocess.run([str(SCRIPTS / "kver.sh")], capture_output=True,
                      text=True).stdout.strip() or "none"   # Debian's linux-headers-amd64 kernel
KERNEL = Path(f"/boot/vmlinuz-{KVER}")
KDIR = Path(f"/lib/modules/{KVER}/build")
QEMU = "qemu-system-x86_64"
BUSYBOX = Path("/usr/bin/busybox")
GUEST_MEM_MB = 512
#: pn_proxydev --model --remove-at: a guest write to this config-space register (device
#: specific, unused) makes the modelled device fall off the bus (reads all ones).
MODEL_REMOVE_CFG = 0xf0
PY = Path(sys.executable)

# Static guest programs: name -> source (linked against libparanic.a).
GUEST_PROGS = {
    "hal_conformance": USERLIB / "tests/hal_conformance.c",
    "rawdata_test": USERLIB / "tests/rawdata_test.c",
    "pn_bench": USERLIB / "tools/pn_bench.c",
    "pn_guest": DRIVER / "qemu/pn_guest.c",
}

# What a kernel problem looks like on the console / in dmesg.
OOPS_RE = re.compile(r"BUG:|Oops|WARNING:|Call Trace|general protection|Kernel panic|"
                     r"kernel BUG|UBSAN|KASAN|list_del corruption|refcount_t")


def oopses(text: str) -> list[str]:
    """Lines of a guest console that show a kernel oops, warning or panic."""
    return [ln for ln in text.splitlines() if OOPS_RE.search(ln)]


def _run(cmd: Sequence[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(list(map(str, cmd)), capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


def sim_dir(topo: str = "ring:4") -> Path:
    """The cached build directory of the simulator model for ``topo`` (must exist)."""
    from paranic.sim import build as B
    d = B.cluster_build_dir(topo)
    if not (d / "obj" / f"{B.MODEL}__ALL.a").exists():
        raise FileNotFoundError(f"{d}: no Verilated model; run `python -m paranic.sim --topo {topo} "
                                "--build-only` first")
    return d


def default_csr_json() -> Path:
    """The CSR map the guest's module is built for: the cached ring:4 simulator's."""
    return sim_dir() / "csr.json"


def build_driver(csr_json: Path | None = None, out: Path | None = None) -> Path:
    """``paranic.ko`` for the simulator's gateware (its own build dir under build/qemu)."""
    csr_json = csr_json or default_csr_json()
    out = out or BUILD / "driver"
    with build_lock("qemu-driver"):
        _run(["make", "-s", "-C", DRIVER, f"OUT={out}", f"PY={PY}", f"CSR_JSON={csr_json}"])
    return out / "paranic.ko"


def build_userlib() -> Path:
    from paranic.launch import build_userlib as bu
    bu()
    return USERLIB_BUILD / "libparanic.a"


def build_guest_progs(drv_out: Path) -> dict[str, Path]:
    lib = build_userlib()
    bdir = BUILD / "bin"
    bdir.mkdir(parents=True, exist_ok=True)
    res = {}
    for name, src in GUEST_PROGS.items():
        exe = bdir / name
        deps = [src, lib, drv_out / "pn_csr.h"]
        if not exe.exists() or any(d.stat().st_mtime > exe.stat().st_mtime for d in deps):
            _run(["gcc", "-std=c11", "-O2", "-g0", "-Wall", "-Wextra", "-static",
                  f"-I{INCLUDE}", f"-I{USERLIB / 'tools'}", f"-I{DRIVER / 'include'}",
                  f"-I{drv_out}", "-o", exe, src, lib, "-lpthread"])
        res[name] = exe
    return res


def build_initramfs(csr_json: Path | None = None) -> Path:
    """Build (or reuse) ``build/qemu/initramfs.cpio.gz``; returns its path."""
    with build_lock("qemu-initramfs"):
        return _build_initramfs(csr_json)


def _build_initramfs(csr_json: Path | None) -> Path:
    ko = build_driver(csr_json)
    progs = build_guest_progs(ko.parent)
    out = BUILD / "initramfs.cpio.gz"
    qdir = DRIVER / "qemu"
    inputs = [ko, BUSYBOX, Path(__file__), qdir / "init.sh", *progs.values(), *sorted((qdir / "scripts").glob("*.sh"))]
    if out.exists() and all(p.stat().st_mtime <= out.stat().st_mtime for p in inputs):
        return out
    with tempfile.TemporaryDirectory(dir=BUILD) as td:
        r = Path(td)
        os.chmod(r, 0o755)   # "/" of the guest (mkdtemp makes it 0700: no other user could walk it)
        for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "pn", "scripts", "root"):
            (r / d).mkdir(parents=True)
        shutil.copy2(BUSYBOX, r / "bin/busybox")
        (r / "bin/sh").symlink_to("busybox")
        shutil.copy2(qdir / "init.sh", r / "init")
        os.chmod(r / "init", 0o755)
        shutil.copy2(ko, r / "pn/paranic.ko")
        for name, exe in progs.items():
            shutil.copy2(exe, r / "pn" / name)
        for s in (qdir / "scripts").glob("*.sh"):
            shutil.copy2(s, r / "scripts" / s.name)
        tmp = out.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            files = subprocess.run("find . | LC_ALL=C sort", shell=True, cwd=r, capture_output=True,
                                   check=True).stdout
            cp = subprocess.run(["cpio", "-o", "-H", "newc", "-R", "0:0", "--quiet"], input=files, cwd=r,
                                capture_output=True, check=True)
            f.write(subprocess.run(["gzip", "-1"], input=cp.stdout, capture_output=True, check=True).stdout)
        tmp.replace(out)
    return out


# ---- the device process and the simulator --------------------------------------------------------

def build_proxydev(drv_out: Path | None = None) -> Path:
    """``pn_proxydev``: QEMU's mpqemu protocol on one side, a model or the simulator on the other."""
    drv_out = drv_out or BUILD / "driver"
    src = TREE / "sim/qemu/pn_proxydev.c"
    exe = BUILD / "bin/pn_proxydev"
    exe.parent.mkdir(parents=True, exist_ok=True)
    deps = [src, USERLIB / "src/pn_sim_shm.h", drv_out / "pn_csr.h"]
    with build_lock("qemu-proxydev"):
        if not exe.exists() or any(d.stat().st_mtime > exe.stat().st_mtime for d in deps):
            _run(["gcc", "-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
                  f"-I{USERLIB / 'src'}", f"-I{drv_out}", "-o", exe, src])
    return exe


def build_sim(topo: str = "ring:4") -> Path:
    """The simulator of ``topo`` (its harness serves device clients): built once and cached."""
    from paranic.sim import build as B
    return B.build(topo, quiet=True)


def start_sim(cluster: str, topo: str = "ring:4", extra_args: Sequence[str] = ()):
    """Start the simulator of ``topo`` for ``cluster`` (a :class:`paranic.sim.run.SimCluster`)."""
    from paranic.sim import run
    return run.start(topo, cluster=cluster, extra_args=extra_args, quiet_build=True)


# ---- running the guest ---------------------------------------------------------------------------

@dataclass
class GuestRun:
    cmd: list[str]
    console: str
    returncode: int | None
    seconds: float
    boot_seconds: float | None
    exit_status: int | None          # the script's (PN-EXIT), None if it never got there
    dmesg: str = ""
    device_log: str = ""
    timed_out: bool = False
    steps: list[str] = field(default_factory=list)

    @property
    def oopses(self) -> list[str]:
        return oopses(self.console)


def _parse(console: str) -> tuple[int | None, str, float | None, list[str]]:
    m = re.search(r"PN-EXIT (\d+)", console)
    st = int(m.group(1)) if m else None
    dm = re.search(r"PN-DMESG-BEGIN\r?\n(.*?)PN-DMESG-END", console, re.S)
    b = re.search(r"PN-BOOT uptime ([0-9.]+)", console)
    steps = re.findall(r"PN-STEP (.*?)\r?$", console, re.M)
    return st, dm.group(1) if dm else "", float(b.group(1)) if b else None, steps


def boot(run: str, args: Sequence[str] = (), *, device: str | None = None, sim_socket: str | Path | None = None,
         node: int = 0, nodes: int = 0, timeout: float = 300, initrd: Path | None = None,
         accel: str = "tcg", append: str = "", device_args: Sequence[str] = ()) -> GuestRun:
    """Boot the guest and run ``/scripts/<run>.sh args...``; returns the console and results.

    ``device``: None (no ParaNIC), ``"model"`` (pn_proxydev's register model of the
    info CSRs) or ``"sim"`` (pn_proxydev attached to the simulator at ``sim_socket``
    as node ``node`` of a job of ``nodes``)."""
    initrd = initrd or build_initramfs()
    cmdline = f"console=ttyS0 panic=-1 quiet loglevel=4 pn.run={run}"
    if args:
        cmdline += " pn.args=" + ",".join(args)
    if append:
        cmdline += " " + append
    cmd = [QEMU, "-M", "q35", "-accel", accel, "-m", f"{GUEST_MEM_MB}M", "-nodefaults", "-no-reboot",
           "-display", "none", "-serial", "stdio", "-kernel", str(KERNEL), "-initrd", str(initrd),
           "-append", cmdline]
    dev_proc = None
    pass_fds: tuple[int, ...] = ()
    dlog = None
    theirs = None
    if device:
        exe = build_proxydev()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        dcmd = [str(exe), "--fd", str(ours.fileno())]
        if device == "model":
            dcmd += ["--model"]
        elif device == "sim":
            dcmd += ["--sim", str(sim_socket), "--node", str(node), "--nodes", str(nodes)]
        else:
            raise ValueError(device)
        dcmd += list(device_args)
        dlog = tempfile.TemporaryFile(mode="w+")
        dev_proc = subprocess.Popen(dcmd, stdin=subprocess.DEVNULL, stdout=dlog, stderr=subprocess.STDOUT,
                                    pass_fds=(ours.fileno(),))
        ours.close()
        cmd += ["-object", f"memory-backend-memfd,id=pnmem,size={GUEST_MEM_MB}M,share=on",
                "-machine", "memory-backend=pnmem", "-device", f"x-pci-proxy-dev,id=paranic0,fd={theirs.fileno()}"]
        pass_fds = (theirs.fileno(),)
    t0 = time.time()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         pass_fds=pass_fds, start_new_session=True)
    if theirs is not None:
        theirs.close()
    timed_out = False
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
    secs = time.time() - t0
    console = out.decode(errors="replace")
    dtext = ""
    if dev_proc is not None:
        try:
            dev_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dev_proc.kill()
            dev_proc.wait()
        dlog.seek(0)
        dtext = dlog.read()
        dlog.close()
    st, dm, bt, steps = _parse(console)
    return GuestRun(cmd, console, p.returncode, secs, bt, st, dm, dtext, timed_out, steps)


@dataclass
class HostRun:
    node: int
    cmd: list[str]
    returncode: int | None
    output: str
    seconds: float


@dataclass
class ClusterRun:
    guest: GuestRun
    hosts: list[HostRun]
    sim_log: str


def cluster_run(program: Sequence[str], *, nodes: int = 2, host_cmds: dict[int, Sequence[str]] | None = None,
                topo: str = "ring:4", cluster: str = "qemu", timeout: float = 900,
                host_env: dict[str, str] | None = None) -> ClusterRun:
    """A simulated cluster with the guest as node 0 and host processes (``sim`` backend) as
    the other nodes: start this tree's simulator, the host commands and the guest
    (``/scripts/sim.sh 0 NODES NODES 1 PROGRAM...``); stop the simulator when all are done.
    A host command still running when the guest has finished gets 60 s, then SIGKILL."""
    import threading
    sim = start_sim(cluster, topo)
    hosts: list[HostRun] = []
    try:
        threads = []
        procs = []
        for node, cmd in (host_cmds or {}).items():
            env = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
            env.update(PARANIC_BACKEND="sim", PARANIC_SIM_SOCKET=str(sim.socket), PARANIC_NODE=str(node),
                       PARANIC_NODES=str(nodes), HAL_CONF_TIMEOUT_MS="120000", **(host_env or {}))
            t0 = time.time()
            p = subprocess.Popen(list(map(str, cmd)), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
            h = HostRun(node, list(map(str, cmd)), None, "", 0.0)
            hosts.append(h)
            procs.append(p)

            def wait(p=p, h=h, t0=t0):
                h.output = p.communicate()[0]
                h.returncode = p.returncode
                h.seconds = time.time() - t0
            th = threading.Thread(target=wait, daemon=True)
            th.start()
            threads.append(th)
        g = boot("sim", [str(0), str(nodes), str(nodes), "1", *program], device="sim", sim_socket=sim.socket,
                 node=0, nodes=nodes, timeout=timeout)
        for th, p in zip(threads, procs):
            th.join(60)
            if th.is_alive():
                p.kill()
                th.join()
        # the device's teardown (disable, quiesce, reset every context) before stopping
        t0 = time.time()
        while "guest RAM released" not in sim.log_text() and time.time() - t0 < 30 and sim.alive():
            time.sleep(0.2)
    finally:
        sim.stop()
    return ClusterRun(g, hosts, sim.log_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.qemu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true", help="build the initramfs, pn_proxydev and the harness")
    ap.add_argument("--run", default="insmod", help="guest script (driver/qemu/scripts/NAME.sh)")
    ap.add_argument("--device", choices=("model", "sim"), help="attach a ParaNIC through x-pci-proxy-dev")
    ap.add_argument("--sim-socket", help="the simulator's socket (--device sim)")
    ap.add_argument("--node", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=0)
    ap.add_argument("--cluster", action="store_true",
                    help="start this tree's simulator (ring:4), the guest as node 0 running "
                         "scripts/sim.sh PROGRAM ARGS (the positional args) and --host commands")
    ap.add_argument("--host", action="append", default=[], metavar="NODE=CMD",
                    help="with --cluster: a host process (sim backend) as node NODE, e.g. "
                         "1='build/userlib/tests/hal_conformance sim --ctx 0'")
    from paranic.cliopts import finite_float
    ap.add_argument("--timeout", type=finite_float(1, 86400, "seconds"), default=600)
    ap.add_argument("args", nargs="*", help="arguments of the guest script")
    a = ap.parse_args(argv)
    if a.build_only:
        print(build_initramfs())
        print(build_proxydev())
        print(build_sim())
        return 0
    if a.cluster:
        hosts = {int(h.split("=", 1)[0]): h.split("=", 1)[1].split() for h in a.host}
        c = cluster_run(a.args, nodes=a.nodes or 2, host_cmds=hosts, timeout=a.timeout)
        sys.stdout.write(c.guest.console + "---- device process ----\n" + c.guest.device_log)
        for h in c.hosts:
            print(f"---- host node {h.node}: exit {h.returncode} after {h.seconds:.1f} s\n{h.output}")
        print(f"---- simulator ----\n{c.sim_log}---- guest {c.guest.seconds:.1f} s, script exit "
              f"{c.guest.exit_status}, {len(c.guest.oopses)} oops lines")
        return 0 if c.guest.exit_status == 0 and not c.guest.oopses and all(h.returncode == 0 for h in c.hosts) else 1
    r = boot(a.run, a.args, device=a.device, sim_socket=a.sim_socket, node=a.node, nodes=a.nodes,
             timeout=a.timeout)
    sys.stdout.write(r.console)
    if r.device_log:
        sys.stdout.write("---- device process ----\n" + r.device_log)
    print(f"---- {r.seconds:.1f} s, boot {r.boot_seconds} s (guest uptime), script exit {r.exit_status}, "
          f"{len(r.oopses)} oops lines{', TIMEOUT' if r.timed_out else ''}")
    return 0 if r.exit_status == 0 and not r.oopses else 1


if __name__ == "__main__":
    sys.exit(main())
