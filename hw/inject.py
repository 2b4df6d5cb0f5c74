"""The injection gate: stamps the routing-table set into host/barrier packets and can
pause their injection, for the firmware's ordered route changes (docs/firmware.md,
"Route changes"; docs/architecture.md, "Injection gate").

NicCore puts one :class:`InjectionGate` (``self.injection``, CSRs ``injection_*``)
between the host's and the barrier unit's packet sources and its injection arbiter.
The management port's packets bypass it: the firmware writes their headers raw and
must be able to send while host traffic is held.
"""

from __future__ import annotations

from functools import reduce
from operator import or_

from migen import If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from paranic.spec import protocol as P

from .common import packet_layout


class InjectionGate(LiteXModule):
    """``n`` packet streams, each ``sinks[i] -> sources[i]``, gated and stamped alike.

    * ``set`` (in): written into ``rt`` of header word 0 of every packet. A packet
      keeps the value it had when its header was first presented downstream.
    * ``hold`` (in): while 1 no new packet starts. A packet whose header has been
      presented downstream (``source.valid``) has started: it passes completely,
      whatever ``hold`` does meanwhile. The gate never withdraws a ``valid`` it has
      raised, so the round-robin arbiter behind it (which keeps a master's request
      once it has seen ``valid``) is never left waiting on a held stream.
    * ``inject_empty``, ``mgmt_idle`` (in, driven by NicCore): the router's local input
      FIFO is empty; the management port's TX side has nothing queued.
    * ``idle`` (out): no packet part-way through the gate, ``inject_empty`` and
      ``mgmt_idle``. Under ``hold``: every packet injected before has been granted an
      output and (being read out of the injection FIFO) left it.

    :meth:`add_csrs`: ``set``, ``hold`` (CSRStorage 1, default 0) and ``idle``
    (CSRStatus 1) drive/show the signals of the same name.
    """

    def __init__(self, n: int = 2) -> None:
        if n < 1:
            raise ValueError("InjectionGate needs at least one stream")
        self.sinks = [stream.Endpoint(packet_layout()) for _ in range(n)]
        self.sources = [stream.Endpoint(packet_layout()) for _ in range(n)]
        self.set = Signal()
        self.hold = Signal()
        self.room = Signal(reset=1)   # a new packet may start (NicCore: injection FIFO room)
        self.inject_empty = Signal(reset=1)
        self.mgmt_idle = Signal(reset=1)
        self.idle = Signal()

        # # #

        rt = P.HEADER_FIELD["rt"].offset
        busy = []
        for i, (sink, source) in enumerate(zip(self.sinks, self.sources)):
            started = Signal(name=f"started{i}")   # header presented, last word not yet taken
            mid = Signal(name=f"mid{i}")           # header word taken, last word not yet
            pset = Signal(name=f"set{i}")          # the set of the packet that has started
            allow = Signal(name=f"allow{i}")
            take = source.valid & source.ready
            self.comb += [
                allow.eq(started | (~self.hold & self.room)),
                sink.connect(source, omit={"valid", "ready", "data"}),
                source.valid.eq(sink.valid & allow),
                sink.ready.eq(source.ready & allow),
                source.data.eq(sink.data),
                If(~mid, source.data[rt].eq(Mux(started, pset, self.set))),
            ]
            self.sync += [
                If(~started, pset.eq(self.set)),
                If(take & source.last,
                    started.eq(0), mid.eq(0),
                ).Else(
                    If(source.valid, started.eq(1)),
                    If(take, mid.eq(1)),
                ),
            ]
            b = Signal(name=f"busy{i}")
            self.comb += b.eq(started | source.valid)
            busy.append(b)
            setattr(self, f"_started{i}", started)
        self.comb += self.idle.eq(~reduce(or_, busy) & self.inject_empty & self.mgmt_idle)

    def watch(self, router, mgmt, pending=None) -> list:
        """Statements driving ``inject_empty``/``mgmt_idle`` from a
        :class:`~paranic.hw.router.Router` and a :class:`~paranic.hw.mgmt.MgmtPort`:
        the router's injection FIFO holds no word (every packet in it has been granted
        an output and read out), the management port's TX FIFO is empty and not closing
        (``tx_empty``: no packet waiting for room). ``pending`` (a wide NicCore: its
        packer's ``source.valid``): a beat on its way into the injection FIFO, which
        counts as not empty."""
        empty = router.inject.empty if pending is None else router.inject.empty & ~pending
        return [
            self.inject_empty.eq(empty),
            self.mgmt_idle.eq(mgmt.tx_empty),
        ]

    def add_csrs(self) -> None:
        self._set = CSRStorage(1, name="set",
                               description="Routing-table set written into rt of host/barrier packets.")
        self._hold = CSRStorage(1, name="hold",
                                description="1: no new host/barrier packet starts (one in progress completes).")
        self._idle = CSRStatus(1, name="idle",
                               description="1: no host/barrier packet part-way through, the router's "
                                           "injection FIFO empty, the management TX side empty.")
        self.comb += [
            self.set.eq(self._set.storage),
            self.hold.eq(self._hold.storage),
            self._idle.status.eq(self.idle),
        ]


class StartGate(LiteXModule):
    """Passes packets from ``sink`` to ``source``; a packet starts only while ``ok`` is 1
    and, once started (header presented), passes whole whatever ``ok`` does (never
    withdraws a ``valid``). NicCore uses it to start a management packet into the
    injection FIFO only when it fits whole (see NicCore, "Injection")."""

    def __init__(self) -> None:
        self.sink = stream.Endpoint(packet_layout())
        self.source = stream.Endpoint(packet_layout())
        self.ok = Signal(reset=1)

        # # #

        started = Signal()
        allow = Signal()
        take = self.source.valid & self.source.ready
        self.comb += [
            allow.eq(started | self.ok),
            self.sink.connect(self.source, omit={"valid", "ready"}),
            self.source.valid.eq(self.sink.valid & allow),
            self.sink.ready.eq(self.source.ready & allow),
        ]
        self.sync += If(take & self.source.last, started.eq(0)).Elif(self.source.valid, started.eq(1))
