"""Argument checks of the Python bindings: Python values to what the C API takes.

Every binding (:mod:`paranic.lib`, :mod:`paranic.ports`) checks its arguments here
before calling the library: a non-integer is a ``TypeError``, an integer out of range
``PnError(EINVAL)``, with the call's name in the message.
"""

from __future__ import annotations

import errno
import operator
import time
from typing import Any, Optional

from paranic.clib import CONSTANTS, PnError, ffi, lib

#: Blocking receives wait in slices this long, so that signals (Ctrl-C) get through.
WAIT_SLICE_NS = 100_000_000
#: Hal.open(ctx=...): any free context.
CTX_ANY: int = CONSTANTS["PN_CTX_ANY"]


def fields(ctype: str) -> list[str]:
    return [name for name, _ in ffi.typeof(ctype).fields]


def struct_dict(cdata: Any, ctype: str) -> dict[str, int]:
    return {f: int(getattr(cdata, f)) for f in fields(ctype)}


def int_arg(name: str, v: Any, lo: int, hi: int, what: str) -> int:
    """``v`` as an int in lo..hi; TypeError for a non-integer, PnError(EINVAL) outside."""
    if isinstance(v, bool):
        raise TypeError(f"{what}: {name} must be an int, not bool")
    try:
        v = operator.index(v)
    except TypeError:
        raise TypeError(f"{what}: {name} must be an int, not {type(v).__name__}") from None
    if not lo <= v <= hi:
        raise PnError(errno.EINVAL, what, f"{name} = {v} is out of range {lo}..{hi}")
    return v


#: Largest int64_t (timeouts, sizes).
I64_MAX = (1 << 63) - 1


def uint_arg(name: str, v: Any, what: str, bits: int = 32) -> int:
    return int_arg(name, v, 0, (1 << bits) - 1, what)


def timeout_arg(v: Any, what: str) -> Optional[int]:
    """None for "forever" (None or negative), else nanoseconds."""
    if v is None:
        return None
    t = int_arg("timeout_ns", v, -I64_MAX - 1, I64_MAX, what)
    return None if t < 0 else t


def buffer_arg(data: Any, what: str) -> tuple[Any, int]:
    """A cffi view of a bytes-like object and its size in bytes."""
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError(f"{what}: data must be bytes-like (bytes, bytearray, memoryview), "
                        f"not {type(data).__name__}") from None
    if not mv.contiguous:
        raise TypeError(f"{what}: data must be a contiguous buffer")
    mv = mv.cast("B")
    return (ffi.from_buffer("char[]", mv) if mv.nbytes else ffi.NULL), mv.nbytes


def wait_slices(timeout: Optional[int]):
    """Wait slices (ns) until ``timeout`` (None: forever) has passed; the first is
    yielded even for 0 (poll once)."""
    if timeout is None:
        while True:
            yield WAIT_SLICE_NS
    deadline = time.monotonic_ns() + timeout
    left = timeout
    while True:
        yield min(left, WAIT_SLICE_NS)
        left = deadline - time.monotonic_ns()
        if left <= 0:
            return


def open_opts(backend: Optional[str], node: Optional[int], nodes: Optional[int], cluster: Optional[str],
               ctx: Optional[int], opts: dict[str, Any], what: str) -> tuple[Any, list[Any]]:
    """A pn_open_opts_t (or NULL when nothing is given: all from the environment, as
    pn_open(NULL) does) and the objects that must live as long as the call."""
    types = dict(ffi.typeof("pn_open_opts_t").fields)
    named = ("backend", "cluster", "node", "nodes", "ctx")
    unknown = sorted(set(opts) - set(types) | set(opts) & set(named))
    if unknown:
        raise TypeError(f"{what}: unknown option(s) {unknown}; known: {sorted(set(types) - set(named))}")
    if all(v is None for v in (backend, node, nodes, cluster, ctx, *opts.values())):
        return ffi.NULL, []
    o = ffi.new("pn_open_opts_t *")
    lib.pn_open_opts_init(o)
    keep: list[Any] = []
    for name, s in (("backend", backend), ("cluster", cluster)):
        if s is None:
            continue
        if not isinstance(s, str):
            raise TypeError(f"{what}: {name} must be a str, not {type(s).__name__}")
        b = s.encode()
        if b"\0" in b:
            raise PnError(errno.EINVAL, what, f"{name} contains a NUL character")
        keep.append(ffi.new("char[]", b))
        setattr(o, name, keep[-1])
    imax = (1 << 31) - 1
    if node is not None:
        o.node = int_arg("node", node, 0, imax, what)
    if nodes is not None:
        o.nodes = int_arg("nodes", nodes, 1, imax, what)
    if ctx is not None:
        o.ctx = int_arg("ctx", ctx, CTX_ANY, imax, what)
    for name, v in opts.items():
        if v is not None:
            hi = (1 << (8 * ffi.sizeof(types[name].type) - 1)) - 1
            setattr(o, name, int_arg(name, v, 0, hi, what))
    return o, keep
