"""Host interface: receive engine (packets -> RX ring slots in host memory, MSI).

For each packet on ``rx_sink`` (DATA/RMA packets ejected by the router for this
node) the engine checks the destination context, waits while that context's ring is
full, writes header + payload into slot ``tail mod slots`` at
``rx_base + slot * P.rx_slot_bytes(mtu)`` (header at +0, payload at +16), then, as a
separate later write request on the same (ordered) port, the valid word ``tail + 1``
at ``P.rx_valid_offset(mtu)``, increments the ring's tail and, if the context armed
its interrupt, pulses ``irq[ctx]`` and disarms.

Pipelining: the header word is only looked at (not taken) before the check, which an
idle engine makes in the cycle the header arrives (the slot's write command and first
beat go out the next cycle); each write command goes out with its first beat, and the
next packet's header is latched while the valid word is written. A packet of ``n``
words thus costs ``n + 2`` cycles back to back (``n`` slot beats, the valid word, one
check cycle): 132 for an MTU packet, the link's own frame time, so a saturated link
never backs up into the router.
"""

from __future__ import annotations

from migen import Array, If, Module, Mux, Signal
from migen.genlib.fsm import FSM, NextState, NextValue
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from .common import hdr, packet_layout, packet_words
from .dma import DmaWriter
from .host_ctx import ContextConfig, ContextState


