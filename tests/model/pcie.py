"""The host side of the NIC's PCIe link as one simulator-independent model.

:class:`PcieHost` is what the NIC sees of a PC: an MMIO master on the NIC's 32-bit
Wishbone slave (:class:`MmioMaster`), host memory (:class:`~model.hostmem.HostMemory`),
a DMA read server answering the NIC's read requests with completions, a DMA write
server applying its posted writes, and the MSI lines. Every DMA request is checked
against the PCIe rules the NIC must keep (:func:`request_violations`) and against the
memory's regions; what the host saw is recorded (requests, MSI pulses, errors).

The model is stepped once per clock cycle with the NIC's outputs sampled at the clock
edge (plain ints, looked up by port name) and returns the values to drive on the NIC's
inputs from then until the next edge. The drivers bind the port names to a simulator:
:mod:`model.pcie_cocotb` (cocotb, Verilog tops) and :mod:`model.pcie_migen` (Migen's
simulator, the gateware's endpoints).

Ports, named as the Verilog tops flatten them (a cocotb driver adds a prefix such as
``n0_``): ``bus_{adr,dat_w,dat_r,sel,cyc,stb,we,ack,err}``; read requests
``dma_rd_source_{valid,ready,first,last}`` and ``dma_rd_source_payload_{we,adr,len,dat}``;
completions ``dma_rd_sink_{valid,ready,first,last}`` and
``dma_rd_sink_payload_{dat,len,end,err,adr}``; write requests as the read requests on
``dma_wr_source_``; ``irq`` (one bit per MSI vector); ``rst`` (the NIC's reset).
A port a bench does not have reads as 0.

Read server: a request is taken in a cycle where ``dma_rd_source_ready`` (driven by
the model, see ``rd_ready``) and ``valid`` are high; ``read_latency`` cycles later its
completions start, in request order, one beat per cycle while the NIC is ready, split
at every ``rcb``-byte boundary (each completion framed by ``first``/``last``, ``end``
on the request's last). Memory is read when the completions start.
Write server: a request is taken beat by beat while ``dma_wr_source_ready`` and
``valid``; its data is applied to memory (inside a writable region) at its last beat.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Callable, Mapping, NamedTuple, Protocol, Sequence

from model.hostmem import HostMemory, Region

# Port names ----------------------------------------------------------------------------

RD = "dma_rd_source_"   # read requests, NIC -> host
CPL = "dma_rd_sink_"    # completions, host -> NIC
WR = "dma_wr_source_"   # write requests, NIC -> host

#: Sampled by the MMIO master.
MMIO_INPUTS = ("bus_ack", "bus_dat_r", "bus_err")
#: Driven by the MMIO master.
MMIO_OUTPUTS = ("bus_adr", "bus_dat_w", "bus_sel", "bus_cyc", "bus_stb", "bus_we")
#: Sampled by the DMA servers and the MSI monitor.
DMA_INPUTS = (RD + "valid", RD + "payload_we", RD + "payload_adr", RD + "payload_len",
              CPL + "ready",
              WR + "valid", WR + "first", WR + "last", WR + "payload_we", WR + "payload_adr",
              WR + "payload_len", WR + "payload_dat",
              "irq", "rst")
#: Driven by the DMA servers.
DMA_OUTPUTS = (RD + "ready",
               CPL + "valid", CPL + "first", CPL + "last", CPL + "payload_dat",
               CPL + "payload_len", CPL + "payload_end", CPL + "payload_err", CPL + "payload_adr",
               WR + "ready")


class Sampled(Protocol):
    """The NIC's outputs at a clock edge, by port name (a driver may read them lazily)."""

    def __getitem__(self, name: str) -> int: ...


# The PCIe rules ------------------------------------------------------------------------

#: A request's length field counts 32-bit words; 0 stands for 1024 (PCIe's encoding).
LEN_ZERO_DWORDS = 1024


def request_bytes(len_field: int) -> int:
    return (len_field or LEN_ZERO_DWORDS) * 4


