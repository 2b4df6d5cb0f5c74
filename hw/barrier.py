"""Hardware barrier: a combining tree over node ids, or all-to-all arrivals for small jobs.

One call from software: a context writes its ``BARRIER`` doorbell (the host interface
turns it into an ``enter`` pulse); when every participating node has entered, the
unit pulses ``done`` once for each context of this node that took part, and the host
interface bumps that context's ``barrier_done`` counter in its host-memory status block.

The combining tree is the implicit k-ary heap over node ids ``0 .. nodes-1`` with
``k = 2**radix_log2``::

    parent(i)   = (i - 1) >> radix_log2             (i > 0; node 0 is the root)
    children(i) = (i << radix_log2) + 1 + j          (0 <= j < k, child < nodes)

A node sends *arrive* (``PacketType.BARRIER``, no ``BAR_RELEASE``, ``tag`` = episode
number) to its parent once its own host has entered and all its children have
arrived; the root, when complete, sends *release* (``BAR_RELEASE``) to its children
and completes; any other node, on release, forwards it to its children and completes.
Both are header-only packets (two words, ``length`` 0).

With ``mode`` = 1 (:data:`MODE_A2A`, all-to-all, for jobs of at most ``max_a2a_nodes``
nodes) there is no tree: a node whose host has entered sends one arrive to every other
node ``0 .. nodes-1`` (order: :func:`a2a_order`, farthest ids first) and completes when
it has heard the arrive of every other node of this episode. No releases; an episode
costs one network diameter instead of two tree depths.

Blocks (one concern each, plain Signals as interfaces):

* :class:`BarrierTree` -- parent / children of this node, computed arithmetically.
* :class:`BarrierRx`   -- parses and checks received barrier packets (never stalls).
* :class:`BarrierTx`   -- builds arrive / release packets from level requests.
* :class:`BarrierDone` -- turns a mask of completed contexts into ``done`` pulses.
* :class:`BarrierPeers` -- all-to-all: effective mode, peer mask, first destination.
* :class:`BarrierSweepTx` -- all-to-all: one arrive to every peer, farthest first.
* :class:`BarrierArrivals` -- all-to-all: who has been heard, this and the next episode.
* :class:`BarrierUnit` -- the episode state machine joining them, plus counters and
  :meth:`BarrierUnit.add_csrs`.

``docs/architecture.md`` (section "Barrier") describes behaviour, latency and CSRs.
"""

from __future__ import annotations

from migen import Case, If, Mux, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage

from paranic.spec import protocol as P
from paranic.hw.common import hdr, packet_layout

#: Default tree fan-out exponent: 4 children per node (see docs: fewer tree levels,
#: each costing a full network traversal, outweigh 2 more header-only packets to
#: serialise per level).
DEFAULT_RADIX_LOG2 = 2
#: Largest ``radix_log2`` the hardware supports by default (children mask width 2**this):
#: fan-out 8 can be configured at run time for large clusters on slow links.
DEFAULT_MAX_RADIX_LOG2 = 3
#: Largest job (``nodes``) the all-to-all mode supports by default: the arrival masks
#: are ``2 x max_a2a_nodes`` flip-flops; a larger job runs the tree whatever ``mode`` says.
DEFAULT_MAX_A2A_NODES = 32
#: ``mode`` values.
MODE_TREE = 0
MODE_A2A = 1
#: Width of the episode counter (and of the ``tag`` compare; the tag's upper bits must be 0).
EPISODE_BITS = 32
COUNTER_BITS = 32


# ---------------------------------------------------------------------------
# Reference model of the tree (used by tests, the simulator and documentation)
# ---------------------------------------------------------------------------


def tree_parent(i: int, radix_log2: int) -> int | None:
    """Parent of node ``i`` in the combining tree; ``None`` for the root."""
    return None if i == 0 else (i - 1) >> radix_log2


def tree_children(i: int, nodes: int, radix_log2: int) -> list[int]:
    """Children of node ``i`` among nodes ``0 .. nodes-1``."""
    if i >= nodes:
        return []
    first = (i << radix_log2) + 1
    return [c for c in range(first, first + (1 << radix_log2)) if c < nodes]


def tree_depth(nodes: int, radix_log2: int) -> int:
    """Number of tree levels below the root (0 for a single node)."""
    depth, last = 0, 0
    while last < nodes - 1:
        last = (last << radix_log2) + (1 << radix_log2)  # last node of the next level
        depth += 1
    return depth


