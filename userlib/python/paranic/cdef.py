"""libparanic's public headers as a cffi cdef, straight from the headers.

The cdef is not written by hand: the public headers (:data:`HEADERS`) run through
``gcc -E -P -nostdinc`` with empty stand-ins for ``<stddef.h>`` and ``<stdint.h>`` (cffi
knows ``size_t``, ``uint64_t`` ...), so only their declarations remain; their integer
``#define`` s (``gcc -dM -E``) are evaluated by a small C-expression evaluator. The
result is cached under ``build/userlib/cffi/``, keyed by the headers' contents.
"""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from paranic.paths import INCLUDE, USERLIB_BUILD

#: The public headers the cdef is made of (pn_protocol.h comes in through pn_hal.h).
HEADERS = ("pn_hal.h", "pn_rawdata.h", "pn_sim.h", "pn_ports.h", "pn_ctxseq.h", "pn_coll.h")
#: Where the generated cdef and constants are cached (one JSON file per header version).
CDEF_CACHE = USERLIB_BUILD / "cffi"
_CACHE_FORMAT = 1


class LibraryError(RuntimeError):
    """libparanic could not be built, declared or loaded (the message says why)."""


def _c_int(expr: str) -> Optional[int]:
    """Value of a C integer constant expression (``(1u << 30)``, ``0x10``, ``(-1)``),
    or None when it is something else (empty, a string, a function-like macro)."""
    py = re.sub(r"\b(0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]+\b", r"\1", expr.strip())
    if not py:
        return None
    try:
        tree = ast.parse(py, mode="eval")
    except SyntaxError:
        return None
    binops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitOr: operator.or_,
              ast.BitAnd: operator.and_, ast.BitXor: operator.xor}
    unops = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}

    def ev(n: ast.AST) -> int:
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in binops:
            return binops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and type(n.op) in unops:
            return unops[type(n.op)](ev(n.operand))
        raise ValueError(ast.dump(n))

    try:
        return ev(tree)
    except ValueError:
        return None


def _headers_key(include: Path) -> str:
    h = hashlib.sha256(f"format {_CACHE_FORMAT}\nheaders {' '.join(HEADERS)}\n".encode())
    for f in sorted((include / "paranic").glob("*.h")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _run_gcc(args: list[str]) -> str:
    try:
        r = subprocess.run(["gcc", *args], capture_output=True, text=True)
    except OSError as e:
        raise LibraryError(f"cannot run gcc to read libparanic's headers: {e}") from e
    if r.returncode != 0:
        raise LibraryError(f"gcc {' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return r.stdout


def generate_cdef(include: Path = INCLUDE) -> tuple[str, dict[str, int]]:
    """The cdef (declarations of :data:`HEADERS`) and every integer ``PN_*`` macro,
    straight from the headers under ``include`` (no cache)."""
    with tempfile.TemporaryDirectory(prefix="paranic-cdef-") as tmp:
        t = Path(tmp)
        for stub in ("stddef.h", "stdint.h"):
            (t / stub).write_text("")
        src = t / "all.h"
        src.write_text("".join(f"#include <paranic/{h}>\n" for h in HEADERS))
        flags = ["-nostdinc", f"-I{t}", f"-I{include}"]
        cdef = _run_gcc(["-E", "-P", *flags, str(src)])
        macros = _run_gcc(["-dM", "-E", "-undef", *flags, str(src)])
    defines: dict[str, int] = {}
    for line in macros.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("PN_") and "(" not in parts[1]:
            v = _c_int(parts[2])
            if v is not None:
                defines[parts[1]] = v
    return cdef, defines


def load_cdef(include: Path = INCLUDE, cache: Path = CDEF_CACHE) -> tuple[str, dict[str, int], Path]:
    """:func:`generate_cdef`, cached in ``cache/cdef-<hash of the headers>.json``;
    returns the cdef, the macros and the cache file."""
    path = cache / f"cdef-{_headers_key(include)}.json"
    try:
        d = json.loads(path.read_text())
        return d["cdef"], {k: int(v) for k, v in d["defines"].items()}, path
    except (OSError, ValueError, KeyError):
        pass
    cdef, defines = generate_cdef(include)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".cdef-")
        with os.fdopen(fd, "w") as f:
            json.dump({"headers": list(HEADERS), "cdef": cdef, "defines": defines}, f, indent=1)
        os.replace(tmp, path)   # atomic: processes starting together all read a whole file
    except OSError:
        pass                    # a read-only tree: work without the cache
    return cdef, defines, path
