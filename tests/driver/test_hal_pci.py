"""libparanic's `pci` backend without a board: it is built into the library and
registered, and pn_open fails cleanly (-ENODEV and a message saying what to do) when
there is no /dev/paranic<N>, or with the ioctl's errno when the node is not a ParaNIC.
Against a device it runs in the QEMU guest (docs/driver.md)."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

from paranic.launch import BuildError, build_userlib

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "userlib"


@pytest.fixture(scope="module")
def pci_open(tmp_path_factory) -> Path:
    try:
        build_userlib()
    except BuildError as e:
        pytest.fail(str(e))
    exe = tmp_path_factory.mktemp("pci") / "pci_open"
    r = subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                        f"-I{ROOT / 'userlib/include'}", f"-I{ROOT / 'driver/include'}",
                        str(Path(__file__).parent / "pci_open.c"), "-o", str(exe),
                        f"-L{BUILD}", f"-Wl,-rpath,{BUILD}", "-lparanic", "-lpthread"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    return exe


def run(exe: Path, **env: str) -> tuple[int, str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("PARANIC_")}
    e.update(env)
    p = subprocess.run([str(exe)], capture_output=True, text=True, env=e, timeout=30)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.split()[0]), p.stdout, p.stderr


def test_library_exports_the_pci_backend(pci_open):
    syms = subprocess.run(["nm", "-D", "--defined-only", str(BUILD / "libparanic.so")],
                          capture_output=True, text=True, check=True).stdout
    assert "pn_backend_pci" in syms
    assert (BUILD / "obj" / "hal_pci.o").exists()


@pytest.mark.parametrize("dev,path", [("7", "/dev/paranic7"), ("/nonexistent/paranic", "/nonexistent/paranic")])
def test_no_device_is_enodev_with_a_message(pci_open, dev, path):
    if Path(path).exists():
        pytest.skip(f"{path} exists here")
    r, _, err = run(pci_open, PARANIC_BACKEND="pci", PARANIC_DEVICE=dev)
    assert r == -errno.ENODEV
    assert f"no ParaNIC at {path}" in err and "paranic.ko" in err


def test_default_device_is_paranic0(pci_open):
    if Path("/dev/paranic0").exists():
        pytest.skip("a board is present")
    r, _, err = run(pci_open, PARANIC_BACKEND="pci")
    assert r == -errno.ENODEV and "/dev/paranic0" in err


def test_not_a_paranic_device(pci_open):
    """A node that is not ours: GET_INFO fails with the ioctl's errno, nothing mapped."""
    r, _, _ = run(pci_open, PARANIC_BACKEND="pci", PARANIC_DEVICE="/dev/null")
    assert r == -errno.ENOTTY


def test_bad_heap_size_refused(pci_open):
    r, _, _ = run(pci_open, PARANIC_BACKEND="pci", PARANIC_DEVICE="7", PARANIC_DMA_HEAP="lots")
    assert r == -errno.EINVAL
