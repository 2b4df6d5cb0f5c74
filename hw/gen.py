"""``python -m paranic.hw.gen``: one entry point from NicCore parameters to its CSR map
and the driver's CSR header, as LiteX's ``gen.py`` habit has it.

    python -m paranic.hw.gen --links 2 --csr-json build/csr.json --csr-header build/pn_csr.h
    python -m paranic.hw.gen --from-csr-json board/csr.json --csr-header build/pn_csr.h

Without ``--from-csr-json`` it elaborates :class:`NicCoreStandalone` (about 0.3 s) and
asks it for the map; with it, it takes a gateware build's map (a board build's or the
simulator's ``csr.json``). The header text comes from :func:`paranic.spec.cgen.csr_header`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from paranic.spec import cgen
from paranic.spec import protocol as P


def csr_map(links: int = 2, n_ctx: int = P.DEFAULT_CONTEXTS, mtu: int = P.DEFAULT_MTU,
            with_sync_line: bool = False) -> dict[str, dict]:
    """CSR map (csr.json form) of a standalone NicCore with these parameters."""
    from .standalone import NicCoreStandalone, csr_dict
    return csr_dict(NicCoreStandalone(n_links=links, n_ctx=n_ctx, mtu=mtu,
                                      with_sync_line=with_sync_line).csr_map())


def load_csr_json(path: Path) -> dict[str, dict]:
    return json.loads(Path(path).read_text())


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.read_text() != text:  # keep the timestamp: no needless rebuilds
        out.write_text(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.hw.gen", description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=2, help="link ports (2: ring, 4: torus)")
    ap.add_argument("--n-ctx", type=int, default=P.DEFAULT_CONTEXTS, help="hardware contexts")
    ap.add_argument("--mtu", type=int, default=P.DEFAULT_MTU, help="payload bytes per packet")
    ap.add_argument("--from-csr-json", metavar="FILE", type=Path,
                    help="take the map of this gateware build instead of elaborating one")
    ap.add_argument("--csr-json", metavar="FILE", help="write the CSR map (- for stdout)")
    ap.add_argument("--csr-header", metavar="FILE", help="write the driver's pn_csr.h (- for stdout)")
    a = ap.parse_args(argv)
    if not (a.csr_json or a.csr_header):
        ap.error("nothing to write: give --csr-json and/or --csr-header")
    try:
        regs = load_csr_json(a.from_csr_json) if a.from_csr_json else csr_map(a.links, a.n_ctx, a.mtu)
        header = cgen.csr_header(regs) if a.csr_header else ""
    except (OSError, ValueError, KeyError) as e:
        print(f"paranic.hw.gen: {e}", file=sys.stderr)
        return 1
    if a.csr_json:
        _write(a.csr_json, json.dumps(regs, indent=1, sort_keys=True))
    if a.csr_header:
        _write(a.csr_header, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
