"""`make hls` and the kernels' run_hls.tcl (docs/hls.md): C simulation without Vitis, the
Vitis flow's commands where it is installed, and the Tcl scripts evaluated by tclsh with
the Vitis HLS commands they call recorded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from paranic import hls
from paranic.sim import hlsenv
from paranic.paths import TREE


def _env_without_vitis(**extra) -> dict[str, str]:
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and not (Path(p) / "vitis_hls").exists() and not (Path(p) / "vitis-run").exists()]
    env = {k: v for k, v in os.environ.items() if k != "XILINX_HLS"}
    env["PATH"] = os.pathsep.join(path)
    env.update(extra)
    return env


def test_make_hls_runs_csim_without_vitis():
    r = subprocess.run(["make", "-s", "hls"], cwd=TREE, env=_env_without_vitis(),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for k in hls.KERNELS:
        assert f"hls: {k}: C simulation (g++, headers: the hls4ml wheel's Apache-2.0 ap_types" in out
        assert "passed" in out
    assert "Vitis HLS flow not run (neither vitis_hls nor vitis-run is on PATH)" in out
    assert "vitis_hls -f hls/<kernel>/run_hls.tcl" in out


def test_flow_runs_vitis_when_on_path(tmp_path):
    """With a `vitis_hls` on PATH the flow runs each kernel's run_hls.tcl with its
    vectors (here a stand-in program that records how it was called)."""
    log = tmp_path / "calls"
    fake = tmp_path / "bin" / "vitis_hls"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$PWD|$*|$PN_TREE|$PN_HLS_VECTORS" >> {log}\n')
    fake.chmod(0o755)
    env = _env_without_vitis()
    env["PATH"] = f"{fake.parent}{os.pathsep}{env['PATH']}"
    r = subprocess.run([str(TREE / ".venv/bin/python"), "-m", "paranic.hls"], cwd=TREE, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    calls = [ln.split("|") for ln in log.read_text().splitlines()]
    assert [Path(c[0]).name for c in calls] == list(hls.KERNELS)
    for (cwd, args, tree, vectors), k in zip(calls, hls.KERNELS):
        assert args == f"-f {TREE / 'hls' / k / 'run_hls.tcl'}"
        assert Path(tree) == TREE and Path(vectors).exists()
        assert f"hls: {k}: Vitis flow (vitis_hls -f hls/{k}/run_hls.tcl)" in r.stdout


def test_flow_refuses_unknown_kernel():
    r = subprocess.run([str(TREE / ".venv/bin/python"), "-m", "paranic.hls", "bogus"], cwd=TREE,
                       env=_env_without_vitis(), capture_output=True, text=True)
    assert r.returncode == 1 and "unknown kernel bogus" in r.stderr


#: Stand-ins for the Vitis HLS commands: each prints its name, then each argument (as
#: Tcl has parsed it) on a line of its own.
_RECORDER = """
foreach cmd {open_project set_top add_files open_solution set_part create_clock
             csim_design csynth_design cosim_design export_design} {
    proc $cmd {args} "puts {CALL $cmd}; foreach a \\$args {puts \\"ARG \\$a\\"}"
}
proc exit {args} {}
"""


def _tcl_calls(kernel: str, tmp_path: Path) -> list[list[str]]:
    tclsh = shutil.which("tclsh")
    if tclsh is None:
        pytest.fail("tclsh is missing: run `make deps` (Debian package tcl)")
    script = tmp_path / "eval.tcl"
    script.write_text(_RECORDER + f"source {{{TREE / 'hls' / kernel / 'run_hls.tcl'}}}\n")
    env = hls.vitis_env(kernel, Path("/vectors.txt"))
    r = subprocess.run([tclsh, str(script)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    calls: list[list[str]] = []
    for ln in r.stdout.splitlines():
        if ln.startswith("CALL "):
            calls.append([ln[5:]])
        elif ln.startswith("ARG "):
            calls[-1].append(ln[4:])
    return calls


@pytest.mark.parametrize("kernel", hls.KERNELS)
def test_run_hls_tcl_names_the_right_top_and_files(kernel, tmp_path):
    calls = _tcl_calls(kernel, tmp_path)
    names = [c[0] for c in calls]
    assert names == ["open_project", "set_top", "add_files", "add_files", "open_solution", "set_part",
                     "create_clock", "csim_design", "csynth_design", "cosim_design", "export_design"]
    by = {}
    for c in calls:
        by.setdefault(c[0], []).append(c[1:])
    assert by["set_top"] == [[kernel]]
    # The project and solution are the names a Vitis board build looks under for the RTL.
    assert by["open_project"] == [["-reset", hlsenv.hls_project(kernel)]]
    assert by["open_solution"][0][:2] == ["-reset", hlsenv.HLS_SOLUTION]
    assert hlsenv.exported_rtl_dir(kernel).parts[-4:-2] == (hlsenv.hls_project(kernel), hlsenv.HLS_SOLUTION)
    design, tb = by["add_files"]
    assert design[0] == str(TREE / "hls" / kernel / hls.SOURCES[kernel][0])
    assert tb[:2] == ["-tb", str(TREE / "hls" / kernel / hls.TESTBENCH[kernel])]
    for files in (design, tb):
        cflags = files[files.index("-cflags") + 1].split()
        dirs = {Path(f[2:]) for f in cflags if f.startswith("-I")}
        assert dirs == {TREE / "hls" / "include", TREE / "userlib" / "include"}
        assert all(d.is_dir() for d in dirs)
    # The design's sources are all the kernel's, and the top function is defined there.
    src = Path(design[0]).read_text()
    assert re.search(rf"^\w+ {kernel}\(", src, re.M), f"{design[0]} does not define {kernel}()"
    assert by["csim_design"] == [["-argv", "/vectors.txt"]]
    assert by["cosim_design"][0][:2] == ["-argv", "/vectors.txt"]
    assert by["export_design"][0][:2] == ["-format", "ip_catalog"]
    assert "-period" in by["create_clock"][0] and by["set_part"][0][0].startswith("xc")
