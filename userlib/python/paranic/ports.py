"""Python bindings of libparanic's ports layer (``pn_ports.h``), over :mod:`paranic.lib`.

* :class:`Ports`: one port (``pn_port_t``): tagged messages on 16-bit channels to and
  from other ports, addressed by (node, context).
* :class:`Request`: a non-blocking send or receive (``pn_port_isend`` / ``irecv``).
* :class:`Status`: what a receive or probe found.

Errors are :class:`paranic.lib.PnError` (an ``OSError`` carrying the errno); bad Python
arguments raise ``TypeError`` or ``PnError(EINVAL)`` before reaching the library, as in
:mod:`paranic.lib`. A port is used by one thread at a time.

```python
from paranic.ports import Ports, ANY
with Ports.open(cluster="demo", node=0, nodes=2) as p:
    p.send(1, 1, b"hello", channel=3, tag=7)
    st, data = p.recv(src_node=1, channel=3)
```
"""

from __future__ import annotations

import dataclasses
import errno
from typing import Any, Optional

from paranic.argcheck import buffer_arg, int_arg, open_opts, struct_dict, timeout_arg, wait_slices
from paranic.clib import CONSTANTS, Handle, PnError, check, ffi, lib
from paranic.lib import Hal

#: Any source node, context or channel.
ANY: int = CONSTANTS["PN_PORT_ANY"]
MAX_MSG: int = CONSTANTS["PN_PORT_MAX_MSG"]
MAX_CHANNEL: int = CONSTANTS["PN_PORT_MAX_CHANNEL"]
DEFAULT_EAGER_MAX: int = CONSTANTS["PN_PORT_DEFAULT_EAGER_MAX"]
EAGER_LIMIT: int = CONSTANTS["PN_PORT_EAGER_LIMIT"]
MSG_COST: int = CONSTANTS["PN_PORT_MSG_COST"]
_U64 = (1 << 64) - 1


def _coll_enum(enum: Any, v: Any, name: str, what: str) -> int:
    """A CollType/CollRed value from the enum, its name or its number."""
    if v is None:
        raise TypeError(f"{what}: {name} is required for bytes data")
    if isinstance(v, str):
        try:
            return int(enum[v.upper()])
        except KeyError:
            raise PnError(errno.EINVAL, what, f"{name} {v!r} is not one of {[m.name for m in enum]}") from None
    return int_arg(name, v, -_I32 - 1, _I32, what)   # out-of-range numbers: the library's -EINVAL
_I32 = (1 << 31) - 1


@dataclasses.dataclass(frozen=True)
class Status:
    """``pn_port_status_t``: the sender port (as its NIC stamped it), channel, tag,
    the message's length, the error the operation ended with (0 or -errno), and the
    immediate data (``data``, valid when ``flags`` has ``PN_PORT_DATA``)."""

    src_node: int
    src_ctx: int
    channel: int
    tag: int
    len: int
    error: int
    data: int = 0
    flags: int = 0

    @classmethod
    def _of(cls, st: Any) -> "Status":
        return cls(**struct_dict(st, "pn_port_status_t"))


class Request:
    """A pending ``pn_port_isend`` / ``pn_port_irecv``. :meth:`test` or :meth:`wait`
    completes it: afterwards :attr:`status` (and for a receive :attr:`data`) hold the
    result, :attr:`error` the negative errno it ended with (0: success)."""

    def __init__(self, port: "Ports", ptr: Any, keep: Any, rbuf: Any = None) -> None:
        self._port = port
        self._pp = ffi.new("pn_port_req_t **", ptr)
        self._keep = keep          # the send buffer must live until completion
        self._rbuf = rbuf
        self.status: Optional[Status] = None
        self.data: Optional[bytes] = None
        self.error = 0

    @property
    def done(self) -> bool:
        return self._pp[0] == ffi.NULL

    def _finish(self, r: int, st: Any) -> None:
        self.status = Status._of(st)
        self.error = r if r < 0 else 0
        if self._rbuf is not None and r == 1:
            self.data = ffi.buffer(self._rbuf, self.status.len)[:]
        self._keep = self._rbuf = None

    def test(self) -> bool:
        """``pn_port_test``: True once complete (successfully or not: see :attr:`error`)."""
        if self.done:
            return True
        st = ffi.new("pn_port_status_t *")
        r = lib.pn_port_test(self._port._ptr(), self._pp, st)
        if r == 0:
            return False
        if self._pp[0] != ffi.NULL:   # an argument error, the request is untouched
            check(r, "pn_port_test")
        self._finish(r, st)
        return True

    def wait(self, timeout_ns: Optional[int] = None) -> bool:
        """``pn_port_wait`` (in slices, so Ctrl-C gets through): True once complete,
        False when ``timeout_ns`` passed first."""
        if self.done:
            return True
        t = timeout_arg(timeout_ns, "pn_port_wait")
        st = ffi.new("pn_port_status_t *")
        for step in wait_slices(t):
            r = lib.pn_port_wait(self._port._ptr(), self._pp, st, step)
            if r == -errno.ETIMEDOUT and self._pp[0] != ffi.NULL:
                continue
            if self._pp[0] != ffi.NULL:
                check(r, "pn_port_wait")
            self._finish(r, st)
            return True
        return False

    def cancel(self) -> bool:
        """``pn_port_cancel``: True if withdrawn (it had not started), False if it has
        completed meanwhile (test it); ``PnError(EBUSY)`` when it has started."""
        if self.done:
            return False
        r = lib.pn_port_cancel(self._port._ptr(), self._pp)
        if r == -errno.EALREADY:
            return False
        check(r, "pn_port_cancel")
        self._keep = self._rbuf = None
        self.error = -errno.ECANCELED
        return True


