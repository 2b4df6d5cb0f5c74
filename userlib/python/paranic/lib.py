"""Python bindings of libparanic (cffi, ABI mode), for the tests and the ``paranic`` CLI.

``ffi.dlopen()`` of ``build/userlib/libparanic.so`` (:data:`paranic.launch.LIBRARY`,
built with :func:`paranic.launch.build_userlib` when it is missing). The cdef is not
written by hand: it is the public headers ``pn_hal.h``, ``pn_rawdata.h`` and
``pn_sim.h`` run through ``gcc -E -P -nostdinc`` with empty stand-ins for
``<stddef.h>`` and ``<stdint.h>`` (cffi knows ``size_t``, ``uint64_t`` ...), so only
their declarations remain; the result is cached under ``build/userlib/cffi/``, keyed
by the headers' contents. Integer constants come from :mod:`paranic.protocol` where
it defines them (``PN_TYPE_*``, ``PN_FLAG_*``, ``PN_MAX_DMA_LENGTH`` ...), the others
(``PN_ANY``, ``PN_CTX_ANY``, ``PN_RD_MAX_MSG`` ...) from the headers' ``#define``
lines (``gcc -dM -E``).

* :class:`Hal`: one hardware context (``pn_open`` ... ``pn_close``).
* :class:`RawData`: rawdata messages (``pn_rd_*``), over its own context or a
  :class:`Hal`.
* :class:`PnError` (an :class:`OSError`): every negative return code, with its errno
  and ``pn_strerror()`` text; bad Python arguments give ``PnError(EINVAL)`` or
  :class:`TypeError`.

As in C, a handle is used by one thread at a time; calls into the library release
the GIL, so two handles can block in two threads (a barrier, a large send).
Blocking receives wait in slices of :data:`WAIT_SLICE_NS`, so Ctrl-C interrupts them.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import errno
import fcntl
import hashlib
import json
import operator
import os
import re
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Optional

import cffi

from paranic import protocol as P
from paranic.hdlsim import ROOT
from paranic.launch import LIBRARY, USERLIB_BUILD, BuildError, build_userlib

#: Directory holding ``paranic/pn_*.h``.
INCLUDE = ROOT / "userlib" / "include"
#: The public headers the cdef is made of (pn_protocol.h comes in through pn_hal.h).
HEADERS = ("pn_hal.h", "pn_rawdata.h", "pn_sim.h", "pn_ports.h")
#: Where the generated cdef and constants are cached (one JSON file per header version).
CDEF_CACHE = USERLIB_BUILD / "cffi"
#: Blocking receives wait in slices this long, so that signals (Ctrl-C) get through.
WAIT_SLICE_NS = 100_000_000
_CACHE_FORMAT = 1


class LibraryError(RuntimeError):
    """libparanic could not be built, declared or loaded (the message says why)."""


class PnError(OSError):
    """A libparanic call failed: ``errno`` is the (positive) errno code, ``strerror``
    says which call and ``pn_strerror()``'s text."""

    def __init__(self, code: int, what: str = "", text: Optional[str] = None) -> None:
        code = abs(int(code))
        if text is None:
            text = strerror(-code)
        super().__init__(code, f"{what}: {text}" if what else text)


# ---- cdef and constants from the headers ----------------------------------------------------

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