class RxEngine(Module):
    """Writes received packets into the destination contexts' RX rings.

    ``rx_sink`` (packet_layout) in; ``writer`` (a :class:`DmaWriter`) out, whose
    ``source`` is this engine's share of the ``dma_wr`` port; ``irq`` (n_ctx) pulses.

    Robustness: a packet for a context ``>= n_ctx`` or disabled is drained and counted
    (``err_unknown_ctx``); a packet whose header length exceeds the MTU, whose beat
    count disagrees with its length, or that carries ``error`` on its last beat is
    never committed (its slot is overwritten by the next packet, no valid word) and
    is counted (``err_rx``). Nothing is ever written outside the slot.
    ``active``/``active_ctx``: a packet is being written into ``active_ctx``'s ring.
    """

    def __init__(self, n_ctx: int, mtu: int, cfg: ContextConfig, state: ContextState,
                 address_width: int = 64, max_payload_bytes: int = 256) -> None:
        self.rx_sink = sink = stream.Endpoint(packet_layout())
        self.irq = Signal(n_ctx)
        self.err_unknown_ctx = Signal()
        self.err_rx = Signal()
        self.rx_packet = Signal()
        self.active = Signal()
        self.active_ctx = Signal(P.CTX_BITS)
        self.submodules.writer = writer = DmaWriter(address_width, max_payload_bytes)

        # # #

        st = state
        slot_bytes = P.rx_slot_bytes(mtu)
        valid_off = P.rx_valid_offset(mtu)
        max_words = P.packet_words(mtu)

        hdr0 = Signal(64)
        hsel = Signal(64)   # the header being checked: the sink's word in IDLE, else hdr0
        ctx = Signal(P.CTX_BITS)
        length = hdr(hsel, "length")
        nwords = Signal(max=max_words + 1)
        sent = Signal(max=max_words + 1)
        ended = Signal()  # the packet's last beat has been consumed
        bad = Signal()
        slot_adr = Signal(address_width)
        tail = Signal(32)
        head = Signal(32)
        mask = Signal(len(st.rx_mask[0]))
        enabled = Signal()
        full = Signal()
        used = Signal(32)
        next_count = Signal(32)
        self.submodules.fsm = fsm = FSM(reset_state="IDLE")
        self.comb += [
            hsel.eq(Mux(fsm.ongoing("IDLE"), sink.data, hdr0)),
            ctx.eq(hdr(hsel, "dst_ctx")),
            self.active_ctx.eq(ctx),
            cfg.rx_base_rd.adr.eq(ctx),
            tail.eq(Array(st.rx_tail)[ctx]),
            head.eq(Array(st.rx_head)[ctx]),
            mask.eq(Array(st.rx_mask)[ctx]),
            enabled.eq((ctx < n_ctx) & Array(list(st.enable))[ctx]),
            used.eq(tail - head),
            full.eq(used > mask),
            next_count.eq(tail + 1),
            st.rx_inc.ctx.eq(ctx),
            st.arm_clr.ctx.eq(ctx),
        ]

        d = writer.data

        def check(wait):
            """The header's checks: drop, or start the slot; ``wait`` when its ring is full."""
            return [
                If(~enabled,
                    self.err_unknown_ctx.eq(1),
                    NextState("DROP"),
                ).Elif(length > mtu,
                    self.err_rx.eq(1),
                    NextState("DROP"),
                ).Elif(~full,
                    NextValue(slot_adr, cfg.rx_base_rd.dat_r + (tail & mask) * slot_bytes),
                    NextValue(nwords, packet_words(length)),
                    NextValue(sent, 0),
                    NextValue(ended, 0),
                    NextValue(bad, 0),
                    NextState("CMD"),
                ).Else(*wait),
            ]

        # IDLE checks the header as it arrives (it stays in the sink) and latches it;
        # a packet for a full ring waits in CHECK.
        fsm.act("IDLE",
            If(sink.valid,
                NextValue(hdr0, sink.data),
                *check([NextState("CHECK")]),
            ),
        )
        fsm.act("CHECK", *check([]))
        fsm.act("DROP",
            sink.ready.eq(1),
            If(sink.valid & sink.last,
                NextState("IDLE"),
            ),
        )

        def slot_beat():
            """One beat of header + payload: the sink's word, or padding after its end."""
            return [
                If(~ended,
                    d.valid.eq(sink.valid),
                    d.data.eq(sink.data),
                    sink.ready.eq(d.ready),
                ).Else(  # packet shorter than its length: pad, never commit
                    d.valid.eq(1),
                    d.data.eq(0),
                ),
                If(d.valid & d.ready,
                    NextValue(sent, sent + 1),
                    If(~ended & sink.last,
                        NextValue(ended, 1),
                        If(sink.error | (sent != nwords - 1), NextValue(bad, 1)),
                    ),
                    If(ended, NextValue(bad, 1)),
                    If(sent == nwords - 1,
                        If(~ended & ~sink.last,  # packet longer than its length
                            NextValue(bad, 1),
                            NextState("DRAIN"),
                        ).Else(
                            NextState("VALID"),
                        ),
                    ),
                ),
            ]

        fsm.act("CMD",  # the slot's write command, with its first beat (nwords >= 2)
            self.active.eq(1),
            writer.cmd.valid.eq(1),
            writer.cmd.adr.eq(slot_adr),
            writer.cmd.words.eq(nwords),
            If(writer.cmd.ready,
                NextState("STREAM"),
                *slot_beat(),
            ),
        )
        fsm.act("STREAM",
            self.active.eq(1),
            *slot_beat(),
        )
        fsm.act("DRAIN",
            self.active.eq(1),
            sink.ready.eq(1),
            If(sink.valid & sink.last, NextState("VALID")),
        )
        armed = Array(list(st.irq_armed))[ctx]
        fsm.act("VALID",  # the valid word: command and beat together; latch the next header
            self.active.eq(1),
            If(bad,
                self.err_rx.eq(1),
                NextState("IDLE"),
            ).Else(
                writer.cmd.valid.eq(~writer.busy),
                writer.cmd.adr.eq(slot_adr + valid_off),
                writer.cmd.words.eq(1),
                d.valid.eq(1),
                d.data.eq(next_count),
                If(d.ready,
                    st.rx_inc.stb.eq(1),
                    self.rx_packet.eq(1),
                    If(armed,
                        *[self.irq[i].eq(ctx == i) for i in range(n_ctx)],
                        st.arm_clr.stb.eq(1),
                    ),
                    If(sink.valid,
                        NextValue(hdr0, sink.data),
                        NextState("CHECK"),
                    ).Else(
                        NextState("IDLE"),
                    ),
                ),
            ),
        )
