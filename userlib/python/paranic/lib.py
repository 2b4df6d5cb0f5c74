"""Python bindings of libparanic (cffi, ABI mode), for the tests and the ``paranic`` CLI.

* :class:`Hal`: one hardware context (``pn_open`` ... ``pn_close``).
* :class:`RawData`: rawdata messages (``pn_rd_*``), over its own context or a
  :class:`Hal`.
* :class:`PnError` (an :class:`OSError`): every negative return code, with its errno
  and ``pn_strerror()`` text; bad Python arguments give ``PnError(EINVAL)`` or
  :class:`TypeError` (:mod:`paranic.argcheck`).

The library is loaded and declared by :mod:`paranic.clib` (cdef from the headers,
:mod:`paranic.cdef`); :data:`CONSTANTS`, ``ffi`` and ``lib`` come from there.

As in C, a handle is used by one thread at a time; calls into the library release
the GIL, so two handles can block in two threads (a barrier, a large send).
Blocking receives wait in slices of ``WAIT_SLICE_NS``, so Ctrl-C interrupts them.
"""

from __future__ import annotations

import dataclasses
import errno
import weakref
from typing import Any, Optional

from paranic.argcheck import (CTX_ANY, I64_MAX, WAIT_SLICE_NS, buffer_arg, fields, int_arg, open_opts, struct_dict,
                              timeout_arg, uint_arg, wait_slices)
from paranic.clib import CONSTANTS, DEFINES, Handle, LibraryError, PnError, check, ffi, lib, strerror
from paranic.spec import protocol as P

__all__ = ["Hal", "RawData", "Header", "PnError", "LibraryError", "CONSTANTS", "DEFINES", "ffi", "lib",
           "strerror", "sw_cluster_destroy", "ANY", "CTX_ANY", "RD_CTX", "RD_MAX_MSG", "RD_CHUNK",
           "DEFAULT_PIO_THRESHOLD", "MAX_DMA_LENGTH", "PacketType", "Flags", "WAIT_SLICE_NS"]

PacketType = P.PacketType
Flags = P.Flags
MAX_DMA_LENGTH: int = P.MAX_DMA_LENGTH
#: pn_rd_recv/peek: from any node.
ANY: int = CONSTANTS["PN_ANY"]
#: rawdata's well-known context.
RD_CTX: int = CONSTANTS["PN_RD_CTX"]
#: Largest rawdata message.
RD_MAX_MSG: int = CONSTANTS["PN_RD_MAX_MSG"]
RD_CHUNK: int = CONSTANTS["PN_RD_CHUNK"]
DEFAULT_PIO_THRESHOLD: int = CONSTANTS["PN_DEFAULT_PIO_THRESHOLD"]


Header = dataclasses.make_dataclass(
    "Header", [(f, int) for f in fields("pn_header_t")], frozen=True,
    namespace={"__doc__": "A received packet's header: the fields of pn_header_t.",
               "som": property(lambda s: bool(s.flags & Flags.SOM), doc="first packet of a message"),
               "eom": property(lambda s: bool(s.flags & Flags.EOM), doc="last packet of a message")})
Header.__module__ = __name__


# ---- the HAL --------------------------------------------------------------------------------

