"""Host interface: status-block writer.

Whenever one of a context's status counters (``P.STATUS_FIELDS``: pio_done,
tx_done, barrier_done, errors) moves, the context is marked dirty; this writer
serves dirty contexts round-robin, snapshots their four counters and writes the
whole 16-byte block to the context's status address. Changes during the write mark
the context dirty again, so updates coalesce but the last value is always written.
"""

from __future__ import annotations

from migen import Array, If, Module, Signal
from migen.genlib.fsm import FSM, NextState, NextValue

from paranic.spec import protocol as P

from .dma import DmaWriter
from .host_ctx import ContextConfig, ContextState, RRPicker


class StatusWriter(Module):
    """Rewrites dirty status blocks through ``writer`` (a :class:`DmaWriter`).

    Contexts that are disabled or whose status address is 0 are skipped (their
    dirty bit is simply cleared). ``writes`` strobes once per block written.
    """

    def __init__(self, n_ctx: int, cfg: ContextConfig, state: ContextState,
                 address_width: int = 64, max_payload_bytes: int = 256) -> None:
        self.submodules.writer = writer = DmaWriter(address_width, max_payload_bytes)
        self.writes = Signal()

        # # #

        st = state
        self.submodules.pick = pick = RRPicker(n_ctx)
        ctx = Signal(P.CTX_BITS)
        blk = Signal(P.STATUS_BLOCK_BYTES * 8)
        fields = {f.name: f for f in P.STATUS_FIELDS}
        snap = []
        for name in ("pio_done", "tx_done", "barrier_done", "errors"):
            f = fields[name]
            snap.append(NextValue(blk[f.offset:f.offset + f.width], Array(getattr(st, name))[pick.grant]))
        assert P.STATUS_BLOCK_BYTES == 16
        addr = cfg.st_rd.dat_r
        self.comb += [
            pick.request.eq(st.dirty),
            st.dirty_clr.ctx.eq(pick.grant),
            cfg.st_rd.adr.eq(ctx),
        ]

        self.submodules.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            If(pick.valid,
                pick.take.eq(1),
                st.dirty_clr.stb.eq(1),
                NextValue(ctx, pick.grant),
                *snap,
                NextState("CMD"),
            ),
        )
        fsm.act("CMD",
            If(~Array(list(st.enable))[ctx] | (addr == 0),
                NextState("IDLE"),
            ).Else(
                writer.cmd.valid.eq(1),
                writer.cmd.adr.eq(addr),
                writer.cmd.words.eq(2),
                If(writer.cmd.ready, NextState("D0")),
            ),
        )
        fsm.act("D0",
            writer.data.valid.eq(1),
            writer.data.data.eq(blk[:64]),
            If(writer.data.ready, NextState("D1")),
        )
        fsm.act("D1",
            writer.data.valid.eq(1),
            writer.data.data.eq(blk[64:]),
            If(writer.data.ready,
                self.writes.eq(1),
                NextState("IDLE"),
            ),
        )
