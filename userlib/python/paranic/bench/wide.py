"""`paranic bench wide`: the router + link datapath at 64, 128 and 256 bits (Migen simulation).

A chain of routers (:class:`paranic.sim.testnet.RouterChain`: node 0 -> node 1 -> ...
over link layers and simulated cables) carries a long stream of equal packets from
node 0 to the last node. Per width:

* ``stream_payload_fraction``: payload bytes delivered per cycle at the last node's
  ejection port, over the ``dw/8`` bytes a beat carries, measured between the last
  beats of the first and the last packet (the steady state; the link's framing, one
  SOF and one CRC-trailer beat per packet, is the only loss:
  :func:`paranic.spec.link.link_efficiency`);
* ``hop_header_cycles``/``hop_tail_cycles``: cut-through hop at the middle router
  (three nodes): a packet's header (last) beat on its link input to the cycle the
  same beat is first valid on its link output.

Every packet is checked word by word (the unused words of its last beat zero).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys

from paranic.spec import protocol as P
from paranic.spec.link import link_efficiency


def make_beats(words: list[int], dw: int) -> list[int]:
    """A packet's words packed into ``dw``-bit beats, word 0 in the low bits; the unused
    words of the last beat are zero."""
    k = P.beat_words(dw)
    out = []
    for i in range(0, len(words), k):
        beat = 0
        for j, w in enumerate(words[i:i + k]):
            beat |= w << (P.WORD_BITS * j)
        out.append(beat)
    return out


def beats_to_words(beats: list[int], dw: int, n_words: int) -> list[int]:
    """The packet words of ``beats`` (the inverse of :func:`make_beats`); raises
    ValueError when a word past ``n_words`` in the last beat is not zero."""
    k = P.beat_words(dw)
    mask = (1 << P.WORD_BITS) - 1
    words = [(b >> (P.WORD_BITS * j)) & mask for b in beats for j in range(k)]
    if any(words[n_words:]):
        raise ValueError("unused words of the last beat are not zero")
    return words[:n_words]


def check_stream(sent_words: list[list[int]], received: list[list[int]], dw: int) -> None:
    """Every packet arrived once, in order, each word where it belongs (received beats
    unpacked word by word, independently of the sender's packing)."""
    if len(received) != len(sent_words):
        raise AssertionError(f"{len(received)} packets received, {len(sent_words)} sent")
    for i, (want, beats) in enumerate(zip(sent_words, received)):
        if len(beats) != -(-len(want) // P.beat_words(dw)):
            raise AssertionError(f"packet {i}: {len(beats)} beats")
        got = beats_to_words(beats, dw, len(want))
        if got != want:
            bad = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
            raise AssertionError(f"packet {i}: word {bad} differs")


def make_packet(rng: random.Random, length: int, tag: int, dst: int, src: int = 0) -> list[int]:
    """Header words (``length``, ``tag``) and random payload words."""
    h0, h1 = P.header_words(dst_node=dst, src_node=src, length=length, tag=tag)
    return [h0, h1] + [rng.getrandbits(64) for _ in range(P.payload_words(length))]


def drive_packets(ep, packets: list[list[int]], rng: random.Random | None = None, gap: float = 0.0):
    """Migen generator: ``packets`` (lists of beats) into the stream endpoint ``ep``, one
    beat per cycle while ``ready``; with ``rng``, a one-cycle pause after a beat with
    probability ``gap``."""
    for pkt in packets:
        for i, w in enumerate(pkt):
            yield ep.valid.eq(1)
            yield ep.first.eq(i == 0)
            yield ep.last.eq(i == len(pkt) - 1)
            yield ep.data.eq(w)
            yield
            while not (yield ep.ready):
                yield
            if rng is not None and rng.random() < gap:
                yield ep.valid.eq(0)
                yield
    yield ep.valid.eq(0)


def run_stream(dw: int = 128, packets: int = 24, length: int = P.DEFAULT_MTU, nodes: int = 2,
               mtu: int | None = None, flip: tuple[int, int] | None = None, seed: int = 1,
               max_cycles: int = 200_000, router_kw: dict | None = None) -> dict:
    """Stream ``packets`` packets of ``length`` payload bytes from node 0 to node
    ``nodes - 1`` through a :class:`RouterChain` at width ``dw`` (Migen simulation).

    ``router_kw``: further Router parameters (e.g. ``buf_words``).
    ``flip``: (n, bit): flip ``bit`` of the beat on the first cable ``n`` cycles after
    the first SOF (a single bit error: the frame is NAKed and replayed).
    Returns the received beats per packet (``received``), the sent ones (``sent``),
    the cycle each packet's last beat left the last node (``t_last``), the hop
    figures of the middle router (``hop_header``, ``hop_tail``: per packet, cycles
    from its header/last beat on the link input to the same beat on the link output)
    and the link counters of the first cable (``counters``: ``replays_a``,
    ``crc_errors_b``, ...; ``a`` is node 0's end)."""
    from migen import run_simulation
    from migen.sim import passive

    from paranic.sim.channels import LinkChannel
    from paranic.sim.testnet import RouterChain
    from paranic.spec import link as LK

    LinkChannel.reset_seeds()
    mtu = mtu or max(length, 8)
    top = RouterChain(nodes=nodes, dw=dw, mtu=mtu, **(router_kw or {}))
    rng = random.Random(seed)
    dst = nodes - 1
    words = [make_packet(rng, length, tag=i & 0xFF, dst=dst) for i in range(packets)]
    pkts = [make_beats(w, dw) for w in words]
    received: list[list[int]] = []
    bad: list[int] = []
    t_last: list[int] = []
    hop_h: list[int] = []
    hop_t: list[int] = []
    cyc = [0]
    counters: dict[str, int] = {}
    phy = top.channels[0].phy_ab

    def send():
        snk = top.sinks[0]
        for _ in range(5000):
            ups = []
            for c in top.channels:
                ups += [(yield c.link_a.up), (yield c.link_b.up)]
            if all(ups):
                break
            yield
        else:
            raise AssertionError("links not up")
        yield from drive_packets(snk, pkts)

    def recv():
        src = top.sources[dst]
        yield src.ready.eq(1)
        cur: list[int] = []
        while len(received) + len(bad) < packets and cyc[0] < max_cycles:
            yield
            cyc[0] += 1
            if (yield src.valid):
                cur.append((yield src.data))
                if (yield src.last):
                    if (yield src.error):
                        bad.append(len(received))
                    received.append(cur)
                    t_last.append(cyc[0])
                    cur = []
        for nm, link in (("a", top.channels[0].link_a), ("b", top.channels[0].link_b)):
            for c in ("replays", "crc_errors", "naks", "tx_packets", "rx_packets"):
                counters[f"{c}_{nm}"] = (yield getattr(link, c))

    @passive
    def watch():
        n = 0
        sof_at = None
        if nodes >= 3:
            r = top.routers[1]
            lin, lout = r.links[P.Port.XM - 1].sink, r.links[P.Port.XP - 1].source
        pend_h, pend_t = [], []
        out_h, out_t = [False], [False]   # the output's header/last beat already counted
        while True:
            yield
            n += 1
            if flip is not None:
                if sof_at is None and (yield phy.sink.valid) and (yield phy.sink.ctrl):
                    if (LK.unpack_ctl((yield phy.sink.data)) or {}).get("kind") == LK.CtlKind.SOF:
                        sof_at = n
                if sof_at is not None and n == sof_at + flip[0]:
                    yield phy.flip_mask.eq(1 << flip[1])
                elif sof_at is not None and n == sof_at + flip[0] + 1:
                    yield phy.flip_mask.eq(0)
            if nodes >= 3:
                if (yield lin.valid) and (yield lin.ready):
                    if (yield lin.first):
                        pend_h.append(n)
                    if (yield lin.last):
                        pend_t.append(n)
                # the cycle a beat first shows on the output (the link layer takes a
                # header one cycle later: it sends the frame's SOF beat first)
                v, rdy = (yield lout.valid), (yield lout.ready)
                if v and (yield lout.first) and not out_h[0] and pend_h:
                    hop_h.append(n - pend_h.pop(0))
                    out_h[0] = True
                if v and (yield lout.last) and not out_t[0] and pend_t:
                    hop_t.append(n - pend_t.pop(0))
                    out_t[0] = True
                if v and rdy:
                    if (yield lout.first):
                        out_h[0] = False
                    if (yield lout.last):
                        out_t[0] = False

    run_simulation(top, [send(), recv(), watch()])
    return {"dw": dw, "sent": pkts, "sent_words": words, "received": received, "bad": bad, "t_last": t_last,
            "cycles": cyc[0], "hop_header": hop_h, "hop_tail": hop_t, "counters": counters}


def payload_fraction(res: dict, length: int) -> float:
    """Payload bytes per cycle between the first and the last packet's last beat, over
    the ``dw/8`` bytes of a beat."""
    t = res["t_last"]
    if len(t) < 2:
        raise ValueError("need at least two packets")
    per_cycle = (len(t) - 1) * length / (t[-1] - t[0])
    return per_cycle / (res["dw"] // 8)


def measure(widths=(64, 128, 256), packets: int = 24, length: int = P.DEFAULT_MTU,
            nodes: int = 3, progress=lambda *a, **k: None) -> dict:
    """Per width: the stream's payload fraction (and the framing's bound), the middle
    router's hop (header and tail, median [min, max], n). Checks every packet."""
    out: dict = {"packet_bytes": length, "packets": packets, "nodes": nodes, "widths": {}}
    for dw in widths:
        progress(f"dw={dw}: {packets} x {length} B over {nodes - 1} links ...")
        res = run_stream(dw=dw, packets=packets, length=length, nodes=nodes)
        check_stream(res["sent_words"], res["received"], dw)
        if res["bad"]:
            raise AssertionError(f"dw={dw}: packets delivered with error")
        frac = payload_fraction(res, length)
        hh, ht = res["hop_header"], res["hop_tail"]
        row = {
            "stream_payload_fraction": frac,
            "framing_bound": link_efficiency(length, dw),
            "hop_header_cycles": statistics.median(hh) if hh else None,
            "hop_header_range": [min(hh), max(hh)] if hh else None,
            "hop_tail_cycles": statistics.median(ht) if ht else None,
            "hop_n": len(hh),
            "cycles": res["cycles"],
        }
        out["widths"][str(dw)] = row
        out[f"stream_payload_fraction_{dw}"] = frac
    return out


def table(res: dict) -> str:
    rows = [("width", "payload fraction", "framing bound", "payload GB/s @ clk",
             "hop header (median [min,max], n)", "hop tail")]
    for dw, r in res["widths"].items():
        gbs = r["stream_payload_fraction"] * int(dw) / 8 * P.TARGET_CLK_HZ / 1e9
        hh = (f"{r['hop_header_cycles']:g} [{r['hop_header_range'][0]}, {r['hop_header_range'][1]}], "
              f"{r['hop_n']}" if r["hop_header_cycles"] is not None else "-")
        rows.append((f"{dw} bit", f"{r['stream_payload_fraction']:.4f}", f"{r['framing_bound']:.4f}",
                     f"{gbs:.2f}", hh, f"{r['hop_tail_cycles']:g}" if r["hop_tail_cycles"] is not None else "-"))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.append(f"({res['packets']} packets of {res['packet_bytes']} B, node 0 -> node {res['nodes'] - 1} "
                 f"over link layers and simulated cables, Migen simulation; payload fraction = payload "
                 f"bytes per cycle / (dw/8) between the first and last packet; clock "
                 f"{P.TARGET_CLK_HZ / 1e6:.0f} MHz; hop: middle router, link input to link output)")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--widths", default="64,128,256",
                   help="wide: datapath widths to measure (comma-separated; 64, 128, 256)")
    p.add_argument("--wide-packets", type=int, default=24, help="wide: packets per stream")


def run(a: argparse.Namespace) -> int:
    try:
        widths = [int(w) for w in a.widths.split(",") if w]
        for w in widths:
            P.beat_words(w)
    except ValueError as e:
        print(f"paranic bench wide: --widths {a.widths}: {e}", file=sys.stderr)
        return 2
    packets = 8 if a.quick else a.wide_packets
    res = measure(widths, packets=packets,
                  progress=(lambda *x, **k: None) if a.json else
                  (lambda *x, **k: print(*x, file=sys.stderr, flush=True)))
    if a.json:
        print(json.dumps(res))
    else:
        print(table(res))
    return 0