class Hal(Handle):
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
        o, keep = open_opts(backend, node, nodes, cluster, ctx, opts, "pn_open")
        pp = ffi.new("pn_hal_t **")
        check(lib.pn_open(pp, o), "pn_open")
        del keep
        return cls(pp[0])

    # -- lifetime --
    _HANDLE, _KIND = "_h", "HAL handle"

    def _closes_on_collect(self) -> bool:
        return not self._borrowed               # a RawData's context closes with it

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
        check(lib.pn_close(h), "pn_close")

    def __repr__(self) -> str:
        if self._h is None:
            return "<Hal closed>"
        return f"<Hal {self.backend} node {self.node_id}/{self.num_nodes} ctx {self.ctx_id}>"

    # -- information --
    @property
    def node_id(self) -> int:
        return check(lib.pn_node_id(self._ptr()), "pn_node_id")

    @property
    def num_nodes(self) -> int:
        return check(lib.pn_num_nodes(self._ptr()), "pn_num_nodes")

    @property
    def ctx_id(self) -> int:
        return check(lib.pn_ctx_id(self._ptr()), "pn_ctx_id")

    @property
    def num_ctx(self) -> int:
        return check(lib.pn_num_ctx(self._ptr()), "pn_num_ctx")

    @property
    def mtu(self) -> int:
        return check(lib.pn_mtu(self._ptr()), "pn_mtu")

    @property
    def pio_max(self) -> int:
        """Largest PIO payload."""
        return check(lib.pn_pio_max(self._ptr()), "pn_pio_max")

    @property
    def backend(self) -> str:
        return ffi.string(lib.pn_backend_name(self._ptr())).decode()

    # -- send --
    def _dst(self, dst_node: Any, dst_ctx: Any, tag: Any, what: str) -> tuple[int, int, int]:
        return (uint_arg("dst_node", dst_node, what), uint_arg("dst_ctx", dst_ctx, what),
                uint_arg("tag", tag, what, bits=64))

    def send(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send``: PIO up to the threshold, else DMA through the HAL's bounce
        buffer; ``data`` is reusable on return."""
        n, c, t = self._dst(dst_node, dst_ctx, tag, "pn_send")
        buf, size = buffer_arg(data, "pn_send")
        check(lib.pn_send(self._ptr(), n, c, t, buf, size), "pn_send")

    def send_pio(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send_pio``: one packet of at most :attr:`pio_max` bytes."""
        n, c, t = self._dst(dst_node, dst_ctx, tag, "pn_send_pio")
        buf, size = buffer_arg(data, "pn_send_pio")
        check(lib.pn_send_pio(self._ptr(), n, c, t, buf, size), "pn_send_pio")

    def send_dma(self, dst_node: int, dst_ctx: int, tag: int, data: Any) -> None:
        """``pn_send_dma`` of a copy of ``data`` in a DMA buffer this handle owns; returns
        once the send has completed (``pn_tx_wait``), so the buffer can be reused."""
        what = "pn_send_dma"
        n, c, t = self._dst(dst_node, dst_ctx, tag, what)
        buf, size = buffer_arg(data, what)
        h = self._ptr()
        if size == 0 or size > MAX_DMA_LENGTH:   # nothing to copy / the HAL refuses the length
            check(lib.pn_send_dma(h, n, c, t, buf, size), what)
        else:
            if size > self._dma_len:
                want = 64 * 1024
                while want < size:
                    want <<= 1
                if self._dma is not None:
                    check(lib.pn_dma_free(h, self._dma), "pn_dma_free")
                    self._dma, self._dma_len = None, 0
                out = ffi.new("void **")
                check(lib.pn_dma_alloc(h, want, out), "pn_dma_alloc")
                self._dma, self._dma_len = out[0], want
            ffi.memmove(self._dma, buf, size)
            check(lib.pn_send_dma(h, n, c, t, self._dma, size), what)
        check(lib.pn_tx_wait(h), "pn_tx_wait")

    def tx_wait(self) -> None:
        """``pn_tx_wait``: every posted DMA and PIO send has completed."""
        check(lib.pn_tx_wait(self._ptr()), "pn_tx_wait")

    # -- receive --
    def recv(self, timeout_ns: Optional[int] = -1) -> Optional[tuple[Any, bytes]]:
        """The next packet as ``(Header, payload)``, or None when none came within
        ``timeout_ns`` (wall time; negative or None: wait forever; 0: poll)."""
        what = "pn_recv_wait"
        timeout = timeout_arg(timeout_ns, what)
        h = self._ptr()
        hdr = ffi.new("pn_header_t *")
        for step in wait_slices(timeout):
            if check(lib.pn_recv_wait(h, hdr, step), what):
                break
        else:
            return None
        n = int(hdr.length)
        if n > len(self._rxbuf):
            self._rxbuf = ffi.new("char[]", n)
        got = check(lib.pn_recv_body(h, self._rxbuf, len(self._rxbuf)), "pn_recv_body")
        return Header(**struct_dict(hdr, "pn_header_t")), ffi.buffer(self._rxbuf, got)[:]

    # -- barrier, status, time --
    def barrier(self) -> None:
        """``pn_barrier``: enter the cluster barrier and wait until all nodes have."""
        check(lib.pn_barrier(self._ptr()), "pn_barrier")

    def status(self) -> dict[str, int]:
        """``pn_status``: the fields of pn_status_t."""
        st = ffi.new("pn_status_t *")
        check(lib.pn_status(self._ptr(), st), "pn_status")
        return struct_dict(st, "pn_status_t")

    def now_ns(self) -> int:
        """The backend's time (wall clock on sw, simulated time on sim)."""
        return int(lib.pn_now_ns(self._ptr()))

    def cycles(self) -> int:
        """The backend's time in target-clock cycles."""
        return int(lib.pn_cycles(self._ptr()))

    def progress(self) -> int:
        """``pn_progress``: let a software backend do pending NIC work."""
        return check(lib.pn_progress(self._ptr()), "pn_progress")

    def cluster_status(self, index: int) -> Optional[dict[str, Any]]:
        """``pn_cluster_status``: node ``index`` of what the backend sees (sim: every
        simulated node; sw: every node; pci: this board, index 0) as a dict of
        pn_node_status_t's fields, ``links`` a list of ``n_links`` dicts of
        pn_link_status_t; None past the last node."""
        i = uint_arg("index", index, "pn_cluster_status")
        st = ffi.new("pn_node_status_t *")
        r = lib.pn_cluster_status(self._ptr(), i, st)
        if r == -errno.ENOENT:
            return None
        check(r, "pn_cluster_status")
        out: dict[str, Any] = {f: int(getattr(st, f)) for f in fields("pn_node_status_t") if f != "links"}
        out["links"] = [struct_dict(st.links[p], "pn_link_status_t") for p in range(st.n_links)]
        return out

    def cluster(self) -> list[dict[str, Any]]:
        """``cluster_status`` of every node the backend sees."""
        out = []
        while (st := self.cluster_status(len(out))) is not None:
            out.append(st)
        return out

    def sim_info(self) -> dict[str, int]:
        """``pn_sim_info``: the simulator's shape, PCIe model and counters
        (``PnError(ENOTSUP)`` off the sim backend)."""
        info = ffi.new("pn_sim_info_t *")
        check(lib.pn_sim_info(self._ptr(), info), "pn_sim_info")
        return struct_dict(info, "pn_sim_info_t")

    def sim_trace(self, node: int, ctx: int) -> dict[str, int]:
        """``pn_sim_trace``: the trace record of (node, ctx) in cycles
        (``PnError(ENOTSUP)`` off the sim backend)."""
        n, c = uint_arg("node", node, "pn_sim_trace"), uint_arg("ctx", ctx, "pn_sim_trace")
        t = ffi.new("pn_sim_trace_t *")
        check(lib.pn_sim_trace(self._ptr(), n, c, t), "pn_sim_trace")
        return struct_dict(t, "pn_sim_trace_t")


# ---- rawdata --------------------------------------------------------------------------------

class RawData(Handle):
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
        o, keep = open_opts(backend, node, nodes, cluster, ctx, opts, "pn_rd_open")
        pp = ffi.new("pn_rd_t **")
        check(lib.pn_rd_open(pp, o), "pn_rd_open")
        del keep
        return cls(pp[0], None)

    @classmethod
    def attach(cls, hal: Hal) -> "RawData":
        """``pn_rd_attach``: rawdata over an open context (it then owns its receive side)."""
        if not isinstance(hal, Hal):
            raise TypeError(f"pn_rd_attach: hal must be a Hal, not {type(hal).__name__}")
        pp = ffi.new("pn_rd_t **")
        check(lib.pn_rd_attach(pp, hal._ptr()), "pn_rd_attach")
        return cls(pp[0], hal)

    _HANDLE, _KIND = "_rd", "RawData handle"

    @property
    def hal(self) -> Hal:
        """The HAL context underneath (for barrier, status, node_id ...)."""
        self._ptr()
        return self._hal

    def close(self) -> None:
        """``pn_rd_close`` (idempotent); also closes the context if :meth:`open` made it."""
        if self._rd is None:
            return
        rd, self._rd = self._rd, None
        if self._hal._borrowed:
            self._hal._h = None
        else:
            self._hal._rawdata.discard(self)
        check(lib.pn_rd_close(rd), "pn_rd_close")

    def send(self, dst: int, data: Any) -> None:
        """``pn_rd_send``: returns once the whole message is with the NIC."""
        d = uint_arg("dst", dst, "pn_rd_send")
        buf, size = buffer_arg(data, "pn_rd_send")
        check(lib.pn_rd_send(self._ptr(), d, buf, size), "pn_rd_send")

    def _src(self, src: Any, what: str) -> int:
        return int_arg("src", src, ANY, (1 << 31) - 1, what)   # a node or ANY

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
        timeout = timeout_arg(timeout_ns, what)
        limit = None if cap is None else int_arg("cap", cap, 0, I64_MAX, what)
        rd = self._ptr()
        src_out = ffi.new("unsigned *")
        len_out = ffi.new("size_t *")
        for step in wait_slices(timeout):
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
            check(r, what)
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
        if check(lib.pn_rd_peek(self._ptr(), s, src_out, len_out), "pn_rd_peek"):
            return int(src_out[0]), int(len_out[0])
        return None

    def progress(self) -> int:
        """``pn_rd_progress``: move packets from the RX ring into the queue."""
        return check(lib.pn_rd_progress(self._ptr()), "pn_rd_progress")

    def set_timeout(self, ms: int) -> None:
        """``pn_rd_set_timeout``: the deadline in milliseconds (0: never); a send that made
        no progress this long raises ``PnError`` (ENETDOWN or ETIMEDOUT)."""
        check(lib.pn_rd_set_timeout(self._ptr(), uint_arg("ms", ms, "pn_rd_set_timeout")),
              "pn_rd_set_timeout")

    def stats(self) -> dict[str, int]:
        """``pn_rd_stats``: the fields of pn_rd_stats_t."""
        st = ffi.new("pn_rd_stats_t *")
        check(lib.pn_rd_stats(self._ptr(), st), "pn_rd_stats")
        return struct_dict(st, "pn_rd_stats_t")


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
    check(r, "pn_sw_cluster_destroy")
