"""Host interface: DMA transmit engine (descriptor rings -> packets).

Three stages joined by FIFOs, so that descriptor fetches, payload reads and packet
output overlap:

1. **Fetcher**: round-robin among enabled contexts whose ``TX_TAIL`` is ahead of
   their fetch count (descriptors posted after a still pending PIO doorbell of the
   same context wait for that PIO packet); reads one descriptor (``P.TX_DESC_BYTES``) from
   ``tx_base + (fetch mod slots) * 32``. At most ``desc_queue`` descriptors are in
   flight or queued.
2. **Checker / read issuer**: checks the descriptor (type in
   ``P.USER_PACKET_TYPES``, ``length <= P.MAX_DMA_LENGTH``, the 8-byte aligned span
   ``[addr & ~7, (addr + length + 7) & ~7)`` inside the context's DMA window), queues
   a job for stage 3, then issues the payload reads: requests of at most
   ``max_request_bytes`` that never cross a ``max_request_bytes`` (so never a 4 KiB)
   boundary, as long as the payload FIFO has room reserved for their data and fewer
   than ``max_outstanding`` reads are outstanding.
3. **Packetizer**: byte-realigns the payload, cuts it into packets of at most
   ``mtu`` payload bytes (SOM on the first, EOM on the last; a zero-length message is
   one empty packet with SOM|EOM), stamps the source fields and streams each packet
   once all its payload is in the FIFO (no bubbles inside a packet). After the last
   packet of a descriptor (or at once for a refused one) ``tx_done`` increments.

Read completions arrive in request order; a small FIFO of outstanding requests
(kind, context, words) routes them to the descriptor FIFO or the payload FIFO. A
request that completes with fewer words than asked (error completion) is padded
with zeros (and a descriptor so affected is refused), extra words are dropped;
both count in ``err_dma``. The engine never back-pressures completions.
"""

from __future__ import annotations

from migen import Array, Cat, If, Module, Mux, Signal
from migen.genlib.fsm import FSM, NextState, NextValue
from litex.soc.interconnect import stream

from paranic.spec import protocol as P

from .common import hdr, packet_layout, payload_words
from .dma import DmaPort, ReadRealigner
from .host_ctx import ContextConfig, ContextState, RRPicker, user_type_ok

def Mux_(cond, value):
    """``value`` if ``cond`` else 0."""
    return Mux(cond, value, 0)


KIND_DESC = 1
KIND_DATA = 0