def request_violations(kind: str, adr: int, nbytes: int, limit: int) -> list[str]:
    """What is wrong with a DMA ``kind`` ("read"/"write") request of ``nbytes`` at
    ``adr``: longer than ``limit`` (Max_Read_Request_Size for reads, Max_Payload_Size
    for writes), crossing a 4 KiB boundary (PCIe forbids it), or not in whole 64-bit
    words (the NIC's DMA ports are 64 bits wide)."""
    out = []
    if nbytes > limit:
        out.append(f"{kind} request of {nbytes} bytes > {limit} at {adr:#x}")
    if adr // 4096 != (adr + nbytes - 1) // 4096:
        out.append(f"{kind} request {adr:#x}+{nbytes} crosses a 4 KiB boundary")
    if adr % 8 or nbytes % 8:
        out.append(f"{kind} request {adr:#x}+{nbytes} not 8-byte aligned")
    return out


class CplBeat(NamedTuple):
    dat: int
    first: bool
    last: bool
    end: bool      #: last beat of the request's last completion
    dwords: int    #: length of this beat's completion
    adr: int       #: address of this beat's completion (low 32 bits)


def completion_beats(adr: int, words: Sequence[int], rcb: int) -> list[CplBeat]:
    """The completion beats answering a read at ``adr`` with ``words`` (64-bit): a
    completion ends at every ``rcb``-byte boundary (Read Completion Boundary). No
    words (a fault a bench injects) give one zero beat that ends the request."""
    if not words:
        return [CplBeat(0, True, True, True, 2, adr & 0xFFFFFFFF)]
    beats = []
    i, n = 0, len(words)
    while i < n:
        k = min(n - i, max(1, (rcb - adr % rcb) // 8))
        for j in range(k):
            beats.append(CplBeat(words[i + j], j == 0, j == k - 1, i + k == n, 2 * k,
                                 adr & 0xFFFFFFFF))
        adr += 8 * k
        i += k
    return beats


# Records -------------------------------------------------------------------------------


class DmaRead(NamedTuple):
    cycle: int     #: cycle the request was taken
    adr: int
    nbytes: int


class DmaWrite(NamedTuple):
    cycle: int        #: cycle of the last beat
    adr: int
    nbytes: int       #: from the length field
    data: bytes       #: the data of every beat (nbytes bytes when the request is well framed)
    first_cycle: int  #: cycle of the first beat

    @property
    def words(self) -> list[int]:
        d = self.data
        return [int.from_bytes(d[i:i + 8], "little") for i in range(0, len(d), 8)]


# Driven values -------------------------------------------------------------------------


class Drive(dict):
    """The values a model drives (name -> int); :meth:`set` notes what changed since
    the last :meth:`take`, so a driver writes only those."""

    def __init__(self, initial: Mapping[str, int]) -> None:
        super().__init__(initial)
        self.changed: dict[str, int] = {}

    def set(self, name: str, v: int) -> None:
        if self.get(name) != v:
            self[name] = v
            self.changed[name] = v

    def take(self) -> dict[str, int]:
        c, self.changed = self.changed, {}
        return c


# MMIO ----------------------------------------------------------------------------------


@dataclass(eq=False)
class MmioOp:
    addr: int
    data: int
    write: bool
    sel: int = 0xF
    done: bool = False
    result: int = 0            #: the read data
    error: bool = False        #: acknowledged with ``err``
    on_done: Callable[[], None] | None = field(default=None, repr=False)


class MmioMaster:
    """A Wishbone master for 32-bit MMIO. Accesses run one at a time in submission
    order; the next is presented in the cycle the previous one is acknowledged. A read
    drives no ``dat_w``/``sel`` (they mean nothing to a read)."""

    def __init__(self, error: Callable[[str], None]) -> None:
        self.drive = Drive({"bus_cyc": 0, "bus_stb": 0, "bus_we": 0})
        self.queue: collections.deque[MmioOp] = collections.deque()
        self.cur: MmioOp | None = None
        self._error = error

    def submit(self, addr: int, data: int = 0, write: bool = False, sel: int = 0xF) -> MmioOp:
        if addr & 3:
            raise ValueError(f"MMIO address {addr:#x} is not 32-bit aligned")
        op = MmioOp(addr, data & 0xFFFFFFFF, write, sel)
        self.queue.append(op)
        return op

    @property
    def idle(self) -> bool:
        return self.cur is None and not self.queue

    def step(self, inp: Sampled) -> None:
        d = self.drive
        cur = self.cur
        if cur is not None and inp["bus_ack"]:
            if not cur.write:
                cur.result = inp["bus_dat_r"]
            if inp["bus_err"]:
                cur.error = True
                self._error(f"MMIO {'write' if cur.write else 'read'} {cur.addr:#x}: bus error")
            cur.done = True
            if cur.on_done is not None:
                cur.on_done()
            self.cur = cur = None
        if cur is None:
            if self.queue:
                op = self.cur = self.queue.popleft()
                d.set("bus_adr", op.addr >> 2)
                if op.write:
                    d.set("bus_dat_w", op.data)
                    d.set("bus_sel", op.sel)
                d.set("bus_we", int(op.write))
                d.set("bus_cyc", 1)
                d.set("bus_stb", 1)
            else:
                d.set("bus_cyc", 0)
                d.set("bus_stb", 0)


# The host ------------------------------------------------------------------------------


@dataclass
class _ReadJob:
    due: int       #: first cycle its completions may start
    adr: int
    nbytes: int
    index: int     #: position among all read requests (for ``completion_fault``)


@dataclass
class _WriteBurst:
    first_cycle: int
    adr: int
    nbytes: int
    data: bytearray


class PcieHost:
    """One node's PCIe side: MMIO master, host memory, DMA servers, MSI monitor, checks.

    ``mem``: the host memory (share one between nodes only if they really share a
    host). ``read_latency``: cycles from a read request to its first completion (60 is
    about 0.5 us at 125 MHz). ``rcb``: the completion split boundary (64 or 128 bytes).
    ``max_request_bytes``/``max_payload_bytes``: the limits checked on read/write
    requests. ``rd_ready``/``wr_ready``: callable(cycle) -> bool, back-pressure on the
    request ports: the value returned at cycle ``c`` is driven during cycle ``c + 1``
    (ready until the first step). ``completion_fault``: callable(index, adr, nbytes)
    -> list of 64-bit words or None, replaces the data answering read request number
    ``index`` (short, long or empty completions).

    Results: ``errors`` (protocol violations and stray DMA, each "cycle N: ..."; benches
    assert it stays empty), ``read_requests`` (:class:`DmaRead`), ``write_requests``
    (:class:`DmaWrite`), ``irq_log`` ((cycle, vector) per MSI pulse), ``cycle``.
    """

    def __init__(self, mem: HostMemory | None = None, read_latency: int = 60, rcb: int = 64,
                 max_request_bytes: int = 512, max_payload_bytes: int = 256,
                 rd_ready: Callable[[int], bool] | None = None,
                 wr_ready: Callable[[int], bool] | None = None,
                 completion_fault: Callable[[int, int, int], list[int] | None] | None = None
                 ) -> None:
        self.mem = mem if mem is not None else HostMemory()
        self.read_latency = read_latency
        self.rcb = rcb
        self.max_request_bytes = max_request_bytes
        self.max_payload_bytes = max_payload_bytes
        self.rd_ready_fn = rd_ready
        self.wr_ready_fn = wr_ready
        self.completion_fault = completion_fault
        self.errors: list[str] = []
        self.cycle = 0
        self.irq_log: list[tuple[int, int]] = []
        self.read_requests: list[DmaRead] = []
        self.write_requests: list[DmaWrite] = []
        self.mmio = MmioMaster(self.error)
        self.drive = Drive({RD + "ready": 1, WR + "ready": 1, CPL + "valid": 0,
                            CPL + "payload_err": 0})
        self._rd_q: collections.deque[_ReadJob] = collections.deque()
        self._beats: collections.deque[CplBeat] = collections.deque()
        self._wr: _WriteBurst | None = None

    def error(self, msg: str) -> None:
        self.errors.append(f"cycle {self.cycle}: {msg}")

    def irqs(self, ctx: int | None = None) -> list[int]:
        """The vectors of the MSI pulses seen (those of ``ctx`` only if given)."""
        return [c for (_, c) in self.irq_log if ctx is None or c == ctx]

    # -- the cycle -------------------------------------------------------------------------
    def step(self, inp: Sampled, mmio: bool = True) -> dict[str, int]:
        """One clock edge: ``inp`` the NIC's outputs sampled at it; returns the driven
        values that change. ``mmio=False`` leaves the MMIO master to be stepped by its
        caller (the Migen driver). While ``rst`` is high the host forgets the requests
        in flight and ignores the NIC's outputs."""
        self.cycle += 1
        if inp["rst"]:
            self._rd_q.clear()
            self._beats.clear()
            self._wr = None
            self.drive.set(CPL + "valid", 0)
            return self.drive.take()
        if mmio:
            self.mmio.step(inp)
        self._read_requests(inp)
        self._completions(inp)
        self._write_beats(inp)
        v = inp["irq"]
        if v:
            for c in range(v.bit_length()):
                if v >> c & 1:
                    self.irq_log.append((self.cycle, c))
        out = self.drive.take()
        if mmio:
            out.update(self.mmio.drive.take())
        return out

    def _check(self, kind: str, adr: int, nbytes: int, limit: int, write: bool) -> Region | None:
        """The PCIe rules and the memory's permissions; counts the bytes per region."""
        for e in request_violations(kind, adr, nbytes, limit):
            self.error(e)
        r = self.mem.region_for(adr, nbytes, write)
        if r is None:
            self.error(f"stray DMA {kind} {adr:#x}+{nbytes}")
        elif write:
            r.writes += nbytes
        else:
            r.reads += nbytes
        return r

    # -- DMA reads -------------------------------------------------------------------------
    def _read_requests(self, inp: Sampled) -> None:
        if self.drive[RD + "ready"] and inp[RD + "valid"]:
            adr = inp[RD + "payload_adr"]
            nbytes = request_bytes(inp[RD + "payload_len"])
            if inp[RD + "payload_we"]:
                self.error(f"write request on the read port at {adr:#x}")
            self._check("read", adr, nbytes, self.max_request_bytes, write=False)
            self._rd_q.append(_ReadJob(self.cycle + self.read_latency, adr, nbytes,
                                       len(self.read_requests)))
            self.read_requests.append(DmaRead(self.cycle, adr, nbytes))
        if self.rd_ready_fn is not None:
            self.drive.set(RD + "ready", int(bool(self.rd_ready_fn(self.cycle))))

    def _completions(self, inp: Sampled) -> None:
        d, beats = self.drive, self._beats
        if d[CPL + "valid"] and inp[CPL + "ready"]:
            beats.popleft()
        if not beats and self._rd_q and self._rd_q[0].due <= self.cycle:
            beats.extend(self._answer(self._rd_q.popleft()))
        if beats:
            b = beats[0]
            d.set(CPL + "payload_dat", b.dat)
            d.set(CPL + "first", int(b.first))
            d.set(CPL + "last", int(b.last))
            d.set(CPL + "payload_end", int(b.end))
            d.set(CPL + "payload_len", b.dwords)
            d.set(CPL + "payload_adr", b.adr)
            d.set(CPL + "valid", 1)
        else:
            d.set(CPL + "valid", 0)

    def _answer(self, job: _ReadJob) -> list[CplBeat]:
        words = None
        if self.completion_fault is not None:
            words = self.completion_fault(job.index, job.adr, job.nbytes)
        if words is None:
            data = self.mem.read(job.adr, job.nbytes)
            words = [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data) - 7, 8)]
        return completion_beats(job.adr, words, self.rcb)

    # -- DMA writes ------------------------------------------------------------------------
    def _write_beats(self, inp: Sampled) -> None:
        if self.drive[WR + "ready"] and inp[WR + "valid"]:
            self._write_beat(inp)
        if self.wr_ready_fn is not None:
            self.drive.set(WR + "ready", int(bool(self.wr_ready_fn(self.cycle))))

    def _write_beat(self, inp: Sampled) -> None:
        if inp[WR + "first"]:
            if self._wr is not None:
                self.error("write request started before the previous one ended")
            if not inp[WR + "payload_we"]:
                self.error("read request on the write port")
            self._wr = _WriteBurst(self.cycle, inp[WR + "payload_adr"],
                                   request_bytes(inp[WR + "payload_len"]), bytearray())
        w = self._wr
        if w is None:
            self.error("write beat without first")
            return
        w.data += inp[WR + "payload_dat"].to_bytes(8, "little")
        if inp[WR + "last"]:
            self._wr = None
            if len(w.data) != w.nbytes:
                self.error(f"write {w.adr:#x}: len {w.nbytes} bytes but {len(w.data)} sent")
            r = self._check("write", w.adr, w.nbytes, self.max_payload_bytes, write=True)
            self.write_requests.append(DmaWrite(self.cycle, w.adr, w.nbytes, bytes(w.data),
                                                w.first_cycle))
            if r is not None:
                self.mem.write(w.adr, w.data[:w.nbytes])
