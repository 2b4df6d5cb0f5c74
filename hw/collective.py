"""The collective unit: the HLS kernel ``collective`` between this node's host and the network.

The kernel (``hls/collective``, docs/hls.md) speaks four streams of 64-bit words
(:data:`paranic.spec.kernels.COLL_STREAMS`). Behind one interface, :class:`CollectiveCore`,
there are three implementations, chosen by NicCore's build option ``collective``:

* ``"vitis"`` -- :class:`CollectiveVitis`, an ``Instance`` of the kernel's exported RTL
  (a board built with Vitis; here it is only elaborated);
* ``"sim"`` -- :class:`CollectiveExternal`, nothing inside: the streams become ports of the
  simulated cluster, where the harness runs the kernel's very C++ (sim/harness/coll.cpp);
* ``"migen"`` -- the Migen implementation that passes the same vectors
  (:mod:`paranic.hw.collective_core`), when it is there.

:class:`CollectiveUnit` puts a core into NicCore. It takes the host's packets of type
``COLLECTIVE`` (a PIO or DMA send from a context; the network header's destination is
ignored), strips the network header and hands the command to the kernel; it frames the
kernel's results as packets to the owning context's RX ring; it frames the kernel's
network packets for the router and feeds it the ones the router ejects. The driver (or
the simulator) enables the unit at bring-up (CSR ``enable``; while it is 0 the kernel is
held in reset and ejected packets are dropped). The first context that sends a command
to an enabled unit owns it (``ctx``, ``owned``) until the driver disables the unit (as it
does when that context closes), which also resets the kernel. Only the owner's commands
reach the kernel; any other command, and every command while the unit is disabled or has
no core, is answered at once with a result whose ``refused`` bit is set, so the library can tell
"not configured" from a failed operation. A command whose packet length disagrees with
its ``nbytes`` reaches the kernel padded with zeros or cut to ``nbytes``, with
``BAD_ARGS`` set, so that the node still takes part and nobody waits for it.

The kernel's two outputs go through FIFOs sized for two all-to-all operations' sends on 32
nodes (2 x 31 packets of up to 35 words; a tree operation's one UP and up to four DOWN
packets fit many times) and a result, so it keeps draining the router's ejection
while injection or the host's RX path is busy (docs/hls.md, "In NicCore").
"""

from __future__ import annotations

from migen import ClockSignal, FSM, If, Instance, Module, NextState, NextValue, ResetInserter, ResetSignal, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRStatus, CSRStorage

from paranic.spec import kernels as K
from paranic.spec import protocol as P

from .common import hdr, packet_layout

#: FIFO depths (words) behind the kernel's outputs: net_out holds two all-to-all
#: operations' sends (K.COLL_NET_OUT_WORDS), host_out one result (33 words).
NET_OUT_WORDS = K.COLL_NET_OUT_WORDS
HOST_OUT_WORDS = 64


def coll_stream() -> stream.Endpoint:
    """One of the kernel's streams: a 64-bit word per beat, no framing."""
    return stream.Endpoint([("data", P.WORD_BITS)])


def cfield(word, name: str):
    """Slice of a collective header word holding field ``name``."""
    f = K.COLL_FIELD[name]
    return word[f.offset:f.offset + f.width]


class CollectiveCore(Module):
    """The kernel's interface (:data:`~paranic.spec.kernels.COLL_PORTS`): sinks ``host_in`` and
    ``net_in``, sources ``host_out`` and ``net_out``, inputs ``node`` and ``radix_log2``, and
    ``rst``: while high, the kernel's state is reset (the unit holds it so while disabled, so a
    new owner never inherits half an operation)."""

    def __init__(self) -> None:
        self.host_in = coll_stream()
        self.host_out = coll_stream()
        self.net_in = coll_stream()
        self.net_out = coll_stream()
        self.node = Signal(P.NODE_BITS)
        self.radix_log2 = Signal(2)
        self.rst = Signal()

    def streams(self) -> dict[str, stream.Endpoint]:
        return {name: getattr(self, name) for name, _d, _doc in K.COLL_STREAMS}


class CollectiveVitis(CollectiveCore):
    """The kernel's exported RTL (Verilog module ``collective``) behind the interface.

    For a board built with Vitis: the RTL comes from ``hls/collective/run_hls.tcl``'s IP
    export. Without Vitis this is only elaborated (the RTL does not exist here)."""

    MODULE = "collective"

    def __init__(self) -> None:
        super().__init__()
        self.ap_done = Signal()
        self.ap_idle = Signal()
        self.ap_ready = Signal()
        conn = {"i_ap_clk": ClockSignal(), "i_ap_rst": ResetSignal() | self.rst, "i_ap_start": 1,
                "o_ap_done": self.ap_done, "o_ap_idle": self.ap_idle, "o_ap_ready": self.ap_ready,
                "i_node": self.node, "i_radix_log2": self.radix_log2}
        for name, d, _doc in K.COLL_STREAMS:
            ep = getattr(self, name)
            back = "o" if d == "i" else "i"
            conn[f"{d}_{name}_TDATA"] = ep.data
            conn[f"{d}_{name}_TVALID"] = ep.valid
            conn[f"{back}_{name}_TREADY"] = ep.ready
        self.specials += Instance(self.MODULE, **conn)


