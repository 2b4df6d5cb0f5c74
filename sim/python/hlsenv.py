"""The HLS kernels' C++ environment: where the ap_types headers are, and the g++ flags.

Shared by the kernels' C-simulation flow (``paranic.hls``, ``make hls``) and the cluster
simulator, whose harness compiles the collective kernel's C++ into every node
(docs/simulator.md, "The collective kernel"), so both build the very same code the same way.

Headers: ``$XILINX_HLS/include`` when that variable is set (Vitis's own ap_types and
hls::stream); otherwise the Apache-2.0 ap_types inside the hls4ml wheel (``make deps``
installs it with ``--no-deps``) plus ``hls/csim/hls_stream.h``, ParaNIC's stand-in for
``hls::stream`` (the wheel's copy is not Apache-2.0).
"""

from __future__ import annotations

import os
from pathlib import Path

from paranic.spec import kernels as K

from .paths import BUILD_ROOT, TREE

#: The kernels' sources (hls/<kernel>/, hls/include, hls/csim).
HLS_DIR = TREE / "hls"
#: libparanic's public headers (the kernels include paranic/pn_protocol.h).
USERLIB_INCLUDE = TREE / "userlib" / "include"
#: The headers every kernel's C++ includes besides its own (a build that compiles a
#: kernel depends on them): the generated spec headers and the hls::stream stand-in.
COMMON_HEADERS = (HLS_DIR / "include" / "pn_hls.h", USERLIB_INCLUDE / "paranic" / "pn_coll_spec.h",
                  USERLIB_INCLUDE / "paranic" / "pn_protocol.h", HLS_DIR / "csim" / "hls_stream.h")

CXXFLAGS = ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas",
            # the ap_types headers' own constructors trip these at -O2
            "-Wno-maybe-uninitialized", "-Wno-uninitialized",
            "-Wno-unused-label",   # HLS loop labels name loops in the synthesis reports
            "-ffp-contract=off"]   # no fused multiply-add: IEEE operations one by one, as in hardware


#: The Vitis flow's names, from the spec (one definition, shared with board builds).
HLS_SOLUTION = K.HLS_SOLUTION
hls_project = K.hls_project


def hls_work_dir(kernel: str) -> Path:
    """Where the Vitis flow of ``kernel`` runs."""
    return BUILD_ROOT / "hls" / kernel


def exported_rtl_dir(kernel: str) -> Path:
    """The kernel's Verilog after csynth (what a Vitis board build instantiates)."""
    return BUILD_ROOT / K.hls_export_path(kernel)


class HlsError(RuntimeError):
    """A kernel's environment or flow failed (the message says what to do)."""


def ap_types_dir() -> tuple[Path, str]:
    """(folder with ap_int.h, where it comes from)."""
    xilinx = os.environ.get("XILINX_HLS")
    if xilinx:
        inc = Path(xilinx) / "include"
        if not (inc / "ap_int.h").exists():
            raise HlsError(f"XILINX_HLS={xilinx} but {inc}/ap_int.h does not exist")
        return inc, f"Vitis HLS ($XILINX_HLS={xilinx})"
    try:
        import importlib.util
        spec = importlib.util.find_spec("hls4ml")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise HlsError("no ap_types headers: set XILINX_HLS, or run `make deps` "
                       "(installs hls4ml --no-deps for its Apache-2.0 ap_types)")
    inc = Path(list(spec.submodule_search_locations)[0]) / "templates" / "vivado" / "ap_types"
    if not (inc / "ap_int.h").exists():
        raise HlsError(f"the hls4ml wheel has no {inc}/ap_int.h")
    return inc, "the hls4ml wheel's Apache-2.0 ap_types, with hls/csim/hls_stream.h"


def include_dirs() -> list[str]:
    """g++ include options: the stream stand-in (without Vitis only), ap_types, our headers."""
    inc, _ = ap_types_dir()
    out = [] if os.environ.get("XILINX_HLS") else ["-I", str(HLS_DIR / "csim")]
    return out + ["-isystem", str(inc), "-I", str(HLS_DIR / "include"), "-I", str(USERLIB_INCLUDE)]
