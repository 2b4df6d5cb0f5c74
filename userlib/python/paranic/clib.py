"""libparanic loaded through cffi (ABI mode): ``ffi``, ``lib``, its constants, its errors.

``ffi.dlopen()`` of ``build/userlib/libparanic.so`` (built with
:func:`paranic.launch.build_userlib` when it is missing), declared by the cdef of
:mod:`paranic.cdef`. :data:`CONSTANTS` holds every integer ``PN_*`` macro of the
headers, the spec's value where the spec defines it (``PN_TYPE_*``, ``PN_FLAG_*``,
``PN_MAX_DMA_LENGTH`` ...; a test checks they agree). :class:`PnError` carries a
negative return code's errno and ``pn_strerror()`` text; :func:`check` raises it.
"""

from __future__ import annotations

import enum
import errno
import fcntl
from pathlib import Path
from typing import Any, Optional

import cffi

from paranic.cdef import LibraryError, load_cdef
from paranic.launch import LIBRARY, USERLIB_BUILD, BuildError, build_userlib
from paranic.spec import protocol as P

__all__ = ["ffi", "lib", "DEFINES", "CONSTANTS", "LibraryError", "PnError", "strerror", "check"]


class PnError(OSError):
    """A libparanic call failed: ``errno`` is the (positive) errno code, ``strerror``
    says which call and ``pn_strerror()``'s text."""

    def __init__(self, code: int, what: str = "", text: Optional[str] = None) -> None:
        code = abs(int(code))
        if text is None:
            text = strerror(-code)
        super().__init__(code, f"{what}: {text}" if what else text)


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
    """The value the spec (paranic.spec.protocol) defines for the pn_protocol.h macro ``name``."""
    enums: dict[str, type[enum.IntEnum]] = {"PN_TYPE_": P.PacketType, "PN_FLAG_": P.Flags, "PN_PORT_": P.Port,
                                            "PN_REG_": P.CtxReg, "PN_STATUS_": P.StatusBit}
    for prefix, e in enums.items():
        if name.startswith(prefix) and name[len(prefix):] in e.__members__:
            return int(e[name[len(prefix):]])
    v = getattr(P, name[3:], None)
    return v if type(v) is int else None


#: Every integer PN_* constant of the headers: the spec's value where it defines one,
#: else the header's.
CONSTANTS: dict[str, int] = {}
for _name, _value in DEFINES.items():
    _p = _from_protocol(_name)
    CONSTANTS[_name] = _value if _p is None else _p


def strerror(code: int) -> str:
    """``pn_strerror(code)``: text for a (negative) libparanic return code."""
    return ffi.string(lib.pn_strerror(int(code))).decode(errors="replace")


def check(r: int, what: str) -> int:
    if r < 0:
        raise PnError(-r, what)
    return r


class Handle:
    """The Python lifetime of a libparanic handle. A subclass keeps the C pointer in the
    attribute named by ``_HANDLE`` (None once closed) and defines an idempotent
    ``close()``; this gives ``_ptr()`` (the pointer, or ``PnError(EBADF)`` once closed),
    ``closed``, the context manager and closing when the object is collected (unless
    ``_closes_on_collect()`` says the handle belongs to another object)."""

    _HANDLE = "_h"
    _KIND = "handle"   # for the EBADF message: "the <kind> is closed"

    def _ptr(self) -> Any:
        p = getattr(self, self._HANDLE)
        if p is None:
            raise PnError(errno.EBADF, "", f"the {self._KIND} is closed")
        return p

    @property
    def closed(self) -> bool:
        return getattr(self, self._HANDLE, None) is None

    def _closes_on_collect(self) -> bool:
        return True

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            if not self.closed and self._closes_on_collect():
                self.close()
        except Exception:
            pass