class CollectiveExternal(CollectiveCore):
    """Nothing inside: the module that instantiates the NIC drives the kernel's streams.

    The simulated cluster brings them out as ports and its harness runs the kernel's C++
    on them (docs/simulator.md, "The collective kernel")."""


def make_core(impl: str | None) -> CollectiveCore | None:
    """The core for NicCore's build option ``collective``: None (no unit: every command is
    refused), ``"migen"``, ``"vitis"`` or ``"sim"``."""
    if impl is None:
        return None
    if impl == "vitis":
        return CollectiveVitis()
    if impl == "sim":
        return CollectiveExternal()
    if impl == "migen":
        from .collective_core import CollectiveMigen
        core = ResetInserter()(CollectiveMigen())
        core.comb += core.reset.eq(core.rst)
        return core
    raise ValueError(f"collective: {impl!r} is not None, 'migen', 'vitis' or 'sim'")


class NetFramer(Module):
    """The kernel's ``net_out`` words -> a packet stream (``first``/``last`` from the header's
    length: two header words, then ceil(length / 8) payload words)."""

    def __init__(self) -> None:
        self.sink = coll_stream()
        self.source = stream.Endpoint(packet_layout())
        left = Signal(7)        # words of this packet still to come after the current one
        inside = Signal()
        length = Signal(P.HEADER_FIELD["length"].width + 1)   # + 7 below must not wrap
        self.comb += length.eq(hdr(self.sink.data, "length"))
        self.comb += [
            self.source.valid.eq(self.sink.valid),
            self.sink.ready.eq(self.source.ready),
            self.source.data.eq(self.sink.data),
            self.source.first.eq(~inside),
            self.source.last.eq(inside & (left == 0)),
        ]
        self.sync += If(self.sink.valid & self.sink.ready,
            If(~inside,
                inside.eq(1),
                left.eq((length + 7) >> 3),     # tag + payload words after word 0
            ).Elif(left == 0,
                inside.eq(0),
            ).Else(
                left.eq(left - 1),
            ))


