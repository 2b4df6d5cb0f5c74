"""The routing function's one definition, ``spec/c/pn_route.c``, loaded through ctypes.

The firmware compiles the same file; Python builds it once into a small shared library
(with the protocol header generated from :mod:`paranic.spec.cgen` next to it) in a cache
directory (``$XDG_CACHE_HOME/paranic`` or ``~/.cache/paranic``, falling back to the system's
temporary directory), keyed by a hash of the sources, so an edit is picked up at once.
It needs a C compiler (``$CC``, else ``cc``), which ``make deps`` installs.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parent / "c"
SOURCES = ("pn_route.c", "pn_route.h")


class RouteTopo(ctypes.Structure):
    """``struct pn_route_topo``."""

    _fields_ = [("x", ctypes.c_uint16), ("y", ctypes.c_uint16),
                ("down", ctypes.POINTER(ctypes.c_uint8)), ("ties", ctypes.c_uint)]

#: ``pn_route_topo.ties`` values (pn_route.h): split ties by parity, or every tie +.
TIES = {"split": 0, "plus": 1}


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    root = Path(base) / "paranic" / "routelib"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    root = Path(tempfile.gettempdir()) / f"paranic-routelib-{os.getuid()}"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _build() -> Path:
    from .cgen import protocol_header

    header = protocol_header()
    h = hashlib.sha256(header.encode())
    for name in SOURCES:
        h.update((SOURCE_DIR / name).read_bytes())
    out = _cache_root() / f"libpn_route-{h.hexdigest()[:16]}.so"
    if out.exists():
        return out
    cc = os.environ.get("CC") or "cc"
    if shutil.which(cc) is None:
        raise RuntimeError(f"paranic.spec: the routing function is C ({SOURCE_DIR / 'pn_route.c'}) "
                           f"and needs a C compiler; {cc!r} was not found (run `make deps`)")
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        inc = Path(tmp) / "include" / "paranic"
        inc.mkdir(parents=True)
        (inc / "pn_protocol.h").write_text(header)
        so = Path(tmp) / out.name
        cmd = [cc, "-std=c11", "-O2", "-Wall", "-Werror", "-shared", "-fPIC",
               "-I", str(Path(tmp) / "include"), "-o", str(so), str(SOURCE_DIR / "pn_route.c")]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"paranic.spec: building the routing function failed:\n"
                               f"{' '.join(cmd)}\n{r.stderr}")
        os.replace(so, out)   # atomic: concurrent builders race harmlessly
    return out


@lru_cache(maxsize=1)
def lib() -> ctypes.CDLL:
    """The loaded routing library (built on first use)."""
    so = ctypes.CDLL(str(_build()))
    P = ctypes.POINTER(RouteTopo)
    u = ctypes.c_uint
    so.pn_route.argtypes = [P, u, u]
    so.pn_route.restype = u
    so.pn_route_table.argtypes = [P, u, ctypes.POINTER(ctypes.c_uint8), u]
    so.pn_route_table.restype = u
    so.pn_route_neighbor.argtypes = [P, u, u, ctypes.POINTER(u)]
    so.pn_route_neighbor.restype = u
    return so
