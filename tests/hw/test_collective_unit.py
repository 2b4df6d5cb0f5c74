"""CollectiveUnit (hw/collective.py) in Migen simulation, its core the simulator's
(CollectiveExternal: the testbench plays the kernel's side of the streams): commands of the
owning context reach the kernel with exactly ceil(nbytes/8) vector words (padded or cut,
BAD_ARGS set when the packet's length disagrees); other contexts, an unowned or disabled
unit (the first context to send a command owns it), are answered with `refused`; results become packets to the owner; the kernel's
network words become framed packets; ejected packets are dropped while disabled."""

from __future__ import annotations

from migen.sim import run_simulation

from paranic.hw.collective import CollectiveExternal, CollectiveUnit
from paranic.spec import kernels as K
from paranic.spec import protocol as P

COLL = int(P.PacketType.COLLECTIVE)


def command(ctx: int, h: int, vector: list[int], length: int | None = None) -> list[int]:
    """A host packet: two header words (src_ctx as the NIC stamps it), h, the vector."""
    length = 8 * (1 + len(vector)) if length is None else length
    w0, w1 = P.header_words(dst_node=0, src_ctx=ctx, type=COLL, length=length, flags=3)
    return [w0, w1, h, *vector]


def run(packets=(), results=(), net_words=(), net_packets=(), owner=None, enable=1, cycles=400):
    """Drive the unit; return what the kernel side saw on host_in/net_in and what left
    host_source/net_source (as (word, first, last))."""
    core = CollectiveExternal()
    dut = CollectiveUnit(core)
    seen = {"host_in": [], "net_in": [], "host": [], "net": []}

    def send(ep, pkts):
        for pkt in pkts:
            for i, w in enumerate(pkt):
                yield ep.valid.eq(1)
                yield ep.data.eq(w)
                yield ep.first.eq(i == 0)
                yield ep.last.eq(i == len(pkt) - 1)
                yield
                while not (yield ep.ready):
                    yield
            yield ep.valid.eq(0)

    def host():
        yield dut.enable.eq(enable)
        if owner is not None:   # as if `owner` had sent the first command
            yield dut.owned.eq(1)
            yield dut.ctx.eq(owner)
        yield dut.node_id.eq(5)
        yield
        yield from send(dut.host_sink, packets)

    def net():
        yield
        yield
        yield from send(dut.net_sink, net_packets)

    def kernel_out(ep, words):
        for w in words:
            yield ep.valid.eq(1)
            yield ep.data.eq(w)
            yield
            while not (yield ep.ready):
                yield
        yield ep.valid.eq(0)

    def watch():
        yield core.host_in.ready.eq(1)
        yield core.net_in.ready.eq(1)
        yield dut.host_source.ready.eq(1)
        yield dut.net_source.ready.eq(1)
        for _ in range(cycles):
            for name, ep in (("host_in", core.host_in), ("net_in", core.net_in)):
                if (yield ep.valid):
                    seen[name].append((yield ep.data))
            for name, ep in (("host", dut.host_source), ("net", dut.net_source)):
                if (yield ep.valid):
                    seen[name].append(((yield ep.data), (yield ep.first), (yield ep.last)))
            yield

    run_simulation(dut, [host(), net(), kernel_out(core.host_out, results), kernel_out(core.net_out, net_words),
                         watch()])
    return seen, dut


def hdr(nbytes: int, **kw) -> int:
    return K.pack_coll(op=int(K.CollOp.ALLREDUCE), dtype=int(K.CollType.I64), nbytes=nbytes, nodes=4, episode=9, **kw)


def test_owner_command_reaches_kernel():
    h = hdr(16)
    seen, _ = run(packets=[command(1, h, [11, 22])])
    assert seen["host_in"] == [h, 11, 22]
    assert seen["host"] == []


def test_length_disagreeing_with_nbytes_is_padded_or_cut_with_bad_args():
    short, long_ = hdr(24), hdr(8)
    seen, _ = run(packets=[command(1, short, [1]), command(1, long_, [7, 8, 9]), command(1, hdr(0), [])])
    bad = lambda h: h | (int(K.CollErr.BAD_ARGS) << K.COLL_FIELD["err"].offset)   # noqa: E731
    assert seen["host_in"] == [bad(short), 1, 0, 0, bad(long_), 7, hdr(0)]


def test_nbytes_511_gives_64_words():
    """nbytes + 7 must not wrap in nbytes' 9 bits: 511 bytes are 64 words."""
    h = hdr(511)
    seen, _ = run(packets=[command(1, h, list(range(64)))], cycles=300)
    assert seen["host_in"] == [h, *range(64)]


def refusal(h: int, ctx: int) -> list[tuple[int, int, int]]:
    w0, w1 = P.header_words(dst_node=5, src_node=5, dst_ctx=ctx, src_ctx=ctx, type=COLL, length=8, flags=3)
    r = K.unpack_coll(h)
    r.update(phase=int(K.CollPhase.DOWN), nodata=1, refused=1)
    return [(w0, 1, 0), (w1, 0, 0), (K.pack_coll(**r), 0, 1)]


def test_first_command_owns_the_unit_others_are_refused():
    """The first context to send a command owns the unit: later commands of another
    context are refused; a disabled unit refuses everybody and has no owner."""
    h = hdr(8)
    seen, dut = run(packets=[command(3, h, [3]), command(1, h, [4]), command(3, h, [5])])
    assert seen["host_in"] == [h, 3, h, 5] and seen["host"] == refusal(h, 1)
    seen, _ = run(packets=[command(1, h, [3])], owner=2)
    assert seen["host_in"] == [] and seen["host"] == refusal(h, 1)
    seen, _ = run(packets=[command(1, h, [3])], enable=0)
    assert seen["host_in"] == [] and seen["host"] == refusal(h, 1)


def test_results_are_packets_to_the_owner():
    res = hdr(16, phase=1)
    done = hdr(16, phase=1, nodata=1)
    seen, _ = run(results=[res, 0xAA, 0xBB, done], owner=7)
    w0, w1 = P.header_words(dst_node=5, src_node=5, dst_ctx=7, src_ctx=7, type=COLL, length=24, flags=3)
    v0, v1 = P.header_words(dst_node=5, src_node=5, dst_ctx=7, src_ctx=7, type=COLL, length=8, flags=3)
    assert seen["host"] == [(w0, 1, 0), (w1, 0, 0), (res, 0, 0), (0xAA, 0, 0), (0xBB, 0, 1),
                            (v0, 1, 0), (v1, 0, 0), (done, 0, 1)]


def test_network_words_are_framed_and_ejected_packets_reach_the_kernel():
    a0, a1 = P.header_words(dst_node=2, src_node=5, type=COLL, length=16, flags=3)
    b0, b1 = P.header_words(dst_node=3, src_node=5, type=COLL, length=8, flags=3)
    words = [a0, a1, hdr(8), 0x55, b0, b1, hdr(0)]
    seen, _ = run(net_words=words, net_packets=[[a0, a1, hdr(8), 0x55]])
    assert seen["net"] == [(a0, 1, 0), (a1, 0, 0), (hdr(8), 0, 0), (0x55, 0, 1),
                           (b0, 1, 0), (b1, 0, 0), (hdr(0), 0, 1)]
    assert seen["net_in"] == [a0, a1, hdr(8), 0x55]


def test_disabled_unit_drops_ejected_packets():
    a0, a1 = P.header_words(dst_node=5, src_node=2, type=COLL, length=8, flags=3)
    seen, dut = run(net_packets=[[a0, a1, hdr(0)]], enable=0)
    assert seen["net_in"] == []