class CollectiveUnit(LiteXModule):
    """The collective unit of one node (see the module's description).

    ``core``: a :class:`CollectiveCore` or None. Input ``node_id``; configuration
    ``enable`` (reset 0) and ``radix_log2``; state ``ctx`` and ``owned`` (the context that
    owns the unit: the first that sent a command since ``enable`` rose).
    Packet streams: ``host_sink`` (the host's COLLECTIVE packets), ``host_source``
    (results, to the host's RX path), ``net_sink`` (COLLECTIVE packets the router ejects),
    ``net_source`` (packets to inject). Counters (32 bit, wrap): ``commands`` (taken by the
    kernel), ``refused``, ``results``, ``net_dropped`` (ejected while disabled or without a core)."""

    COUNTERS = ("commands", "refused", "results", "net_dropped")

    def __init__(self, core: CollectiveCore | None) -> None:
        self.core = core
        self.node_id = Signal(P.NODE_BITS)
        self.enable = Signal()
        self.ctx = Signal(P.CTX_BITS)
        self.owned = Signal()
        self.radix_log2 = Signal(2, reset=K.COLL_DEFAULT_RADIX_LOG2)
        self.host_sink = stream.Endpoint(packet_layout())
        self.host_source = stream.Endpoint(packet_layout())
        self.net_sink = stream.Endpoint(packet_layout())
        self.net_source = stream.Endpoint(packet_layout())
        for name in self.COUNTERS:
            setattr(self, name, Signal(32, name=name))

        # # #

        if core is not None:
            self.submodules.core = core
            self.comb += [core.node.eq(self.node_id), core.radix_log2.eq(self.radix_log2),
                          core.rst.eq(~self.enable)]
            host_in, net_in = core.host_in, core.net_in
            # Outputs through FIFOs, so the kernel never waits on injection or the host.
            self.net_fifo = stream.SyncFIFO([("data", P.WORD_BITS)], NET_OUT_WORDS, buffered=True)
            self.host_fifo = stream.SyncFIFO([("data", P.WORD_BITS)], HOST_OUT_WORDS, buffered=True)
            self.framer = NetFramer()
            self.comb += [
                core.net_out.connect(self.net_fifo.sink),
                self.net_fifo.source.connect(self.framer.sink),
                self.framer.source.connect(self.net_source),
                core.host_out.connect(self.host_fifo.sink),
                # While disabled (the kernel held in reset) ejected packets are dropped, so
                # they never hold up the ejection of other packets.
                If(self.enable,
                    self.net_sink.connect(net_in, keep={"valid", "ready", "data"}),
                ).Else(self.net_sink.ready.eq(1)),
            ]
            self.sync += If(~self.enable & self.net_sink.valid & self.net_sink.last,
                            self.net_dropped.eq(self.net_dropped + 1))
            results = self.host_fifo.source
        else:
            host_in = coll_stream()          # never valid: every command is refused
            results = coll_stream()
            self.comb += self.net_sink.ready.eq(1)
            self.sync += If(self.net_sink.valid & self.net_sink.last,
                            self.net_dropped.eq(self.net_dropped + 1))

        # Commands ---------------------------------------------------------------------------
        # w0 (source context, length), the tag, then the collective header word `h`; the
        # command goes to the kernel (h, then exactly ceil(nbytes/8) words) or is refused.
        sink = self.host_sink
        src_ctx = Signal(P.CTX_BITS)
        pkt_words = Signal(12)       # payload words after h, as the length says
        h = Signal(P.WORD_BITS)
        need = Signal(7)             # vector words the kernel reads
        i = Signal(7)
        ref_valid = Signal()         # a refusal for `ref_ctx` waits for the result path
        ref_hdr = Signal(P.WORD_BITS)
        ref_ctx = Signal(P.CTX_BITS)
        owner = Signal()
        have_core = int(core is not None)
        # Ownership: taken by the first command while enabled, lost when disabled.
        claim = Signal()
        self.comb += owner.eq(self.enable & have_core & ((self.owned & (src_ctx == self.ctx)) | ~self.owned))
        self.sync += If(~self.enable, self.owned.eq(0)
                        ).Elif(claim, self.owned.eq(1), self.ctx.eq(src_ctx))
        h_in = sink.data
        nbytes = cfield(h_in, "nbytes")
        nbytes_up = Signal(len(nbytes) + 1)   # nbytes + 7 without wrapping (up to 511 + 7)
        self.comb += nbytes_up.eq(nbytes + 7)
        len_up = Signal(P.HEADER_FIELD["length"].width + 1)
        self.comb += len_up.eq(hdr(sink.data, "length") + 7)
        self.cmd = cmd = FSM(reset_state="W0")
        cmd.act("W0",
            sink.ready.eq(1),
            If(sink.valid,
                NextValue(src_ctx, hdr(sink.data, "src_ctx")),
                NextValue(pkt_words, len_up >> 3),
                NextState("TAG")))
        cmd.act("TAG",
            sink.ready.eq(1),
            If(sink.valid,
                If(sink.last,
                    NextValue(h, 0),   # no collective header: nothing to echo
                    NextValue(ref_hdr, 0),
                    NextState("REFUSE"),
                ).Else(NextState("HDR"))))
        cmd.act("HDR",
            If(sink.valid,
                NextValue(h, h_in),
                NextValue(need, nbytes_up >> 3),
                NextValue(i, 0),
                NextValue(pkt_words, pkt_words - 1),
                If(owner,
                    claim.eq(~self.owned),
                    NextState("GIVE_HDR"),
                ).Else(
                    sink.ready.eq(1),
                    NextValue(ref_hdr, h_in),
                    If(sink.last, NextState("REFUSE")).Else(NextState("DRAIN_REFUSE")))))
        bad_len = Signal()
        self.comb += bad_len.eq(pkt_words != need)
        hdr_out = Signal(P.WORD_BITS)
        self.comb += [hdr_out.eq(h), If(bad_len, cfield(hdr_out, "err").eq(cfield(h, "err") | K.CollErr.BAD_ARGS))]
        cmd.act("GIVE_HDR",
            host_in.valid.eq(1),
            host_in.data.eq(hdr_out),
            If(host_in.ready,
                sink.ready.eq(1),      # h leaves the packet now
                NextValue(self.commands, self.commands + 1),
                If(need != 0, NextState("GIVE"))
                .Elif(sink.last, NextState("W0"))
                .Else(NextState("DRAIN"))))
        # Word i of the vector: the packet's, or zero once the packet is shorter.
        more = Signal()
        self.comb += more.eq(i < pkt_words)
        cmd.act("GIVE",
            host_in.valid.eq(~more | sink.valid),
            host_in.data.eq(0),
            If(more, host_in.data.eq(sink.data), sink.ready.eq(host_in.ready)),
            If(host_in.valid & host_in.ready,
                NextValue(i, i + 1),
                If(i + 1 == need,
                    If(~more | sink.last, NextState("W0")).Else(NextState("DRAIN")))))
        cmd.act("DRAIN",
            sink.ready.eq(1),
            If(sink.valid & sink.last, NextState("W0")))
        cmd.act("DRAIN_REFUSE",
            sink.ready.eq(1),
            If(sink.valid & sink.last, NextState("REFUSE")))
        cmd.act("REFUSE",
            If(~ref_valid,
                NextValue(ref_valid, 1),
                NextValue(ref_ctx, src_ctx),
                NextValue(self.refused, self.refused + 1),
                NextState("W0")))

        # Results --------------------------------------------------------------------------
        # Two network header words to the context, then the result header and its vector.
        src = self.host_source
        rh = Signal(P.WORD_BITS)
        rctx = Signal(P.CTX_BITS)
        left = Signal(7)
        res_hdr = Signal(P.WORD_BITS)       # the refusal's result header, from the command's
        self.comb += [
            res_hdr.eq(ref_hdr),
            cfield(res_hdr, "phase").eq(K.CollPhase.DOWN),
            cfield(res_hdr, "nodata").eq(1),
            cfield(res_hdr, "refused").eq(1),
        ]
        rwords = Signal(7)           # the kernel's data_words(): ceil(nbytes / 8), at most 32
        res_up = Signal(K.COLL_FIELD["nbytes"].width + 1)
        self.comb += res_up.eq(cfield(results.data, "nbytes") + 7)
        self.comb += If(cfield(results.data, "nodata"), rwords.eq(0)
            ).Elif(cfield(results.data, "nbytes") > K.COLL_MAX_BYTES, rwords.eq(K.COLL_MAX_WORDS)
            ).Else(rwords.eq(res_up >> 3))
        w0 = Signal(P.WORD_BITS)
        self.comb += [
            hdr(w0, "dst_node").eq(self.node_id),
            hdr(w0, "src_node").eq(self.node_id),
            hdr(w0, "dst_ctx").eq(rctx),
            hdr(w0, "src_ctx").eq(rctx),
            hdr(w0, "type").eq(P.PacketType.COLLECTIVE),
            hdr(w0, "length").eq(8 * (1 + left)),
            hdr(w0, "flags").eq(P.Flags.SOM | P.Flags.EOM),
        ]
        self.res = res = FSM(reset_state="IDLE")
        res.act("IDLE",
            If(ref_valid,
                NextValue(rh, res_hdr), NextValue(rctx, ref_ctx), NextValue(left, 0),
                NextValue(ref_valid, 0),
                NextState("W0"),
            ).Elif(results.valid,
                results.ready.eq(1),
                NextValue(rh, results.data), NextValue(rctx, self.ctx),
                NextValue(left, rwords),
                NextValue(self.results, self.results + 1),
                NextState("W0")))
        res.act("W0",
            src.valid.eq(1), src.first.eq(1), src.data.eq(w0),
            If(src.ready, NextState("TAG")))
        res.act("TAG",
            src.valid.eq(1), src.data.eq(0),
            If(src.ready, NextState("H")))
        res.act("H",
            src.valid.eq(1), src.data.eq(rh), src.last.eq(left == 0),
            If(src.ready, If(left == 0, NextState("IDLE")).Else(NextState("DATA"))))
        res.act("DATA",
            src.valid.eq(results.valid), src.data.eq(results.data), src.last.eq(left == 1),
            results.ready.eq(src.ready),
            If(results.valid & src.ready,
                NextValue(left, left - 1),
                If(left == 1, NextState("IDLE"))))

    def add_csrs(self) -> None:
        self._enable = CSRStorage(1, reset=0,
            description="1: the collective kernel runs and takes the network's collective packets. "
                        "0: its state is held in reset, those packets are dropped, every command "
                        "is refused, and the unit has no owner.")
        self._ctx = CSRStatus(P.CTX_BITS, description="The context that owns the unit (while `owned`).")
        self._owned = CSRStatus(1, description="1: context `ctx` owns the unit: it sent the first command "
                                               "since `enable` rose; other contexts' commands are refused.")
        self._radix_log2 = CSRStorage(2, reset=K.COLL_DEFAULT_RADIX_LOG2,
            description=f"Tree fan-out 2**radix_log2 (0..{K.COLL_MAX_RADIX_LOG2}). Same value on "
                        "every node; change only while no operation is in progress.")
        self._present = CSRStatus(1, reset=int(self.core is not None),
            description="1: this NIC has a collective kernel (0: every command is refused).")
        self.comb += [
            self.enable.eq(self._enable.storage),
            self._ctx.status.eq(self.ctx),
            self._owned.status.eq(self.owned),
            self.radix_log2.eq(self._radix_log2.storage),
        ]
        for name in self.COUNTERS:
            c = CSRStatus(32, name=name, description=f"Counter: {name} (wraps).")
            setattr(self, f"_{name}", c)
            self.comb += c.status.eq(getattr(self, name))
