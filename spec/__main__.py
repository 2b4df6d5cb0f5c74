"""``python -m paranic.spec [--check]``: write (or check) every file generated from the spec.

The C headers and the documents' tables live in the source tree next to the code that
includes or explains them; this package sits at the top of that tree (``spec/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from . import cgen, docgen

#: Source tree: spec/ is one of its top-level folders.
TREE = Path(__file__).resolve().parents[1]

#: Generated C headers, relative to the tree.
HEADERS: dict[str, Callable[[], str]] = {
    "userlib/include/paranic/pn_protocol.h": cgen.protocol_header,
    "userlib/src/pn_sim_shm.h": cgen.sim_shm_header,
    "userlib/tests/pn_hal_vecs.h": cgen.hal_vecs_header,
    "hls/include/pn_hls.h": cgen.hls_header,
    "userlib/include/paranic/pn_coll_spec.h": cgen.coll_header,
}


def expected(tree: Path = TREE) -> dict[Path, str]:
    """Every generated file under ``tree`` with the content it must have."""
    out = {tree / rel: gen() for rel, gen in HEADERS.items()}
    for doc in sorted((tree / "docs").glob("*.md")):
        text = doc.read_text()
        if docgen.blocks(text):
            out[doc] = docgen.refresh(text)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paranic.spec", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only compare; exit 1 when a file is stale")
    ap.add_argument("--tree", type=Path, default=TREE, help=f"source tree (default {TREE})")
    a = ap.parse_args(argv)
    stale = []
    for path, text in expected(a.tree).items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path)
        if not a.check:
            path.write_text(text)
            print(f"paranic.spec: wrote {path.relative_to(a.tree)}")
    if a.check and stale:
        for p in stale:
            print(f"paranic.spec: {p.relative_to(a.tree)} is stale: run `make headers`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