def _ensure_library() -> Path:
    if LIBRARY.exists():
        return LIBRARY
    USERLIB_BUILD.parent.mkdir(parents=True, exist_ok=True)
    with open(USERLIB_BUILD.parent / ".userlib-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # N processes importing at once build once
        if not LIBRARY.exists():
            try:
                build_userlib()
            except BuildError as e:
                raise LibraryError(f"{LIBRARY} is missing and building it failed: {e}") from e
    if not LIBRARY.exists():
        raise LibraryError(f"`make -C userlib` succeeded but {LIBRARY} does not exist")
    return LIBRARY


def _load() -> tuple[cffi.FFI, Any, dict[str, int]]:
    cdef, defines, _ = load_cdef()
    ffi = cffi.FFI()
    try:
        ffi.cdef(cdef)
    except cffi.CDefError as e:
        raise LibraryError(f"cffi cannot parse libparanic's headers: {e}") from e
    path = _ensure_library()
    try:
        lib = ffi.dlopen(str(path))
    except OSError as e:
        raise LibraryError(f"cannot load {path}: {e}") from e
    return ffi, lib, defines


ffi, lib, DEFINES = _load()
"""``ffi``/``lib``: the raw cffi objects (every function of the headers);
``DEFINES``: every integer ``PN_*`` macro of the headers."""


def _from_protocol(name: str) -> Optional[int]:
    """The value paranic.protocol defines for the pn_protocol.h macro ``name``."""
    enums: dict[str, type[enum.IntEnum]] = {"PN_TYPE_": P.PacketType, "PN_FLAG_": P.Flags, "PN_PORT_": P.Port,
                                            "PN_REG_": P.CtxReg, "PN_STATUS_": P.StatusBit}
    for prefix, e in enums.items():
        if name.startswith(prefix) and name[len(prefix):] in e.__members__:
            return int(e[name[len(prefix):]])
    v = getattr(P, name[3:], None)
    return v if type(v) is int else None


#: Every integer PN_* constant of the headers: paranic.protocol's value where it defines
#: one, else the header's.
CONSTANTS: dict[str, int] = {}
for _name, _value in DEFINES.items():
    _p = _from_protocol(_name)
    CONSTANTS[_name] = _value if _p is None else _p

PacketType = P.PacketType
Flags = P.Flags
MAX_DMA_LENGTH: int = P.MAX_DMA_LENGTH
#: pn_rd_recv/peek: from any node.
ANY: int = CONSTANTS["PN_ANY"]
#: Hal.open(ctx=...): any free context.
CTX_ANY: int = CONSTANTS["PN_CTX_ANY"]
#: rawdata's well-known context.
RD_CTX: int = CONSTANTS["PN_RD_CTX"]
#: Largest rawdata message.
RD_MAX_MSG: int = CONSTANTS["PN_RD_MAX_MSG"]
RD_CHUNK: int = CONSTANTS["PN_RD_CHUNK"]
DEFAULT_PIO_THRESHOLD: int = CONSTANTS["PN_DEFAULT_PIO_THRESHOLD"]


def _fields(ctype: str) -> list[str]:
    return [name for name, _ in ffi.typeof(ctype).fields]


def _struct_dict(cdata: Any, ctype: str) -> dict[str, int]:
    return {f: int(getattr(cdata, f)) for f in _fields(ctype)}


Header = dataclasses.make_dataclass(
    "Header", [(f, int) for f in _fields("pn_header_t")], frozen=True,
    namespace={"__doc__": "A received packet's header: the fields of pn_header_t.",
               "som": property(lambda s: bool(s.flags & Flags.SOM), doc="first packet of a message"),
               "eom": property(lambda s: bool(s.flags & Flags.EOM), doc="last packet of a message")})
Header.__module__ = __name__


# ---- argument checks ------------------------------------------------------------------------

def strerror(code: int) -> str:
    """``pn_strerror(code)``: text for a (negative) libparanic return code."""
    return ffi.string(lib.pn_strerror(int(code))).decode(errors="replace")


def _check(r: int, what: str) -> int:
    if r < 0:
        raise PnError(-r, what)
    return r


def _int(name: str, v: Any, lo: int, hi: int, what: str) -> int:
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


_I64 = (1 << 63) - 1


def _uint(name: str, v: Any, what: str, bits: int = 32) -> int:
    return _int(name, v, 0, (1 << bits) - 1, what)


def _timeout(v: Any, what: str) -> Optional[int]:
    """None for "forever" (None or negative), else nanoseconds."""
    if v is None:
        return None
    t = _int("timeout_ns", v, -_I64 - 1, _I64, what)
    return None if t < 0 else t


def _buffer(data: Any, what: str) -> tuple[Any, int]:
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


def _slices(timeout: Optional[int]):
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


def _open_opts(backend: Optional[str], node: Optional[int], nodes: Optional[int], cluster: Optional[str],
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
        o.node = _int("node", node, 0, imax, what)
    if nodes is not None:
        o.nodes = _int("nodes", nodes, 1, imax, what)
    if ctx is not None:
        o.ctx = _int("ctx", ctx, CTX_ANY, imax, what)
    for name, v in opts.items():
        if v is not None:
            hi = (1 << (8 * ffi.sizeof(types[name].type) - 1)) - 1
            setattr(o, name, _int(name, v, 0, hi, what))
    return o, keep


# ---- the HAL --------------------------------------------------------------------------------

class Hal:
    """One hardware context (``pn_hal_t``). Make it with :meth:`open`; a context
    manager; :meth:`close` releases it (idempotent). Every call on a closed handle
    raises ``PnError(EBADF)``."""

    def __init__(self, ptr: Any, borrowed: bool = False) -> None:
        self._h = ptr
        self._borrowed = borrowed               # opened by a RawData, which closes it
        self._rawdata: "weakref.WeakSet[RawData]" = weakref.WeakSet()   # attached ones
        self._rxbuf = ffi.new("char[]", max(1, lib.pn_mtu(ptr)))
        self._dma: Any = None                   # send_dma's buffer (pn_dma_alloc)
        self._dma_len = 0

    @classmethod
    def open(cls, backend: Optional[str] = None, node: Optional[int] = None, nodes: Optional[int] = None,
             cluster: Optional[str] = None, ctx: Optional[int] = None, **opts: Optional[int]) -> "Hal":
        """``pn_open``. None takes the value from the environment, as
        ``pn_open_opts_init`` does (``PARANIC_BACKEND``, ``PARANIC_NODE`` ...); ``ctx``
        None is any free context (``PARANIC_CTX`` counts only when no argument at all
        is given, as for ``pn_open(NULL)``). ``opts``: the other ``pn_open_opts_t``
        fields (``contexts``, ``mtu``, ``rx_slots``, ``tx_entries``, ``pio_threshold``)."""
        o, keep = _open_opts(backend, node, nodes, cluster, ctx, opts, "pn_open")
        pp = ffi.new("pn_hal_t **")
        _check(lib.pn_open(pp, o), "pn_open")
        del keep
        return cls(pp[0])

    # -- lifetime --
    def _ptr(self) -> Any:
        if self._h is None:
            raise PnError(errno.EBADF, "", "the HAL handle is closed")
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    def close(self) -> None:
        """Close attached RawData, then ``pn_close``. Sends still pending are
        abandoned (call :meth:`tx_wait` first). A context opened by
        :meth:`RawData.open` is closed by closing the RawData."""
        if self._h is None:
            return
        if self._borrowed:
            raise PnError(errno.EBUSY, "close", "this context belongs to a RawData: close that")
        for rd in list(self._rawdata):
            rd.close()
        h, self._h, self._dma = self._h, None, None
        _check(lib.pn_close(h), "pn_close")

    def __enter__(self) -> "Hal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if self._h is not None and not self._borrowed:
                self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._h is None:
            return "<Hal closed>"
        return f"<Hal {self.backend} node {self.node_id}/{self.num_nodes} ctx {self.ctx_id}>"

    # -- information --
    @property
    def node_id(self) -> int:
        return _check(lib.pn_node_id(self._ptr()), "pn_node_id")

    @property
    def num_nodes(self) -> int:
        return _check(lib.pn_num_nodes(self._ptr()), "pn_num_nodes")

    @property
    def ctx_id(self) -> int:
        return _check(lib.pn_ctx_id(self._ptr()), "pn_ctx_id")

    @property
    def num_ctx(self) -> int:
        return _check(lib.pn_num_ctx(self._ptr()), "pn_num_ctx")

    @property
    def mtu(self) -> int:
        return _check(lib.pn_mtu(self._ptr()), "pn_mtu")

    @property
    def pio_max(self) -> int:
        """Largest PIO payload."""
        return _check(lib.pn_pio_max(self._ptr()), "pn_pio_max")

    @property
    def backend(self) -> str:
        return ffi.string(lib.pn_backend_name(self._ptr())).decode()

    # -- send --
    def _dst(self, dst_node: Any, dst_ctx: Any, tag: Any, what: str) -> tuple[int, int, int]:
        return (_uint("dst_node", dst_node, what), _uint("dst_ctx", dst_ctx, what),
                _uint("tag", tag, what, bits=64))

    def send(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send``: PIO up to the threshold, else DMA through the HAL's bounce
        buffer; ``data`` is reusable on return."""
        n, c, t = self._dst(dst_node, dst_ctx, tag, "pn_send")
        buf, size = _buffer(data, "pn_send")
        _check(lib.pn_send(self._ptr(), n, c, t, buf, size), "pn_send")

    def send_pio(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send_pio``: one packet of at most :attr:`pio_max` bytes."""
        n, c, t = self._dst(dst_node, dst_ctx, tag, "pn_send_pio")
        buf, size = _buffer(data, "pn_send_pio")
        _check(lib.pn_send_pio(self._ptr(), n, c, t, buf, size), "pn_send_pio")

    def send_dma(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send_dma`` of a copy of ``data`` in a DMA buffer this handle owns; returns
        once the send has completed (``pn_tx_wait``), so the buffer can be reused."""
        what = "pn_send_dma"
        n, c, t = self._dst(dst_node, dst_ctx, tag, what)
        buf, size = _buffer(data, what)
        h = self._ptr()
        if size == 0 or size > MAX_DMA_LENGTH:   # nothing to copy / the HAL refuses the length
            _check(lib.pn_send_dma(h, n, c, t, buf, size), what)
        else:
            if size > self._dma_len:
                want = 64 * 1024
                while want < size:
                    want <<= 1
                if self._dma is not None:
                    _check(lib.pn_dma_free(h, self._dma), "pn_dma_free")
                    self._dma, self._dma_len = None, 0
                out = ffi.new("void **")
                _check(lib.pn_dma_alloc(h, want, out), "pn_dma_alloc")
                self._dma, self._dma_len = out[0], want
            ffi.memmove(self._dma, buf, size)
            _check(lib.pn_send_dma(h, n, c, t, self._dma, size), what)
        _check(lib.pn_tx_wait(h), "pn_tx_wait")

    def tx_wait(self) -> None:
        """``pn_tx_wait``: every posted DMA and PIO send has completed."""
        _check(lib.pn_tx_wait(self._ptr()), "pn_tx_wait")

    # -- receive --
    def recv(self, timeout_ns: Optional[int] = -1) -> Optional[tuple[Any, bytes]]:
        """The next packet as ``(Header, payload)``, or None when none came within
        ``timeout_ns`` (wall time; negative or None: wait forever; 0: poll)."""
        what = "pn_recv_wait"
        timeout = _timeout(timeout_ns, what)
        h = self._ptr()
        hdr = ffi.new("pn_header_t *")
        for step in _slices(timeout):
            if _check(lib.pn_recv_wait(h, hdr, step), what):
                break
        else:
            return None
        n = int(hdr.length)
        if n > len(self._rxbuf):
            self._rxbuf = ffi.new("char[]", n)
        got = _check(lib.pn_recv_body(h, self._rxbuf, len(self._rxbuf)), "pn_recv_body")
        return Header(**_struct_dict(hdr, "pn_header_t")), ffi.buffer(self._rxbuf, got)[:]

    # -- barrier, status, time --
    def barrier(self) -> None:
        """``pn_barrier``: enter the cluster barrier and wait until all nodes have."""
        _check(lib.pn_barrier(self._ptr()), "pn_barrier")

    def status(self) -> dict[str, int]:
        """``pn_status``: the fields of pn_status_t."""
        st = ffi.new("pn_status_t *")
        _check(lib.pn_status(self._ptr(), st), "pn_status")
        return _struct_dict(st, "pn_status_t")

    def now_ns(self) -> int:
        """The backend's time (wall clock on sw, simulated time on sim)."""
        return int(lib.pn_now_ns(self._ptr()))

    def cycles(self) -> int:
        """The backend's time in target-clock cycles."""
        return int(lib.pn_cycles(self._ptr()))

    def progress(self) -> int:
        """``pn_progress``: let a software backend do pending NIC work."""
        return _check(lib.pn_progress(self._ptr()), "pn_progress")

    def sim_info(self) -> dict[str, int]:
        """``pn_sim_info``: the simulator's shape, PCIe model and counters
        (``PnError(ENOTSUP)`` off the sim backend)."""
        info = ffi.new("pn_sim_info_t *")
        _check(lib.pn_sim_info(self._ptr(), info), "pn_sim_info")
        return _struct_dict(info, "pn_sim_info_t")

    def sim_trace(self, node: int, ctx: int) -> dict[str, int]:
        """``pn_sim_trace``: the trace record of (node, ctx) in cycles
        (``PnError(ENOTSUP)`` off the sim backend)."""
        n, c = _uint("node", node, "pn_sim_trace"), _uint("ctx", ctx, "pn_sim_trace")
        t = ffi.new("pn_sim_trace_t *")
        _check(lib.pn_sim_trace(self._ptr(), n, c, t), "pn_sim_trace")
        return _struct_dict(t, "pn_sim_trace_t")


# ---- rawdata --------------------------------------------------------------------------------

class RawData:
    """rawdata (``pn_rd_t``): node-addressed messages of 0 .. :data:`RD_MAX_MSG` bytes.
    Make it with :meth:`open` (its own context) or :meth:`attach` (over a
    :class:`Hal`, which then closes it first when it closes)."""

    _KEEP_BUF = 16 << 20   # receive buffers up to this size are kept for the next call

    def __init__(self, ptr: Any, hal: Optional[Hal]) -> None:
        self._rd = ptr
        if hal is None:                       # opened: the context is ours
            hal = Hal(lib.pn_rd_hal(ptr), borrowed=True)
        else:
            hal._rawdata.add(self)
        self._hal = hal
        self._buf = ffi.new("char[]", 64 * 1024)

    @classmethod
    def open(cls, backend: Optional[str] = None, node: Optional[int] = None, nodes: Optional[int] = None,
             cluster: Optional[str] = None, ctx: Optional[int] = None, **opts: Optional[int]) -> "RawData":
        """``pn_rd_open``: arguments as :meth:`Hal.open`; ``ctx`` None is rawdata's
        well-known context :data:`RD_CTX`."""
        o, keep = _open_opts(backend, node, nodes, cluster, ctx, opts, "pn_rd_open")
        pp = ffi.new("pn_rd_t **")
        _check(lib.pn_rd_open(pp, o), "pn_rd_open")
        del keep
        return cls(pp[0], None)

    @classmethod
    def attach(cls, hal: Hal) -> "RawData":
        """``pn_rd_attach``: rawdata over an open context (it then owns its receive side)."""
        if not isinstance(hal, Hal):
            raise TypeError(f"pn_rd_attach: hal must be a Hal, not {type(hal).__name__}")
        pp = ffi.new("pn_rd_t **")
        _check(lib.pn_rd_attach(pp, hal._ptr()), "pn_rd_attach")
        return cls(pp[0], hal)

    def _ptr(self) -> Any:
        if self._rd is None:
            raise PnError(errno.EBADF, "", "the RawData handle is closed")
        return self._rd

    @property
    def hal(self) -> Hal:
        """The HAL context underneath (for barrier, status, node_id ...)."""
        self._ptr()
        return self._hal

    @property
    def closed(self) -> bool:
        return self._rd is None

    def close(self) -> None:
        """``pn_rd_close`` (idempotent); also closes the context if :meth:`open` made it."""
        if self._rd is None:
            return
        rd, self._rd = self._rd, None
        if self._hal._borrowed:
            self._hal._h = None
        else:
            self._hal._rawdata.discard(self)
        _check(lib.pn_rd_close(rd), "pn_rd_close")

    def __enter__(self) -> "RawData":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def send(self, dst: int, data: Any) -> None:
        """``pn_rd_send``: returns once the whole message is with the NIC."""
        d = _uint("dst", dst, "pn_rd_send")
        buf, size = _buffer(data, "pn_rd_send")
        _check(lib.pn_rd_send(self._ptr(), d, buf, size), "pn_rd_send")

    def _src(self, src: Any, what: str) -> int:
        return _int("src", src, ANY, (1 << 31) - 1, what)   # a node or ANY

    def recv(self, src: int = ANY, timeout_ns: Optional[int] = None,
             cap: Optional[int] = None) -> Optional[tuple[int, bytes]]:
        """The next message from ``src`` (a node or :data:`ANY`) as ``(src, data)``;
        None when none came within ``timeout_ns`` (wall time; None or negative:
        wait forever; 0: poll). ``cap`` None takes messages of any size (the buffer
        grows to the size ``pn_rd_recv`` reports with ``-EMSGSIZE``); an int is a limit:
        a longer message raises ``PnError(EMSGSIZE)`` and stays queued (its sender and
        size: :meth:`peek`)."""
        what = "pn_rd_recv"
        s = self._src(src, what)
        timeout = _timeout(timeout_ns, what)
        limit = None if cap is None else _int("cap", cap, 0, _I64, what)
        rd = self._ptr()
        src_out = ffi.new("unsigned *")
        len_out = ffi.new("size_t *")
        for step in _slices(timeout):
            while True:
                room = len(self._buf) if limit is None else min(limit, len(self._buf))
                r = lib.pn_rd_recv_timeout(rd, s, self._buf, room, src_out, len_out, step)
                need = int(len_out[0])        # on -EMSGSIZE: the size of the message that stays queued
                if r == -errno.EMSGSIZE and (limit is None or need <= limit):
                    self._buf = ffi.new("char[]", need if limit is not None else max(need, 2 * len(self._buf)))
                    step = 0                  # it is complete and queued: take it now
                    continue
                break
            if r == -errno.ETIMEDOUT:
                continue
            if r == -errno.EMSGSIZE:
                raise PnError(errno.EMSGSIZE, what, f"message of {int(len_out[0])} bytes from node "
                              f"{int(src_out[0])} is longer than cap = {limit} (it stays queued)")
            _check(r, what)
            data = ffi.buffer(self._buf, r)[:]
            if len(self._buf) > self._KEEP_BUF:
                self._buf = ffi.new("char[]", 64 * 1024)
            return int(src_out[0]), data
        return None

    def peek(self, src: int = ANY) -> Optional[tuple[int, int]]:
        """``pn_rd_peek``: ``(src, length)`` of the next complete message from ``src``,
        None if there is none yet. Never blocks."""
        s = self._src(src, "pn_rd_peek")
        src_out = ffi.new("unsigned *")
        len_out = ffi.new("size_t *")
        if _check(lib.pn_rd_peek(self._ptr(), s, src_out, len_out), "pn_rd_peek"):
            return int(src_out[0]), int(len_out[0])
        return None

    def progress(self) -> int:
        """``pn_rd_progress``: move packets from the RX ring into the queue."""
        return _check(lib.pn_rd_progress(self._ptr()), "pn_rd_progress")

    def stats(self) -> dict[str, int]:
        """``pn_rd_stats``: the fields of pn_rd_stats_t."""
        st = ffi.new("pn_rd_stats_t *")
        _check(lib.pn_rd_stats(self._ptr(), st), "pn_rd_stats")
        return _struct_dict(st, "pn_rd_stats_t")


def sw_cluster_destroy(name: str, missing_ok: bool = False) -> None:
    """``pn_sw_cluster_destroy``: remove a sw cluster's shared-memory segment
    (``PnError(ENOENT)`` if there is none, unless ``missing_ok``)."""
    if not isinstance(name, str):
        raise TypeError(f"pn_sw_cluster_destroy: name must be a str, not {type(name).__name__}")
    b = name.encode()
    if b"\0" in b:
        raise PnError(errno.EINVAL, "pn_sw_cluster_destroy", "name contains a NUL character")
    r = lib.pn_sw_cluster_destroy(b)
    if r == -errno.ENOENT and missing_ok:
        return
    _check(r, "pn_sw_cluster_destroy")