class Ports(Handle):
    """One port (``pn_port_t``) on its own HAL context. A context manager;
    :meth:`close` is idempotent; calls on a closed port raise ``PnError(EBADF)``."""

    def __init__(self, ptr: Any) -> None:
        self._p = ptr
        self._hal = Hal(lib.pn_port_hal(ptr), borrowed=True)
        self._buf = ffi.new("char[]", 64 * 1024)

    @classmethod
    def open(cls, backend: Optional[str] = None, node: Optional[int] = None, nodes: Optional[int] = None,
             cluster: Optional[str] = None, ctx: Optional[int] = None, eager_max: Optional[int] = None,
             eager_window: Optional[int] = None, timeout_ms: Optional[int] = None,
             **hal_opts: Optional[int]) -> "Ports":
        """``pn_port_open``. The HAL arguments as :meth:`paranic.lib.Hal.open` (None:
        the environment; ``ctx`` None is any free context); ``eager_max``,
        ``eager_window``, ``timeout_ms`` None: ``$PARANIC_EAGER_MAX`` ... or the
        defaults. With no argument at all it is ``pn_port_open(NULL)``."""
        what = "pn_port_open"
        ho, keep = open_opts(backend, node, nodes, cluster, ctx, hal_opts, what)
        pp = ffi.new("pn_port_t **")
        if ho == ffi.NULL and eager_max is None and eager_window is None and timeout_ms is None:
            check(lib.pn_port_open(pp, ffi.NULL), what)
        else:
            o = ffi.new("pn_port_opts_t *")
            lib.pn_port_opts_init(o)
            if ho != ffi.NULL:
                o.hal = ho[0]
            if eager_max is not None:
                o.eager_max = int_arg("eager_max", eager_max, 0, EAGER_LIMIT, what)
            if eager_window is not None:
                o.eager_window = int_arg("eager_window", eager_window, 0, (1 << 32) - 1, what)
            if timeout_ms is not None:
                o.timeout_ms = int_arg("timeout_ms", timeout_ms, 1, 3600_000, what)
            check(lib.pn_port_open(pp, o), what)
        del keep
        return cls(pp[0])

    # -- lifetime --
    _HANDLE, _KIND = "_p", "port"

    def close(self) -> None:
        """``pn_port_close``: tells connected peers, releases the context. Requests
        still pending are abandoned."""
        if self._p is None:
            return
        p, self._p = self._p, None
        self._hal._h = None
        check(lib.pn_port_close(p), "pn_port_close")

    def __repr__(self) -> str:
        if self._p is None:
            return "<Ports closed>"
        return f"<Ports {self.hal.backend} port {self.node}:{self.ctx}>"

    # -- information --
    @property
    def hal(self) -> Hal:
        """The context underneath (barrier, status, pn_dma_alloc ...); closed with the port."""
        self._ptr()
        return self._hal

    @property
    def node(self) -> int:
        return check(lib.pn_port_node(self._ptr()), "pn_port_node")

    @property
    def ctx(self) -> int:
        return check(lib.pn_port_ctx(self._ptr()), "pn_port_ctx")

    @property
    def eager_max(self) -> int:
        return check(lib.pn_port_eager_max(self._ptr()), "pn_port_eager_max")

    @eager_max.setter
    def eager_max(self, v: int) -> None:
        check(lib.pn_port_set_eager_max(self._ptr(), int_arg("eager_max", v, 0, EAGER_LIMIT, "pn_port_set_eager_max")),
               "pn_port_set_eager_max")

    def stats(self) -> dict[str, int]:
        """``pn_port_stats``: the fields of pn_port_stats_t."""
        st = ffi.new("pn_port_stats_t *")
        check(lib.pn_port_stats(self._ptr(), st), "pn_port_stats")
        return struct_dict(st, "pn_port_stats_t")

    # -- arguments --
    @staticmethod
    def _dst(node: Any, ctx: Any, channel: Any, tag: Any, what: str) -> tuple[int, int, int, int]:
        return (int_arg("node", node, 0, (1 << 32) - 1, what), int_arg("ctx", ctx, 0, (1 << 32) - 1, what),
                int_arg("channel", channel, -_I32 - 1, _I32, what), int_arg("tag", tag, 0, _U64, what))

    @staticmethod
    def _match(src_node: Any, src_ctx: Any, channel: Any, tag: Any, mask: Any, what: str) -> tuple[int, ...]:
        return (int_arg("src_node", src_node, -_I32 - 1, _I32, what), int_arg("src_ctx", src_ctx, -_I32 - 1, _I32, what),
                int_arg("channel", channel, -_I32 - 1, _I32, what), int_arg("tag", tag, 0, _U64, what),
                int_arg("mask", mask, 0, _U64, what))

    # -- send --
    def send(self, node: int, ctx: int, data: Any, channel: int = 0, tag: int = 0) -> None:
        """``pn_port_send``: returns when ``data`` may be reused (eager: at once;
        rendezvous: once the receiver has taken it)."""
        what = "pn_port_send"
        n, c, ch, t = self._dst(node, ctx, channel, tag, what)
        buf, size = buffer_arg(data, what)
        check(lib.pn_port_send(self._ptr(), n, c, ch, t, buf, size), what)

    def isend(self, node: int, ctx: int, data: Any, channel: int = 0, tag: int = 0) -> Request:
        """``pn_port_isend``; the request keeps ``data`` alive until it completes."""
        what = "pn_port_isend"
        n, c, ch, t = self._dst(node, ctx, channel, tag, what)
        buf, size = buffer_arg(data, what)
        pp = ffi.new("pn_port_req_t **")
        check(lib.pn_port_isend(self._ptr(), n, c, ch, t, buf, size, pp), what)
        return Request(self, pp[0], (buf, data))

    # -- receive --
    def irecv(self, src_node: int = ANY, src_ctx: int = ANY, channel: int = ANY, tag: int = 0, mask: int = 0,
              cap: int = 64 * 1024) -> Request:
        """``pn_port_irecv`` into a buffer of ``cap`` bytes the request owns; the data
        is in :attr:`Request.data` once it completes."""
        what = "pn_port_irecv"
        args = self._match(src_node, src_ctx, channel, tag, mask, what)
        cap = int_arg("cap", cap, 0, MAX_MSG, what)
        rbuf = ffi.new("char[]", max(cap, 1))
        pp = ffi.new("pn_port_req_t **")
        check(lib.pn_port_irecv(self._ptr(), *args, rbuf, cap, pp), what)
        return Request(self, pp[0], None, rbuf)

    def recv(self, src_node: int = ANY, src_ctx: int = ANY, channel: int = ANY, tag: int = 0, mask: int = 0,
             timeout_ns: Optional[int] = None, cap: Optional[int] = None) -> Optional[tuple[Status, bytes]]:
        """``pn_port_recv``: ``(Status, data)`` of the first matching message, None
        when none matched within ``timeout_ns`` (None or negative: forever; 0: poll).
        ``cap`` None takes any size (the buffer grows to the size ``-EMSGSIZE``
        reports); an int limits it (a longer message raises ``PnError(EMSGSIZE)`` and
        stays queued)."""
        what = "pn_port_recv"
        args = self._match(src_node, src_ctx, channel, tag, mask, what)
        timeout = timeout_arg(timeout_ns, what)
        limit = None if cap is None else int_arg("cap", cap, 0, MAX_MSG, what)
        st = ffi.new("pn_port_status_t *")
        for step in wait_slices(timeout):
            while True:
                room = len(self._buf) if limit is None else min(limit, len(self._buf))
                if limit is not None and limit > len(self._buf):
                    self._buf = ffi.new("char[]", limit)
                    room = limit
                r = lib.pn_port_recv(self._ptr(), *args, self._buf, room, st, step)
                if r == -errno.EMSGSIZE and limit is None:
                    self._buf = ffi.new("char[]", max(int(st.len), 2 * len(self._buf)))
                    step = 0
                    continue
                break
            if r == -errno.ETIMEDOUT:
                continue
            if r == -errno.EMSGSIZE:
                raise PnError(errno.EMSGSIZE, what, f"message of {int(st.len)} bytes from {int(st.src_node)}:"
                              f"{int(st.src_ctx)} is longer than cap = {limit} (it stays queued)")
            check(r, what)
            data = ffi.buffer(self._buf, r)[:]
            if len(self._buf) > (16 << 20):
                self._buf = ffi.new("char[]", 64 * 1024)
            return Status._of(st), data
        return None

    def probe(self, src_node: int = ANY, src_ctx: int = ANY, channel: int = ANY, tag: int = 0,
              mask: int = 0) -> Optional[Status]:
        """``pn_port_probe``: the Status of the first matching message that has arrived
        and is not taken yet, None if there is none. Never blocks."""
        what = "pn_port_probe"
        st = ffi.new("pn_port_status_t *")
        if check(lib.pn_port_probe(self._ptr(), *self._match(src_node, src_ctx, channel, tag, mask, what), st),
                  what):
            return Status._of(st)
        return None

    def progress(self) -> int:
        """``pn_port_progress``."""
        return check(lib.pn_port_progress(self._ptr()), "pn_port_progress")

    def barrier(self) -> None:
        """``pn_port_barrier``: the cluster barrier, answering ports traffic meanwhile."""
        check(lib.pn_port_barrier(self._ptr()), "pn_port_barrier")

    # -- collectives (pn_coll.h) --
    @property
    def coll_path(self) -> str:
        """``pn_coll_path``: "unit" (the NIC's collective unit), "sw" (software over ports),
        "undecided" (no call yet) or "failed"."""
        return ffi.string(lib.pn_coll_path(self._ptr())).decode()

    def allreduce(self, data: Any, red: Any = "SUM", dtype: Any = None) -> Any:
        """``pn_allreduce``: every node's ``data`` combined with ``red`` (a CollRed or its
        name); ``data`` a numpy array (its dtype gives the element type) or bytes with
        ``dtype`` (a CollType or its name). Returns the same kind as ``data``."""
        return self._coll("pn_allreduce", None, data, red, dtype)

    def reduce(self, root: int, data: Any, red: Any = "SUM", dtype: Any = None) -> Any:
        """``pn_reduce``: the combination at ``root`` (others get None)."""
        return self._coll("pn_reduce", root, data, red, dtype)

    def bcast(self, root: int, data: Any) -> Any:
        """``pn_bcast``: root's ``data`` (the others pass a buffer of the same size; any
        element type, the size a multiple of 4 bytes)."""
        return self._coll("pn_bcast", root, data, None, None)

    def _coll(self, what: str, root: Optional[int], data: Any, red: Any, dtype: Any) -> Any:
        from paranic.spec import kernels as K
        np_in = type(data).__module__ == "numpy"
        if np_in:
            import numpy as np
            arr = np.ascontiguousarray(data)
            if dtype is None and what != "pn_bcast":   # bcast moves bytes: any element type
                from paranic.hls import NP_TYPES
                dtype = {v: k for k, v in NP_TYPES.items()}.get(arr.dtype.newbyteorder("<").str)
                if dtype is None:
                    raise PnError(errno.EINVAL, what, f"element type {arr.dtype} is not int32/int64/float32/float64")
            src = arr.tobytes()
        else:
            src = bytes(memoryview(data).cast("B"))
        t = _coll_enum(K.CollType, "I32" if what == "pn_bcast" else dtype, "dtype", what)
        r = _coll_enum(K.CollRed, red if red is not None else "SUM", "red", what)
        inb = ffi.from_buffer("char[]", src) if src else ffi.NULL
        out = ffi.new("char[]", max(len(src), 1))
        if what == "pn_allreduce":
            rc = lib.pn_allreduce(self._ptr(), inb, out, len(src), t, r)
        elif what == "pn_reduce":
            rc = lib.pn_reduce(self._ptr(), int_arg("root", root, 0, _I32, what), inb, out, len(src), t, r)
        else:
            ffi.memmove(out, src, len(src))
            rc = lib.pn_bcast(self._ptr(), int_arg("root", root, 0, _I32, what), out, len(src))
        check(rc, what)
        if what == "pn_reduce" and root != self.node:
            return None
        res = ffi.unpack(out, len(src))
        if np_in:
            return np.frombuffer(res, dtype=arr.dtype).reshape(arr.shape).copy()
        return res