def a2a_order(i: int, nodes: int) -> list[int]:
    """The destinations of node ``i``'s all-to-all arrives, in send order.

    Starts at ``(i + nodes // 2) mod nodes``, the id farthest away on a ring, then
    alternates outwards: one above, one below, two above, two below ... (mod
    ``nodes``), so the ring distance never grows along the sequence and the nearest
    neighbours go last: the packets with the longest way go first and all arrive
    about together. On a torus (ids row-major) the same arithmetic is only roughly
    farthest-first (docs/architecture.md). ``[]`` for ``nodes`` <= 1 or a non-member.
    """
    if not 0 <= i < nodes or nodes < 2:
        return []
    start = (i + nodes // 2) % nodes
    out, up, dn = [start], start, start
    for k in range(1, nodes - 1):
        if k % 2:
            up = (up + 1) % nodes
            out.append(up)
        else:
            dn = (dn - 1) % nodes
            out.append(dn)
    return out


# ---------------------------------------------------------------------------
# Blocks
# ---------------------------------------------------------------------------


def _barrier_header(w0: Signal, dst, src, release) -> list:
    """Comb statements: ``w0`` = word 0 of a header-only barrier packet."""
    return [
        hdr(w0, "dst_node").eq(dst),
        hdr(w0, "src_node").eq(src),
        hdr(w0, "type").eq(P.PacketType.BARRIER),
        hdr(w0, "flags").eq(Mux(release, P.Flags.BAR_RELEASE, 0)),
    ]


class BarrierTree(LiteXModule):
    """This node's place in the combining tree (registered: one cycle after a config change).

    Inputs ``node_id``, ``nodes``, ``radix_log2`` (clamped to ``max_radix_log2``).
    Outputs ``member`` (node_id < nodes), ``is_root`` (node 0, or not a member: such
    a node has no parent and no children, so its barrier is local), ``parent``,
    ``first_child`` and ``kids_valid`` (bit ``j``: child ``first_child + j`` exists).
    """

    def __init__(self, max_radix_log2: int = DEFAULT_MAX_RADIX_LOG2) -> None:
        fanout = 1 << max_radix_log2
        self.node_id = Signal(P.NODE_BITS)
        self.nodes = Signal(P.NODE_BITS + 1)
        self.radix_log2 = Signal(max(1, (max_radix_log2).bit_length()))

        self.member = Signal()
        self.is_root = Signal(reset=1)
        self.parent = Signal(P.NODE_BITS)
        self.first_child = Signal(P.NODE_BITS + max_radix_log2 + 1)
        self.kids_valid = Signal(fanout)

        # # #

        r = Signal(max=max_radix_log2 + 1)
        self.comb += If(self.radix_log2 > max_radix_log2, r.eq(max_radix_log2)).Else(
            r.eq(self.radix_log2))
        id_m1 = Signal(P.NODE_BITS)
        parent = Signal(P.NODE_BITS)
        first = Signal(len(self.first_child))
        arity = Signal(fanout.bit_length())
        self.comb += id_m1.eq(self.node_id - 1)
        self.comb += Case(r, {k: [parent.eq(id_m1 >> k),
                                  first.eq((self.node_id << k) + 1),
                                  arity.eq(1 << k)]
                              for k in range(max_radix_log2 + 1)})
        member = Signal()
        self.comb += member.eq(self.node_id < self.nodes)
        self.sync += [
            self.member.eq(member),
            self.is_root.eq((self.node_id == 0) | ~member),
            self.parent.eq(parent),
            self.first_child.eq(first),
        ]
        for j in range(fanout):
            self.sync += self.kids_valid[j].eq(member & (j < arity) & (first + j < self.nodes))


class BarrierRx(LiteXModule):
    """Parses barrier packets from ``sink`` (always ready: it never back-pressures the router).

    On the last beat of every packet it raises, for that cycle, either ``ev_valid``
    (a well-formed barrier packet: 2 words, type BARRIER, length 0, dst_node == node_id,
    no ``error``) with ``ev_src``, ``ev_release``, ``ev_tag``, or ``ev_bad`` (anything
    else: short, with payload, wrong type/length/destination, errored; dropped).
    Beats are counted from ``last`` to ``last``; ``first`` restarts the count.
    """

    def __init__(self) -> None:
        self.sink = stream.Endpoint(packet_layout())
        self.node_id = Signal(P.NODE_BITS)

        self.ev_valid = Signal()
        self.ev_bad = Signal()
        self.ev_src = Signal(P.NODE_BITS)
        self.ev_release = Signal()
        self.ev_tag = Signal(P.WORD_BITS)

        # # #

        sink = self.sink
        beat = Signal(2)       # 0: header word 0, 1: tag word, 2: payload (saturates)
        cur = Signal(2)
        w0_ok = Signal()       # word 0 passed its checks
        self.comb += [
            sink.ready.eq(1),
            cur.eq(Mux(sink.first, 0, beat)),
        ]
        w0 = sink.data
        self.sync += If(sink.valid,
            If(cur == 0,
                w0_ok.eq((hdr(w0, "type") == P.PacketType.BARRIER) & (hdr(w0, "length") == 0) &
                         (hdr(w0, "dst_node") == self.node_id)),
                self.ev_src.eq(hdr(w0, "src_node")),
                self.ev_release.eq((hdr(w0, "flags") & P.Flags.BAR_RELEASE) != 0),
            ),
            If(sink.last, beat.eq(0)).Elif(cur != 2, beat.eq(cur + 1)).Else(beat.eq(2)),
        )
        end = Signal()
        self.comb += [
            end.eq(sink.valid & sink.last),
            self.ev_tag.eq(sink.data),
            self.ev_valid.eq(end & (cur == 1) & w0_ok & ~sink.error),
            self.ev_bad.eq(end & ~self.ev_valid),
        ]


class BarrierTx(LiteXModule):
    """Builds header-only barrier packets on ``source``.

    Requests are levels, merged into pending bits (so a request never waits or is
    lost): ``arr_req`` (+ ``arr_tag``) asks for one arrive to ``parent``; ``rel_req``
    (+ ``rel_mask``, ``rel_tag``) for a release to each child ``first_child + j`` with
    bit ``j`` set. Pending releases go before a pending arrive (they are older).
    A request is loaded in the cycle it is made when the source is free, and packets
    go back to back (2 cycles each) while ``source.ready``. ``clear`` drops pending
    requests (a packet already started is finished). ``sent`` pulses once per packet.
    """

    def __init__(self, max_radix_log2: int = DEFAULT_MAX_RADIX_LOG2) -> None:
        fanout = 1 << max_radix_log2
        self.source = stream.Endpoint(packet_layout())
        self.node_id = Signal(P.NODE_BITS)
        self.parent = Signal(P.NODE_BITS)
        self.first_child = Signal(P.NODE_BITS + max_radix_log2 + 1)
        self.arr_req = Signal()
        self.arr_tag = Signal(P.WORD_BITS)
        self.rel_req = Signal()
        self.rel_mask = Signal(fanout)
        self.rel_tag = Signal(P.WORD_BITS)
        self.clear = Signal()
        self.sent = Signal()
        self.idle = Signal()

        # # #

        arr_pend = Signal()
        arr_tag = Signal(P.WORD_BITS)
        rel_pend = Signal(fanout)
        rel_tag = Signal(P.WORD_BITS)
        # Pending requests including this cycle's.
        arr_eff = Signal()
        arr_tag_eff = Signal(P.WORD_BITS)
        rel_eff = Signal(fanout)
        rel_tag_eff = Signal(P.WORD_BITS)
        self.comb += [
            arr_eff.eq(arr_pend | self.arr_req),
            arr_tag_eff.eq(Mux(self.arr_req, self.arr_tag, arr_tag)),
            rel_eff.eq(rel_pend | Mux(self.rel_req, self.rel_mask, 0)),
            rel_tag_eff.eq(Mux(self.rel_req, self.rel_tag, rel_tag)),
        ]
        # Lowest pending child.
        sel = Signal(max=max(2, fanout))
        for j in reversed(range(fanout)):
            self.comb += If(rel_eff[j], sel.eq(j))
        sel_oh = Signal(fanout)
        self.comb += sel_oh.eq(Mux(rel_eff != 0, 1 << sel, 0))

        busy = Signal()
        beat = Signal()
        dst = Signal(P.NODE_BITS)
        release = Signal()
        tag = Signal(P.WORD_BITS)
        load = Signal()
        self.comb += [
            load.eq(~self.clear & (arr_eff | (rel_eff != 0)) &
                    (~busy | (self.source.ready & beat))),
            self.idle.eq(~busy & ~arr_pend & (rel_pend == 0)),
            self.sent.eq(busy & beat & self.source.ready),
        ]
        self.sync += [
            If(self.clear,
                arr_pend.eq(0), rel_pend.eq(0),
            ).Elif(load,
                If(rel_eff != 0,
                    rel_pend.eq(rel_eff & ~sel_oh), arr_pend.eq(arr_eff),
                    dst.eq(self.first_child + sel), release.eq(1), tag.eq(rel_tag_eff),
                ).Else(
                    rel_pend.eq(rel_eff), arr_pend.eq(0),
                    dst.eq(self.parent), release.eq(0), tag.eq(arr_tag_eff),
                ),
            ).Else(
                arr_pend.eq(arr_eff), rel_pend.eq(rel_eff),
            ),
            If(self.arr_req, arr_tag.eq(self.arr_tag)),
            If(self.rel_req, rel_tag.eq(self.rel_tag)),
            If(load,
                busy.eq(1), beat.eq(0),
            ).Elif(busy & self.source.ready,
                If(beat, busy.eq(0)).Else(beat.eq(1)),
            ),
        ]
        w0 = Signal(P.WORD_BITS)
        self.comb += _barrier_header(w0, dst, self.node_id, release)
        self.comb += [
            self.source.valid.eq(busy),
            self.source.first.eq(~beat),
            self.source.last.eq(beat),
            self.source.data.eq(Mux(beat, tag, w0)),
        ]


class BarrierDone(LiteXModule):
    """Turns completed-context masks (``add``) into ``done``/``done_ctx`` pulses, one a cycle,
    lowest context first. ``pending`` is the mask still to be announced."""

    def __init__(self, n_ctx: int) -> None:
        self.add = Signal(n_ctx)
        self.pending = Signal(n_ctx)
        self.done = Signal()
        self.done_ctx = Signal(P.CTX_BITS)

        # # #

        for c in reversed(range(n_ctx)):
            self.comb += If(self.pending[c], self.done_ctx.eq(c))
        self.comb += self.done.eq(self.pending != 0)
        oh = Signal(n_ctx)
        self.comb += If(self.done, oh.eq(1 << self.done_ctx))
        self.sync += self.pending.eq((self.pending & ~oh) | self.add)


class BarrierPeers(LiteXModule):
    """This node's all-to-all peers (registered: one cycle after a config change).

    Inputs ``node_id``, ``nodes``, ``mode``. Outputs ``a2a`` (all-to-all in effect:
    ``mode`` is :data:`MODE_A2A` and ``nodes <= max_nodes``; otherwise the tree
    runs), ``peers`` (bit ``j``: node ``j`` is another member, ``j < nodes``, ``j !=
    node_id``; 0 for a non-member), ``count`` (arrives to send per episode: ``nodes-1``,
    0 for a non-member) and ``first`` (the first destination, ``(node_id + nodes//2)
    mod nodes``, see :func:`a2a_order`).
    """

    def __init__(self, max_nodes: int = DEFAULT_MAX_A2A_NODES) -> None:
        self.node_id = Signal(P.NODE_BITS)
        self.nodes = Signal(P.NODE_BITS + 1)
        self.mode = Signal()

        self.a2a = Signal()
        self.peers = Signal(max_nodes)
        self.count = Signal(P.NODE_BITS + 1)
        self.first = Signal(P.NODE_BITS)

        # # #

        member = Signal()
        half = Signal(P.NODE_BITS + 1)
        mid = Signal(P.NODE_BITS + 2)
        self.comb += [
            member.eq(self.node_id < self.nodes),
            half.eq(self.nodes >> 1),
            mid.eq(self.node_id + half),
        ]
        self.sync += [
            self.a2a.eq((self.mode == MODE_A2A) & (self.nodes <= max_nodes)),
            self.count.eq(Mux(member, self.nodes - 1, 0)),
            self.first.eq(Mux(mid >= self.nodes, mid - self.nodes, mid)),
        ]
        for j in range(max_nodes):
            self.sync += self.peers[j].eq(member & (j < self.nodes) & (self.node_id != j))


class BarrierSweepTx(LiteXModule):
    """All-to-all arrives: on ``start`` (accepted only while ``idle``; ``count`` > 0),
    ``count`` header-only arrive packets with tag ``tag`` (sampled at ``start``), to
    ``first``, then alternately one above and one below the ids sent so far, modulo
    ``nodes`` (the order of :func:`a2a_order`). The first packet's words leave 1 and 2
    cycles after ``start``; packets go back to back (2 cycles each) while
    ``source.ready``. ``clear`` ends the sweep after the packet already loaded.
    ``sent`` pulses once per packet.
    """

    def __init__(self) -> None:
        self.source = stream.Endpoint(packet_layout())
        self.node_id = Signal(P.NODE_BITS)
        self.nodes = Signal(P.NODE_BITS + 1)
        self.first = Signal(P.NODE_BITS)
        self.count = Signal(P.NODE_BITS + 1)
        self.start = Signal()
        self.tag = Signal(P.WORD_BITS)
        self.clear = Signal()
        self.sent = Signal()
        self.idle = Signal()

        # # #

        busy = Signal()
        beat = Signal()
        left = Signal(P.NODE_BITS + 1)   # packets still to load after the current one
        dst = Signal(P.NODE_BITS)
        up = Signal(P.NODE_BITS)         # highest id (mod nodes) loaded so far
        dn = Signal(P.NODE_BITS)         # lowest id (mod nodes) loaded so far
        down = Signal()                  # the next packet goes below
        tag = Signal(P.WORD_BITS)
        up_next = Signal(P.NODE_BITS + 1)
        dn_next = Signal(P.NODE_BITS + 1)
        self.comb += [
            up_next.eq(Mux(up + 1 >= self.nodes, 0, up + 1)),
            dn_next.eq(Mux(dn == 0, self.nodes - 1, dn - 1)),
            self.sent.eq(busy & beat & self.source.ready),
            self.idle.eq(~busy),
        ]
        self.sync += [
            If(self.start & ~busy & ~self.clear & (self.count != 0),
                busy.eq(1), beat.eq(0), left.eq(self.count - 1), tag.eq(self.tag),
                dst.eq(self.first), up.eq(self.first), dn.eq(self.first), down.eq(0),
            ).Elif(self.sent,
                beat.eq(0),
                If(self.clear | (left == 0),
                    busy.eq(0), left.eq(0),
                ).Else(
                    left.eq(left - 1), down.eq(~down),
                    If(down,
                        dst.eq(dn_next), dn.eq(dn_next),
                    ).Else(
                        dst.eq(up_next), up.eq(up_next),
                    ),
                ),
            ).Elif(busy & self.source.ready,
                beat.eq(1),
            ),
        ]
        w0 = Signal(P.WORD_BITS)
        self.comb += _barrier_header(w0, dst, self.node_id, 0)
        self.comb += [
            self.source.valid.eq(busy),
            self.source.first.eq(~beat),
            self.source.last.eq(beat),
            self.source.data.eq(Mux(beat, tag, w0)),
        ]


class BarrierArrivals(LiteXModule):
    """All-to-all bookkeeping: which peers' arrives were heard, for the current episode
    ``episode`` (mask ``cur``) and the next one (mask ``nxt``).

    Event ``ev`` (a well-formed arrive, all-to-all in effect) with ``ev_src``,
    ``ev_tag``: accepted (``ok``) when ``ev_src`` is in ``peers``, the tag is
    ``episode`` or ``episode + 1`` (32-bit wrap) and that peer's bit in that mask is
    still clear; anything else is left to the caller to count as a protocol error.
    ``advance`` (the node completes): ``nxt`` (with this cycle's next-episode arrive)
    becomes ``cur``, ``nxt`` is cleared. ``clear`` empties both. ``all_heard``:
    ``cur``, with this cycle's arrive, covers ``peers`` (so the node can complete in
    the cycle the last arrive's last word comes in, as a tree node on its release).

    Why two masks are enough (node ``i`` in episode ``e``, i.e. it completed ``e``
    episodes since ``enable``, every node configured alike, each packet delivered
    exactly once; per-pair order is *not* needed):

    * no arrive tagged ``e + 2`` or later can reach ``i``: a peer ``j`` sends its
      ``e + 2`` arrives only in its episode ``e + 2``, i.e. after completing ``e + 1``,
      which needs ``i``'s ``e + 1`` arrive; ``i`` sends that only in its episode
      ``e + 1`` (a sweep carries the sender's episode when it starts, and starts at
      most once per episode), i.e. after ``i`` left ``e``.
    * no arrive tagged ``e - 1`` or earlier is still on its way: ``i`` completed
      ``e - 1`` only after hearing ``e - 1`` from every peer, each peer sends ``i``
      exactly one ``e - 1`` arrive, and duplicates are refused by the mask.

    So every legitimate arrive ``i`` can receive is tagged ``e`` or ``e + 1``; nothing
    is lost (a fast peer's next-episode arrive waits in ``nxt``) or counted twice.
    """

    def __init__(self, max_nodes: int = DEFAULT_MAX_A2A_NODES) -> None:
        self.peers = Signal(max_nodes)
        self.episode = Signal(EPISODE_BITS)
        self.ev = Signal()
        self.ev_src = Signal(P.NODE_BITS)
        self.ev_tag = Signal(P.WORD_BITS)
        self.advance = Signal()
        self.clear = Signal()

        self.ok = Signal()
        self.all_heard = Signal()
        self.cur = Signal(max_nodes)
        self.nxt = Signal(max_nodes)

        # # #

        ep_next = Signal(EPISODE_BITS)
        src_oh = Signal(max_nodes)
        is_peer = Signal()
        hit_cur = Signal()
        hit_nxt = Signal()
        self.comb += [
            ep_next.eq(self.episode + 1),
            src_oh.eq(Mux(self.ev_src < max_nodes,
                          1 << self.ev_src[:max(1, (max_nodes - 1).bit_length())], 0)),
            is_peer.eq((self.peers & src_oh) != 0),
            hit_cur.eq(self.ev & is_peer & (self.ev_tag == self.episode) &
                       ((self.cur & src_oh) == 0)),
            hit_nxt.eq(self.ev & is_peer & (self.ev_tag == ep_next) &
                       ((self.nxt & src_oh) == 0)),
            self.ok.eq(hit_cur | hit_nxt),
            self.all_heard.eq(((self.cur | Mux(hit_cur, src_oh, 0)) & self.peers) == self.peers),
        ]
        self.sync += [
            If(self.clear,
                self.cur.eq(0), self.nxt.eq(0),
            ).Elif(self.advance,
                self.cur.eq(self.nxt | Mux(hit_nxt, src_oh, 0)),
                self.nxt.eq(0),
            ).Else(
                self.cur.eq(self.cur | Mux(hit_cur, src_oh, 0)),
                self.nxt.eq(self.nxt | Mux(hit_nxt, src_oh, 0)),
            ),
        ]


# ---------------------------------------------------------------------------
# The unit
# ---------------------------------------------------------------------------


class BarrierUnit(LiteXModule):
    """Hardware barrier unit of one node.

    Parameters: ``n_ctx`` hardware contexts; ``radix_log2`` reset value of the tree
    fan-out exponent; ``max_radix_log2`` the largest fan-out exponent supported (the
    children mask is ``2**max_radix_log2`` bits); ``mode`` reset value of the mode;
    ``max_a2a_nodes`` the largest job the all-to-all mode serves (its arrival masks
    are this wide).

    Inputs: ``node_id``; configuration ``nodes`` (participating nodes 0..nodes-1,
    reset 1), ``radix_log2``, ``mode`` (:data:`MODE_TREE` or :data:`MODE_A2A`;
    all-to-all only takes effect for ``nodes <= max_a2a_nodes``), ``enable`` (reset 1;
    0 holds the episode state in reset), ``participants`` (mask of contexts that must
    all enter before the node counts as entered; 0, the reset value, means any one
    context). ``enter`` +
    ``enter_ctx``: a context's BARRIER doorbell (one-cycle pulse).
    Outputs: ``done`` + ``done_ctx`` (one pulse per completed context), ``source``.
    Input stream ``sink``: BARRIER packets ejected by the router for this node.
    Counters (32 bit, wrap): ``episodes``, ``tx_packets``, ``rx_packets``,
    ``err_format``, ``err_protocol``, ``enter_merged``, ``enter_dropped``.

    ``with_sync_line`` (default off; without it the unit is exactly the packet barrier)
    adds a third completion path, a wired-AND sync line (:class:`paranic.hw.phy.syncline.
    SyncLine`): while ``use_line`` (config, reset 0) is set, a node whose host entered
    pulses ``line_arrive`` instead of sending packets and completes on ``line_done``.
    Every board on the line takes part, so ``nodes``/``radix_log2``/``mode`` do not apply.
    """

    COUNTERS = ("episodes", "tx_packets", "rx_packets", "err_format", "err_protocol",
                "enter_merged", "enter_dropped")

    def __init__(self, n_ctx: int = P.DEFAULT_CONTEXTS, radix_log2: int = DEFAULT_RADIX_LOG2,
                 max_radix_log2: int = DEFAULT_MAX_RADIX_LOG2, mode: int = MODE_TREE,
                 max_a2a_nodes: int = DEFAULT_MAX_A2A_NODES, with_sync_line: bool = False) -> None:
        if not 1 <= n_ctx <= P.MAX_CONTEXTS:
            raise ValueError(f"n_ctx {n_ctx} not in 1..{P.MAX_CONTEXTS}")
        if not 0 <= radix_log2 <= max_radix_log2:
            raise ValueError(f"radix_log2 {radix_log2} not in 0..{max_radix_log2}")
        if mode not in (MODE_TREE, MODE_A2A):
            raise ValueError(f"mode {mode} not {MODE_TREE} (tree) or {MODE_A2A} (all-to-all)")
        if not 1 <= max_a2a_nodes <= P.MAX_NODES:
            raise ValueError(f"max_a2a_nodes {max_a2a_nodes} not in 1..{P.MAX_NODES}")
        self.n_ctx = n_ctx
        self.max_radix_log2 = max_radix_log2
        self.max_a2a_nodes = max_a2a_nodes
        self.with_sync_line = with_sync_line
        fanout = 1 << max_radix_log2

        self.node_id = Signal(P.NODE_BITS)
        self.nodes = Signal(P.NODE_BITS + 1, reset=1)
        self.radix_log2 = Signal(max(1, max_radix_log2.bit_length()), reset=radix_log2)
        self.mode = Signal(reset=mode)
        self.enable = Signal(reset=1)
        self.participants = Signal(n_ctx)

        self.enter = Signal()
        self.enter_ctx = Signal(P.CTX_BITS)
        self.done = Signal()
        self.done_ctx = Signal(P.CTX_BITS)

        self.sink = stream.Endpoint(packet_layout())
        self.source = stream.Endpoint(packet_layout())

        # State, visible for status CSRs and tests.
        self.episode = Signal(EPISODE_BITS)
        self.cur_mask = Signal(n_ctx)    # contexts in the current episode
        self.next_mask = Signal(n_ctx)   # contexts that entered after our arrive was sent
        self.kids = Signal(fanout)       # children arrived this episode
        self.sent = Signal()             # arrive(s) sent (or being sent), waiting to complete
        for name in self.COUNTERS:
            setattr(self, name, Signal(COUNTER_BITS, name=name))

        # # #

        self.tree = tree = BarrierTree(max_radix_log2)
        self.rx = rx = BarrierRx()
        self.tx = tx = BarrierTx(max_radix_log2)
        self.dn = dn = BarrierDone(n_ctx)
        self.peers = peers = BarrierPeers(max_a2a_nodes)
        self.sweep = sw = BarrierSweepTx()
        self.arrivals = arr = BarrierArrivals(max_a2a_nodes)
        a2a = peers.a2a
        self.comb += [
            tree.node_id.eq(self.node_id), tree.nodes.eq(self.nodes),
            tree.radix_log2.eq(self.radix_log2),
            peers.node_id.eq(self.node_id), peers.nodes.eq(self.nodes), peers.mode.eq(self.mode),
            rx.node_id.eq(self.node_id),
            tx.node_id.eq(self.node_id), tx.parent.eq(tree.parent),
            tx.first_child.eq(tree.first_child),
            sw.node_id.eq(self.node_id), sw.nodes.eq(self.nodes), sw.first.eq(peers.first),
            sw.count.eq(peers.count),
            self.sink.connect(rx.sink),
            # One sender at a time: each starts only while the other is idle (below).
            If(sw.idle, tx.source.connect(self.source)).Else(sw.source.connect(self.source)),
            self.done.eq(dn.done), self.done_ctx.eq(dn.done_ctx),
        ]

        # Enters.
        enter_oh = Signal(n_ctx)
        for c in range(n_ctx):
            self.comb += enter_oh[c].eq(self.enable & self.enter & (self.enter_ctx == c))
        outstanding = Signal(n_ctx)
        enter_new = Signal(n_ctx)
        self.comb += [
            outstanding.eq(self.cur_mask | self.next_mask | dn.pending),
            enter_new.eq(enter_oh & ~outstanding),
        ]

        # Packet paths run unless the sync line is in use (only with with_sync_line).
        pkt_ok = self.enable
        if with_sync_line:
            self.use_line = Signal()
            self.line_arrive = Signal()
            self.line_done = Signal()
            pkt_ok = self.enable & ~self.use_line

        # Received packets.
        tag_ok = Signal()
        kid_off = Signal(len(tree.first_child) + 1)
        is_kid = Signal()
        kid_oh = Signal(fanout)
        from_parent = Signal()
        arrive_ok = Signal()
        release_ok = Signal()
        self.comb += [
            tag_ok.eq(rx.ev_tag == self.episode),
            kid_off.eq(rx.ev_src - tree.first_child),
            is_kid.eq((rx.ev_src >= tree.first_child) & (kid_off < fanout) &
                      (tree.kids_valid >> kid_off)[0]),
            kid_oh.eq(Mux(is_kid, 1 << kid_off[:max(1, max_radix_log2)], 0)),
            from_parent.eq(~tree.is_root & (rx.ev_src == tree.parent)),
            arrive_ok.eq(rx.ev_valid & pkt_ok & ~a2a & ~rx.ev_release & is_kid & tag_ok &
                         ((self.kids & kid_oh) == 0)),
            release_ok.eq(rx.ev_valid & pkt_ok & ~a2a & rx.ev_release & from_parent &
                          self.sent & tag_ok),
            # All-to-all: arrives from peers, this episode or the next (BarrierArrivals).
            arr.peers.eq(peers.peers), arr.episode.eq(self.episode),
            arr.ev.eq(rx.ev_valid & pkt_ok & a2a & ~rx.ev_release),
            arr.ev_src.eq(rx.ev_src), arr.ev_tag.eq(rx.ev_tag),
            arr.clear.eq(~self.enable),
        ]

        # Episode progress.
        local_ok = Signal()
        gathered = Signal()
        complete_tree = Signal()
        send_arrive = Signal()
        start_sweep = Signal()
        complete_a2a = Signal()
        complete = Signal()
        self.comb += [
            local_ok.eq(Mux(self.participants == 0, self.cur_mask != 0,
                            (self.cur_mask & self.participants) == self.participants)),
            # Tree: arrive to the parent once gathered; complete on the release (root: at once).
            gathered.eq(pkt_ok & ~a2a & ~self.sent & local_ok & sw.idle &
                        ((self.kids & tree.kids_valid) == tree.kids_valid)),
            complete_tree.eq((gathered & tree.is_root) | release_ok),
            send_arrive.eq(gathered & ~tree.is_root),
            # All-to-all: the sweep starts once the host entered; complete once every
            # peer was heard (possibly in the cycle the sweep starts: the last to enter).
            start_sweep.eq(pkt_ok & a2a & ~self.sent & local_ok & (peers.count != 0) &
                           sw.idle & tx.idle),
            complete_a2a.eq(pkt_ok & a2a & local_ok & arr.all_heard &
                            (self.sent | start_sweep | (peers.count == 0))),
            tx.arr_req.eq(send_arrive), tx.arr_tag.eq(self.episode),
            tx.rel_req.eq(complete_tree), tx.rel_mask.eq(tree.kids_valid),
            tx.rel_tag.eq(self.episode),
            tx.clear.eq(~self.enable),
            sw.start.eq(start_sweep), sw.tag.eq(self.episode), sw.clear.eq(~self.enable),
            arr.advance.eq(complete_a2a),
            dn.add.eq(Mux(complete, self.cur_mask, 0)),
        ]
        # Sync line: arrive once the host entered, complete when every board has.
        started = send_arrive | start_sweep
        if with_sync_line:
            send_line = Signal()
            complete_line = Signal()
            self.comb += [
                send_line.eq(self.enable & self.use_line & ~self.sent & local_ok),
                complete_line.eq(self.enable & self.use_line & self.sent & self.line_done),
                self.line_arrive.eq(send_line),
                complete.eq(complete_tree | complete_a2a | complete_line),
            ]
            started = started | send_line
        else:
            self.comb += complete.eq(complete_tree | complete_a2a)
        self.sync += [
            If(~self.enable,
                self.episode.eq(0), self.cur_mask.eq(0), self.next_mask.eq(0),
                self.kids.eq(0), self.sent.eq(0),
            ).Elif(complete,
                self.episode.eq(self.episode + 1),
                self.cur_mask.eq(self.next_mask | enter_new),
                self.next_mask.eq(0),
                self.kids.eq(0),
                self.sent.eq(0),
            ).Else(
                If(self.sent,
                    self.next_mask.eq(self.next_mask | enter_new),
                ).Else(
                    self.cur_mask.eq(self.cur_mask | enter_new),
                ),
                self.kids.eq(self.kids | Mux(arrive_ok, kid_oh, 0)),
                If(started, self.sent.eq(1)),
            ),
        ]

        # Counters.
        incs = {
            "episodes": complete,
            "tx_packets": tx.sent | sw.sent,
            "rx_packets": rx.ev_valid | rx.ev_bad,
            "err_format": rx.ev_bad,
            "err_protocol": rx.ev_valid & ~(arrive_ok | release_ok | arr.ok),
            "enter_merged": (enter_oh & outstanding) != 0,
            "enter_dropped": self.enter & (~self.enable | (self.enter_ctx >= n_ctx)),
        }
        for name, inc in incs.items():
            cnt = getattr(self, name)
            self.sync += If(inc, cnt.eq(cnt + 1))

    def add_csrs(self) -> None:
        """Configuration CSRStorages and status/counter CSRStatus registers."""
        self._nodes = CSRStorage(len(self.nodes), reset=self.nodes.reset.value,
            description="Participating nodes (ids 0..nodes-1). Change only while enable=0.")
        self._radix_log2 = CSRStorage(len(self.radix_log2), reset=self.radix_log2.reset.value,
            description=f"Tree fan-out 2**radix_log2 (0..{self.max_radix_log2}). "
                        "Same value on every node; change only while enable=0.")
        self._mode = CSRStorage(1, reset=self.mode.reset.value,
            description=f"{MODE_TREE}: combining tree. {MODE_A2A}: all-to-all arrives (jobs of "
                        f"at most {self.max_a2a_nodes} nodes; larger jobs run the tree). "
                        "Same value on every node; change only while enable=0.")
        self._enable = CSRStorage(1, reset=1,
            description="1: barrier active. 0: episode state held in reset (episode 0); "
                        "enters and received barrier packets are dropped and counted.")
        self._participants = CSRStorage(self.n_ctx, reset=0,
            description="Contexts that must all enter before this node counts as entered; "
                        "0: any one context.")
        if self.with_sync_line:
            self._use_line = CSRStorage(1, reset=0,
                description="1: complete episodes on the wired-AND sync line instead of "
                            "barrier packets. Same value on every node; change only while "
                            "enable=0.")
            self.comb += self.use_line.eq(self._use_line.storage)
        self.comb += [
            self.nodes.eq(self._nodes.storage),
            self.radix_log2.eq(self._radix_log2.storage),
            self.mode.eq(self._mode.storage),
            self.enable.eq(self._enable.storage),
            self.participants.eq(self._participants.storage),
        ]
        self._episode = CSRStatus(EPISODE_BITS, description="Current episode number.")
        fanout = 1 << self.max_radix_log2
        self._state = CSRStatus(fields=[
            CSRField("sent", size=1, description="Arrive(s) sent, waiting to complete."),
            CSRField("member", size=1, description="node_id < nodes."),
            CSRField("root", size=1, description="This node is the tree root (or no member)."),
            CSRField("a2a", size=1, description="All-to-all mode in effect."),
            CSRField("kids_valid", size=fanout, offset=8, description="Children that exist."),
            CSRField("kids", size=fanout, offset=8 + max(8, fanout),
                     description="Children arrived this episode."),
        ])
        self._cur_mask = CSRStatus(self.n_ctx, description="Contexts in the current episode.")
        self._heard = CSRStatus(self.max_a2a_nodes,
            description="All-to-all: nodes heard from in the current episode (bit = node id).")
        self.comb += [
            self._episode.status.eq(self.episode),
            self._state.fields.sent.eq(self.sent),
            self._state.fields.member.eq(self.tree.member),
            self._state.fields.root.eq(self.tree.is_root),
            self._state.fields.a2a.eq(self.peers.a2a),
            self._state.fields.kids_valid.eq(self.tree.kids_valid),
            self._state.fields.kids.eq(self.kids),
            self._cur_mask.status.eq(self.cur_mask),
            self._heard.status.eq(self.arrivals.cur),
        ]
        docs = {
            "episodes": "Barrier episodes completed.",
            "tx_packets": "Barrier packets sent.",
            "rx_packets": "Barrier packets received (good and bad).",
            "err_format": "Received packets dropped as malformed (payload, short, wrong "
                          "type/length/destination, error flag).",
            "err_protocol": "Well-formed packets dropped as unexpected (tree: not from a "
                            "child/the parent, wrong episode, duplicate arrive, release not "
                            "awaited; all-to-all: not from a peer, a release, a tag not this "
                            "or the next episode, duplicate; unit disabled).",
            "enter_merged": "Enters from a context that already had one outstanding (count once).",
            "enter_dropped": "Enters while disabled or with enter_ctx >= n_ctx.",
        }
        for name in self.COUNTERS:
            csr = CSRStatus(COUNTER_BITS, name=name, description=docs[name])
            setattr(self, "_" + name, csr)
            self.comb += csr.status.eq(getattr(self, name))