def tx_fifo_words(mtu: int, max_request_bytes: int) -> int:
    """Default payload FIFO depth: a whole packet plus two read requests, power of 2."""
    need = P.packet_words(mtu) + 2 * (max_request_bytes // 8)
    w = 64
    while w < need:
        w *= 2
    return w


def _desc_field(desc, name):
    f = {f.name: f for f in P.TX_DESC_FIELDS}[name]
    return desc[f.offset:f.offset + f.width]


class DmaTxEngine(Module):
    """DMA transmit: descriptor fetch, checks, pipelined payload reads, packetizing.

    ``port``: the :class:`DmaPort` for reads (``dma_rd``). ``source``: packets.
    ``node_id`` in. Strobes: ``err_desc`` (descriptor refused), ``err_dma``
    (completion with error, short, long or unexpected), ``packet`` (one per packet).
    """

    def __init__(self, n_ctx: int, mtu: int, cfg: ContextConfig, state: ContextState,
                 port: DmaPort, max_request_bytes: int = 512, max_outstanding: int = 8,
                 fifo_words: int | None = None, desc_queue: int = 2) -> None:
        assert 8 <= max_request_bytes <= 2048 and max_request_bytes & (max_request_bytes - 1) == 0
        self.source = source = stream.Endpoint(packet_layout())
        self.node_id = Signal(P.NODE_BITS)
        self.err_desc = Signal()
        self.err_dma = Signal()
        self.packet = Signal()
        self.fifo_words = fifo_words = fifo_words or tx_fifo_words(mtu, max_request_bytes)
        assert fifo_words >= P.packet_words(mtu) + max_request_bytes // 8

        # # #

        st = state
        aw = port.address_width
        req = port.source
        cpl = port.sink
        mr_words = max_request_bytes // 8
        mr_bits = (max_request_bytes - 1).bit_length()
        desc_words = P.TX_DESC_BYTES // 8
        cnt_bits = 22  # words of one message, up to MAX_DMA_LENGTH/8 + 1
        len_bits = (P.MAX_DMA_LENGTH).bit_length()

        # FIFOs -------------------------------------------------------------------------------
        self.submodules.kind_fifo = kind_fifo = stream.SyncFIFO(
            [("kind", 1), ("ctx", P.CTX_BITS), ("words", 10)], max_outstanding)
        self.submodules.desc_fifo = desc_fifo = stream.SyncFIFO(
            [("data", 64), ("ctx", P.CTX_BITS), ("bad", 1)], desc_words * desc_queue)
        self.submodules.data_fifo = data_fifo = stream.SyncFIFO(
            [("data", 64)], fifo_words, buffered=True)
        job_layout = [("ctx", P.CTX_BITS), ("ok", 1), ("dst_node", P.NODE_BITS),
                      ("dst_ctx", P.CTX_BITS), ("type", 3), ("tag", 64),
                      ("length", len_bits), ("shift", 3)]
        self.submodules.job_fifo = job_fifo = stream.SyncFIFO(job_layout, 4)
        self.submodules.realign = ra = ReadRealigner(cnt_bits)
        self.comb += data_fifo.source.connect(ra.sink)

        # Request multiplexer (fetcher first; a presented request is held) -------------------
        f_active = Signal()
        f_ctx = Signal(P.CTX_BITS)
        f_adr = Signal(aw)
        i_valid = Signal()
        i_adr = Signal(aw)
        i_chunk = Signal(max=mr_words + 1)
        presenting = Signal()
        cur_fetch = Signal()
        sel_fetch = Signal()
        ack = Signal()
        f_ack = Signal()
        i_ack = Signal()
        self.comb += [
            sel_fetch.eq(f_active),
            If(presenting, sel_fetch.eq(cur_fetch)),
            req.valid.eq((f_active | i_valid) & kind_fifo.sink.ready),
            req.first.eq(1),
            req.last.eq(1),
            req.we.eq(0),
            req.channel.eq(port.channel),
            req.req_id.eq(port.req_id),
            If(sel_fetch,
                req.adr.eq(f_adr),
                req.len.eq(P.TX_DESC_BYTES // 4),
            ).Else(
                req.adr.eq(i_adr),
                req.len.eq(i_chunk << 1),
            ),
            ack.eq(req.valid & req.ready),
            f_ack.eq(ack & sel_fetch),
            i_ack.eq(ack & ~sel_fetch),
            kind_fifo.sink.valid.eq(ack),
            kind_fifo.sink.kind.eq(sel_fetch),
            kind_fifo.sink.ctx.eq(f_ctx),
            kind_fifo.sink.words.eq(i_chunk),
            If(sel_fetch, kind_fifo.sink.words.eq(desc_words)),
        ]
        self.sync += [
            presenting.eq(req.valid & ~req.ready),
            cur_fetch.eq(sel_fetch),
        ]

        # Stage 1: descriptor fetcher ----------------------------------------------------------
        desc_credits = Signal(max=desc_queue + 1, reset=desc_queue)
        credit_back = Signal()
        self.submodules.fpick = fpick = RRPicker(n_ctx)
        f_req = Signal(n_ctx)
        self.comb += [
            # descriptors posted after a pending PIO doorbell wait for its packet
            *[f_req[i].eq(st.enable[i] & (st.tx_tail[i] != st.tx_fetch[i])
                          & ~(st.pio_pending[i] & (st.tx_fetch[i] == st.pio_after[i])))
              for i in range(n_ctx)],
            fpick.request.eq(f_req),
            cfg.tx_base_rd.adr.eq(f_ctx),
            f_adr.eq(cfg.tx_base_rd.dat_r
                     + ((Array(st.tx_fetch)[f_ctx] & Array(st.tx_mask)[f_ctx]) * P.TX_DESC_BYTES)),
            st.tx_fetch_inc.ctx.eq(f_ctx),
            st.tx_fetch_inc.stb.eq(f_ack),
        ]
        self.sync += [
            If(~f_active & fpick.valid & (desc_credits != 0),
                f_active.eq(1),
                f_ctx.eq(fpick.grant),
            ),
            If(f_ack, f_active.eq(0)),
            desc_credits.eq(desc_credits - f_ack + credit_back),
        ]
        self.comb += fpick.take.eq(~f_active & fpick.valid & (desc_credits != 0))

        # Completion router ----------------------------------------------------------------------
        k = kind_fifo.source
        cnt = Signal(10)
        pad = Signal()
        fwd = Signal()
        fwd_data = Signal(64)
        fwd_bad = Signal()
        pop = Signal()
        self.comb += [
            desc_fifo.sink.data.eq(fwd_data),
            desc_fifo.sink.ctx.eq(k.ctx),
            desc_fifo.sink.bad.eq(fwd_bad),
            desc_fifo.sink.valid.eq(fwd & (k.kind == KIND_DESC)),
            data_fifo.sink.data.eq(fwd_data),
            data_fifo.sink.valid.eq(fwd & (k.kind == KIND_DATA)),
            k.ready.eq(pop),
            If(pad,
                fwd.eq(1),
                fwd_bad.eq(1),
                If(cnt == k.words - 1, pop.eq(1)),
            ).Else(
                cpl.ready.eq(1),
                If(cpl.valid,
                    If(~k.valid,
                        self.err_dma.eq(cpl.last),
                    ).Else(
                        fwd.eq(cnt < k.words),
                        fwd_data.eq(cpl.dat),
                        fwd_bad.eq(cpl.err),
                        If(cpl.last & (cpl.err | (cnt >= k.words)), self.err_dma.eq(1)),
                        If(cpl.last & cpl.end,
                            If(cnt + 1 < k.words,
                                self.err_dma.eq(1),
                            ).Else(
                                pop.eq(1),
                            ),
                        ),
                    ),
                ),
            ),
        ]
        self.sync += [
            If(pad,
                cnt.eq(cnt + 1),
                If(pop, cnt.eq(0), pad.eq(0)),
            ).Elif(cpl.valid & k.valid,
                If(cnt < k.words, cnt.eq(cnt + 1)),
                If(cpl.last & cpl.end,
                    If(cnt + 1 < k.words,
                        pad.eq(1),
                        cnt.eq(cnt + 1),
                    ).Else(
                        cnt.eq(0),
                    ),
                ),
            ),
        ]

        # Stage 2: checker and payload read issuer ------------------------------------------------
        d = [Signal(64, name=f"desc_w{i}") for i in range(desc_words)]
        desc = Cat(*d)
        widx = Signal(max=desc_words)
        b_ctx = Signal(P.CTX_BITS)
        b_bad = Signal()
        addr = _desc_field(desc, "addr")
        length = _desc_field(desc, "length")
        dtype = _desc_field(desc, "type")
        win_base = cfg.win_rd.dat_r[:aw]
        win_size = cfg.win_rd.dat_r[aw:]
        end = Signal(aw + 1)
        win_end = Signal(aw + 1)
        end_al = Signal(aw + 2)
        addr_al = Signal(aw)
        type_ok = Signal()
        len_ok = Signal()
        ok = Signal()
        n_in = Signal(cnt_bits)
        left = Signal(cnt_bits)
        credits = Signal(max=fifo_words + 1, reset=fifo_words)
        room = Signal(max=mr_words + 1)
        data_pop = Signal()
        self.comb += [
            cfg.win_rd.adr.eq(b_ctx),
            addr_al.eq(Cat(Signal(3), addr[3:])),
            end_al.eq(Cat(Signal(3), (end + 7)[3:])),
            ok.eq(~b_bad & type_ok & len_ok
                  & ((length == 0) | ((addr_al >= win_base) & (end_al <= win_end)))),
            n_in.eq(payload_words(addr[:3] + length)),
            room.eq(mr_words - i_adr[3:mr_bits]) if mr_bits > 3 else room.eq(1),
            i_chunk.eq(room),
            If(left < room, i_chunk.eq(left)),
            job_fifo.sink.ctx.eq(b_ctx),
            job_fifo.sink.ok.eq(ok),
            job_fifo.sink.dst_node.eq(_desc_field(desc, "dst_node")),
            job_fifo.sink.dst_ctx.eq(_desc_field(desc, "dst_ctx")),
            job_fifo.sink.type.eq(dtype),
            job_fifo.sink.tag.eq(_desc_field(desc, "tag")),
            job_fifo.sink.length.eq(length),
            job_fifo.sink.shift.eq(addr[:3]),
            data_pop.eq(data_fifo.source.valid & data_fifo.source.ready),
        ]
        self.sync += credits.eq(credits - Mux_(i_ack, i_chunk) + data_pop)

        self.submodules.bfsm = bfsm = FSM(reset_state="LOAD")
        ds = desc_fifo.source
        bfsm.act("LOAD",
            ds.ready.eq(1),
            If(ds.valid,
                *[If(widx == i, NextValue(d[i], ds.data)) for i in range(desc_words)],
                NextValue(b_ctx, ds.ctx),
                NextValue(b_bad, Mux_(widx != 0, b_bad) | ds.bad),
                NextValue(widx, widx + 1),
                If(widx == desc_words - 1,
                    NextValue(widx, 0),
                    credit_back.eq(1),
                    NextState("CHECK1"),
                ),
            ),
        )
        bfsm.act("CHECK1",
            NextValue(end, addr + length),
            NextValue(win_end, win_base + win_size),
            NextValue(type_ok, user_type_ok(dtype)),
            NextValue(len_ok, length <= P.MAX_DMA_LENGTH),
            NextState("CHECK2"),
        )
        bfsm.act("CHECK2",
            job_fifo.sink.valid.eq(1),
            If(job_fifo.sink.ready,
                If(~ok,
                    self.err_desc.eq(1),
                    NextState("LOAD"),
                ).Elif(length == 0,
                    NextState("LOAD"),
                ).Else(
                    NextValue(i_adr, addr_al),
                    NextValue(left, n_in),
                    NextState("ISSUE"),
                ),
            ),
        )
        bfsm.act("ISSUE",
            i_valid.eq(credits >= i_chunk),
            If(i_ack,
                NextValue(i_adr, i_adr + (i_chunk << 3)),
                NextValue(left, left - i_chunk),
                If(left == i_chunk, NextState("LOAD")),
            ),
        )

        # Stage 3: packetizer -----------------------------------------------------------------------
        j = job_fifo.source
        p_ctx = Signal(P.CTX_BITS)
        p_dst_node = Signal(P.NODE_BITS)
        p_dst_ctx = Signal(P.CTX_BITS)
        p_type = Signal(3)
        p_tag = Signal(64)
        remaining = Signal(len_bits)
        first_pkt = Signal()
        plen = Signal(max=mtu + 1)
        kwords = Signal(max=mtu // 8 + 1)
        need = Signal(cnt_bits)
        need_full = Signal(cnt_bits)
        no_prev = Signal()
        words_left = Signal(max=mtu // 8 + 1)
        hw0 = Signal(64)
        last_pkt = Signal()
        self.comb += [
            plen.eq(mtu),
            If(remaining < mtu, plen.eq(remaining)),
            kwords.eq(payload_words(plen)),
            no_prev.eq(~ra.have_prev),
            need_full.eq(kwords + no_prev),
            need.eq(Mux(ra.in_left < need_full, ra.in_left, need_full)),
            last_pkt.eq(remaining == plen),
            hdr(hw0, "dst_node").eq(p_dst_node),
            hdr(hw0, "src_node").eq(self.node_id),
            hdr(hw0, "dst_ctx").eq(p_dst_ctx),
            hdr(hw0, "src_ctx").eq(p_ctx),
            hdr(hw0, "type").eq(p_type),
            hdr(hw0, "length").eq(plen),
            hdr(hw0, "flags").eq(Cat(first_pkt, last_pkt)),
            st.tx_fin.ctx.eq(p_ctx),
            ra.shift.eq(j.shift),
            ra.n_in.eq(Mux_(j.length != 0, payload_words(j.shift + j.length))),
            ra.n_out.eq(payload_words(j.length)),
            ra.tail_bytes.eq(j.length[:3]),
        ]
        assert int(P.Flags.SOM) == 1 and int(P.Flags.EOM) == 2
        self.submodules.pfsm = pfsm = FSM(reset_state="IDLE")
        pfsm.act("IDLE",
            j.ready.eq(1),
            If(j.valid,
                NextValue(p_ctx, j.ctx),
                NextValue(p_dst_node, j.dst_node),
                NextValue(p_dst_ctx, j.dst_ctx),
                NextValue(p_type, j.type),
                NextValue(p_tag, j.tag),
                NextValue(remaining, j.length),
                NextValue(first_pkt, 1),
                If(~j.ok,
                    NextState("REFUSE"),
                ).Else(
                    ra.start.eq(1),
                    NextState("WAIT"),
                ),
            ),
        )
        pfsm.act("REFUSE",
            st.tx_fin.stb.eq(1),
            st.tx_fin.data.eq(1),
            NextState("IDLE"),
        )
        pfsm.act("WAIT",
            If(data_fifo.level >= need, NextState("H0")),
        )
        xfer = source.valid & source.ready

        def end_of_packet():
            return [
                self.packet.eq(1),
                NextValue(remaining, remaining - plen),
                NextValue(first_pkt, 0),
                If(last_pkt,
                    st.tx_fin.stb.eq(1),
                    NextState("IDLE"),
                ).Else(
                    NextState("WAIT"),
                ),
            ]

        pfsm.act("H0",
            source.valid.eq(1),
            source.first.eq(1),
            source.data.eq(hw0),
            If(xfer, NextState("H1")),
        )
        pfsm.act("H1",
            source.valid.eq(1),
            source.data.eq(p_tag),
            source.last.eq(plen == 0),
            If(xfer,
                NextValue(words_left, kwords),
                If(plen == 0, *end_of_packet()).Else(NextState("PAY")),
            ),
        )
        pfsm.act("PAY",
            source.valid.eq(ra.source.valid),
            ra.source.ready.eq(source.ready),
            source.data.eq(ra.source.data),
            source.last.eq(words_left == 1),
            If(xfer,
                NextValue(words_left, words_left - 1),
                If(words_left == 1, *end_of_packet()),
            ),
        )
