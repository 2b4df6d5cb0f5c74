"""Router-only networks: one Router per node, channels per topo.links(), optional
hardware traffic generators/checkers, and standalone Verilog tops for cocotb.

* :class:`RouterNetwork` — the network (routing tables from
  :meth:`paranic.spec.topo.Topology.table` loaded after reset, node ids set).
* :func:`network_verilog` — Verilog of a network with top-level control and
  observation ports (see :class:`RouterNetwork` for their names).
* :func:`router_verilog` — Verilog of one Router with every port at the top level
  (hop-latency and unit benches).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migen import Cat, If, Signal
from litex.gen import LiteXModule
from litex.soc.interconnect import stream

from paranic.hw.common import packet_layout
from paranic.hw.router import PORT_NAMES, Router
from paranic.spec import protocol as P
from paranic.spec.topo import Topology

from .channels import WireChannel
from .traffic import TrafficCheck, TrafficGen


def _table_depth(nodes: int) -> int:
    return max(2, 1 << (nodes - 1).bit_length())


def _sum(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out + s
    return out


class RouterNetwork(LiteXModule):
    """``topo.nodes`` routers joined by ``channel`` instances.

    Parameters: ``mtu``, ``buf_words``, ``eject_words``, ``bubble``, ``voq`` and any
    other ``router_kw`` (Router parameters), ``channel`` (a class taking ``(a, b, **channel_kwargs)``:
    :class:`WireChannel` or ``LinkChannel``), ``table_nodes`` (default: next power
    of two >= nodes), ``with_traffic``. ``dw`` (a Router parameter) sets the datapath
    width of routers and channels; wider than 64 bits only with ``with_traffic=False``.

    Always present (named top-level signals):
      inputs ``bubble_en`` (1: bubble rule on); outputs ``cycle`` (32-bit
      cycle counter since reset), ``ready`` (all tables loaded),
      ``router_errors`` (sum of all routers' err_unknown/err_length/err_aborted
      and ejection-FIFO aborts).

    ``with_traffic=False``: per node ``n<i>_sink`` / ``n<i>_source`` stream ports
    (the routers' local ports) — ``self.sinks[i]``/``self.sources[i]``.

    ``with_traffic=True``: a :class:`TrafficGen` and a :class:`TrafficCheck` per node.
    Inputs ``enable``, ``clear``, ``pattern``, ``rate``, ``count`` (per node),
    ``min_len``, ``max_len``, ``seed``. Outputs (sums over nodes unless noted):
    ``done`` (all generators done), ``clearing``, ``tx_packets``, ``tx_words``,
    ``backlog`` (created, not started), ``rx_packets``, ``rx_words``, ``rx_bytes``,
    ``err_hdr``, ``err_len``, ``err_seq``, ``err_payload``, ``lat_sum``, ``lat_max``
    (max over nodes), ``last_rx`` (max), and per-node buses (32 bits per node,
    node 0 in the low bits): ``node_tx``, ``node_rx``.
    """

    def __init__(self, topo: Topology, mtu: int = P.DEFAULT_MTU, buf_words: int | None = None,
                 channel: Any = WireChannel, channel_kwargs: dict | None = None,
                 with_traffic: bool = True, table_nodes: int | None = None,
                 eject_words: int | None = None, bubble: str = "packet",
                 voq: bool | None = None, **router_kw: Any) -> None:
        self.topo = topo
        n = topo.nodes
        table_nodes = table_nodes or _table_depth(n)
        self.routers = []
        for i in range(n):
            r = Router(n_links=topo.link_ports, mtu=mtu, buf_words=buf_words,
                       table_nodes=table_nodes, eject_words=eject_words,
                       table_init=topo.table(i, min(table_nodes, n)), bubble=bubble,
                       dims=(topo.x, topo.y), voq=voq, **router_kw)
            setattr(self, f"router{i}", r)
            self.routers.append(r)
            x, y = topo.coords(i)
            self.comb += [r.node_id.eq(i), r.node_x.eq(x), r.node_y.eq(y)]
        self.max_pkt = self.routers[0].max_pkt
        self.buf_words = self.routers[0].buf_words

        # -- channels: one per pair of link ports ------------------------------
        self.channels = []
        done = set()
        for (a, pa, b, pb) in topo.links():
            key = frozenset([(a, pa), (b, pb)])
            if key in done:
                continue
            done.add(key)
            ch = channel(self.routers[a].links[pa - 1], self.routers[b].links[pb - 1],
                         **(channel_kwargs or {}))
            setattr(self, f"ch_{a}_{PORT_NAMES[pa]}_{b}_{PORT_NAMES[pb]}", ch)
            self.channels.append(ch)

        # -- common control / observation -------------------------------------
        self.bubble_en = Signal(reset=1, name="bubble_en")
        self.cycle = Signal(32, name="cycle")
        self.ready = Signal(name="ready")
        self.router_errors = Signal(40, name="router_errors")
        self.sync += self.cycle.eq(self.cycle + 1)
        self.comb += [r.bubble_en.eq(self.bubble_en) for r in self.routers]
        ready = self.routers[0].ready
        for r in self.routers[1:]:
            ready = ready & r.ready
        self.comb += [
            self.ready.eq(ready),
            self.router_errors.eq(_sum([r.err_unknown + r.err_length + r.err_aborted +
                                        r.eject.aborted for r in self.routers])),
        ]
        self.ios = {self.bubble_en, self.cycle, self.ready, self.router_errors}

        self.with_traffic = with_traffic
        dw = self.routers[0].dw
        if with_traffic and dw != P.WORD_BITS:
            raise ValueError("the traffic generators are 64-bit: with_traffic=False for dw > 64")
        if not with_traffic:
            self.sinks, self.sources = [], []
            for i, r in enumerate(self.routers):
                sk = stream.Endpoint(packet_layout(dw), name=f"n{i}_sink")
                sr = stream.Endpoint(packet_layout(dw), name=f"n{i}_source")
                self.comb += [sk.connect(r.local_sink), r.local_source.connect(sr)]
                self.sinks.append(sk)
                self.sources.append(sr)
                self.ios |= set(sk.flatten()) | set(sr.flatten())
            return

        # -- traffic -----------------------------------------------------------
        self.enable = Signal(name="enable")
        self.clear = Signal(name="clear")
        self.pattern = Signal(3, name="pattern")
        self.rate = Signal(17, name="rate")
        self.count = Signal(32, name="count")
        self.min_len = Signal(14, name="min_len")
        self.max_len = Signal(14, name="max_len")
        self.seed = Signal(32, name="seed")
        ins = [self.enable, self.clear, self.pattern, self.rate, self.count, self.min_len,
               self.max_len, self.seed]
        self.gens, self.checks = [], []
        for i, r in enumerate(self.routers):
            g = TrafficGen(topo, i, mtu=mtu)
            c = TrafficCheck(topo, i, mtu=mtu)
            setattr(self, f"gen{i}", g)
            setattr(self, f"chk{i}", c)
            self.gens.append(g)
            self.checks.append(c)
            self.comb += [
                g.source.connect(r.local_sink),
                r.local_source.connect(c.sink),
                g.enable.eq(self.enable), g.clear.eq(self.clear), g.pattern.eq(self.pattern),
                g.rate.eq(self.rate), g.count.eq(self.count), g.min_len.eq(self.min_len),
                g.max_len.eq(self.max_len), g.seed.eq(self.seed), g.cycle.eq(self.cycle),
                c.clear.eq(self.clear), c.cycle.eq(self.cycle),
            ]

        def out(name, width, expr):
            s = Signal(width, name=name)
            self.comb += s.eq(expr)
            setattr(self, name, s)
            self.ios.add(s)
            return s

        out("done", 1, _and([g.done for g in self.gens]))
        out("clearing", 1, _or([g.busy_clear for g in self.gens]))
        out("tx_packets", 40, _sum([g.sent for g in self.gens]))
        out("tx_words", 48, _sum([g.sent_words for g in self.gens]))
        out("backlog", 40, _sum([g.backlog for g in self.gens]))
        out("rx_packets", 40, _sum([c.rx_packets for c in self.checks]))
        out("rx_words", 48, _sum([c.rx_words for c in self.checks]))
        out("rx_bytes", 48, _sum([c.rx_bytes for c in self.checks]))
        for k in ("err_hdr", "err_len", "err_seq", "err_payload"):
            out(k, 40, _sum([getattr(c, k) for c in self.checks]))
        out("lat_sum", 64, _sum([c.lat_sum for c in self.checks]))
        out("lat_max", 32, _max(self, [c.lat_max for c in self.checks]))
        out("last_rx", 32, _max(self, [c.last_rx for c in self.checks]))
        out("node_tx", 32 * n, Cat(*[g.sent for g in self.gens]))
        out("node_rx", 32 * n, Cat(*[c.rx_packets for c in self.checks]))
        self.ios |= set(ins)


def _and(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out & s
    return out


def _or(sigs):
    out = sigs[0]
    for s in sigs[1:]:
        out = out | s
    return out


def _max(m, sigs):
    cur = sigs[0]
    for s in sigs[1:]:
        nxt = Signal(len(s))
        m.comb += If(s > cur, nxt.eq(s)).Else(nxt.eq(cur))
        cur = nxt
    return cur


def write_port_vlt(vpath: Path, toplevel: str) -> Path:
    """Write ``<name>.vlt`` next to ``vpath`` making only the top-level ports public.

    cocotb's Verilator runner passes ``--public-flat-rw`` (every signal visible,
    which roughly doubles build time and halves simulation speed on these
    flattened Migen designs). Building with ``--no-public-flat-rw`` plus this
    file keeps just the ports reachable from cocotb. Use :func:`sim_sources`.
    """
    import re

    text = Path(vpath).read_text()
    head = text[text.index(f"module {toplevel}("):]
    head = head[:head.index(");")]
    ports = re.findall(r"(?:input|output)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[[^\]]+\]\s+)?(\w+)", head)
    lines = ["`verilator_config"] + [f'public_flat_rw -module "{toplevel}" -var "{p}"' for p in ports]
    out = Path(vpath).with_suffix(".vlt")
    content = "\n".join(lines) + "\n"
    if not out.exists() or out.read_text() != content:
        out.write_text(content)
    return out


#: Extra Verilator arguments to use with :func:`sim_sources`. ``-CFLAGS -O0``: the
#: generated C++ of a 16-router network compiles ~5x faster unoptimised (about 45 s
#: instead of 3-4 min on the 2-core build machine) and simulates ~5x slower
#: (~20k instead of ~100k cycles/s), the better trade for tests and benchmarks that
#: run a few million cycles.
SIM_BUILD_ARGS = ("--no-public-flat-rw", "-CFLAGS", "-O0")


def sim_sources(vpath: Path, toplevel: str) -> list[Path]:
    """Sources for ``paranic.sim.hdl.run_cocotb`` (Verilog + port-only .vlt); pass
    ``build_args=SIM_BUILD_ARGS`` with them."""
    return [Path(vpath), write_port_vlt(vpath, toplevel)]


def network_name(topo: Topology, **params: Any) -> str:
    """A file/toplevel name for a network build, e.g. ``net_ring8_traffic``."""
    kind = f"ring{topo.x}" if not topo.is_torus else f"torus{topo.x}x{topo.y}"
    tag = "traffic" if params.get("with_traffic", True) else "ports"
    extra = "".join(f"_{k}{v}" for k, v in sorted(params.items())
                    if k not in ("with_traffic",) and v is not None and not callable(v)
                    and not isinstance(v, dict))
    return f"net_{kind}_{tag}{extra}"


def network_verilog(topo: Topology, out_dir: Path, **params: Any) -> tuple[Path, str]:
    """Write the Verilog of ``RouterNetwork(topo, **params)`` into ``out_dir``.

    Returns ``(path, toplevel)``. Ports: ``sys_clk``, ``sys_rst`` and the named
    signals listed in :class:`RouterNetwork`.
    """
    from .hdl import write_verilog

    name = params.pop("name", None) or network_name(topo, **params)
    net = RouterNetwork(topo, **params)
    path = write_verilog(net, net.ios, name, Path(out_dir))
    return path, name


class RouterTop(LiteXModule):
    """One Router with all its ports as named top-level signals (for cocotb).

    ``<port>_sink``/``<port>_source`` streams for local, xp, xm (, yp, ym);
    ``<link>_credit_valid``, ``<link>_credit_words``, ``<link>_drained``,
    ``<link>_up``; ``table_we``/``table_adr``/``table_dat``; ``ready``;
    ``bubble_en``; ``cycle``; probes ``in_packets_<port>`` (input FIFO packet count)
    and ``hdr_out_<port>`` (a header is valid at the output register of port:
    link source, or the ejection FIFO's input for local); counters ``tx_<port>``,
    ``err_unknown``, ``err_length``, ``err_aborted``; ``eject_packets``.
    """

    def __init__(self, n_links: int = 2, **router_kw: Any) -> None:
        self.router = r = Router(n_links=n_links, **router_kw)
        self.ios = set()
        names = [PORT_NAMES[p] for p in range(n_links + 1)]

        def io(sig, name):
            s = Signal(len(sig), name=name, reset=sig.reset.value if hasattr(sig.reset, "value") else 0)
            self.ios.add(s)
            return s

        dw = r.dw
        sk = stream.Endpoint(packet_layout(dw), name="local_sink")
        sr = stream.Endpoint(packet_layout(dw), name="local_source")
        self.comb += [sk.connect(r.local_sink), r.local_source.connect(sr)]
        self.ios |= set(sk.flatten()) | set(sr.flatten())
        for i, link in enumerate(r.links):
            nm = names[i + 1]
            lk = stream.Endpoint(packet_layout(dw), name=f"{nm}_sink")
            ls = stream.Endpoint(packet_layout(dw), name=f"{nm}_source")
            self.comb += [lk.connect(link.sink), link.source.connect(ls)]
            self.ios |= set(lk.flatten()) | set(ls.flatten())
            cv, cw = io(link.credit_valid, f"{nm}_credit_valid"), io(link.credit_words, f"{nm}_credit_words")
            dr, up = io(link.drained, f"{nm}_drained"), Signal(name=f"{nm}_up", reset=1)
            self.ios.add(up)
            self.comb += [link.credit_valid.eq(cv), link.credit_words.eq(cw), dr.eq(link.drained),
                          link.up.eq(up)]
        for sig, nm in ((r.table_we, "table_we"), (r.table_adr, "table_adr"),
                        (r.table_dat, "table_dat")):
            s = io(sig, nm)
            self.comb += sig.eq(s)
        be = Signal(name="bubble_en", reset=1)
        self.ios.add(be)
        self.comb += r.bubble_en.eq(be)
        cyc = io(Signal(32), "cycle")
        self.sync += cyc.eq(cyc + 1)
        outs = [(r.ready, "ready"), (r.err_unknown, "err_unknown"), (r.err_length, "err_length"),
                (r.err_aborted, "err_aborted"), (r.eject_packets, "eject_packets")]
        for p in range(n_links + 1):
            outs.append((r.inputs[p].packets, f"in_packets_{names[p]}"))
            outs.append((r.tx_packets[p], f"tx_{names[p]}"))
            outs.append((r.credits[p], f"credits_{names[p]}"))
        for sig, nm in outs:
            s = io(sig, nm)
            self.comb += s.eq(sig)
        for p in range(n_links + 1):
            s = io(Signal(), f"hdr_out_{names[p]}")
            src = r.pipes[p].source
            self.comb += s.eq(src.valid & src.first)


def router_verilog(out_dir: Path, n_links: int = 2, name: str | None = None,
                   **router_kw: Any) -> tuple[Path, str]:
    """Write the Verilog of :class:`RouterTop`; returns ``(path, toplevel)``."""
    from .hdl import write_verilog

    top = RouterTop(n_links=n_links, **router_kw)
    name = name or f"router{n_links}" + "".join(f"_{k}{v}" for k, v in sorted(router_kw.items()))
    path = write_verilog(top, top.ios, name, Path(out_dir))
    return path, name


class RouterChain(LiteXModule):
    """``nodes`` routers in a line (node i's XP joined to node i+1's XM by a channel),
    each with its local port as ``sinks[i]``/``sources[i]``: the Migen simulation
    model of the wide-datapath benchmark (:mod:`paranic.bench.wide`) and its tests.

    ``dw``: the datapath width of routers, link layers and cables; ``channel``:
    :class:`~paranic.sim.channels.LinkChannel` (default) or :class:`WireChannel`.
    The routing tables send a packet for a higher node XP, a lower one XM. The
    chain's end ports (node 0's XM, the last node's XP) are left open.
    """

    def __init__(self, nodes: int = 2, dw: int = P.WORD_BITS, mtu: int = P.DEFAULT_MTU,
                 channel: Any = None, channel_kwargs: dict | None = None, **router_kw: Any) -> None:
        from .channels import LinkChannel

        channel = LinkChannel if channel is None else channel
        tn = _table_depth(nodes)
        self.routers, self.channels, self.sinks, self.sources = [], [], [], []
        for i in range(nodes):
            table = [P.Port.XM if d < i else P.Port.LOCAL if d == i else P.Port.XP
                     for d in range(tn)]
            r = Router(n_links=2, mtu=mtu, dw=dw, table_nodes=tn, table_init=table,
                       route_fn="table", **router_kw)
            setattr(self, f"router{i}", r)
            self.routers.append(r)
            self.comb += r.node_id.eq(i)
            sk = stream.Endpoint(packet_layout(dw), name=f"n{i}_sink")
            sr = stream.Endpoint(packet_layout(dw), name=f"n{i}_source")
            self.comb += [sk.connect(r.local_sink), r.local_source.connect(sr)]
            self.sinks.append(sk)
            self.sources.append(sr)
        kw = dict(channel_kwargs or {})
        if channel is LinkChannel:
            kw.setdefault("mtu", mtu)
        for i in range(nodes - 1):
            ch = channel(self.routers[i].links[P.Port.XP - 1],
                         self.routers[i + 1].links[P.Port.XM - 1], **kw)
            setattr(self, f"ch{i}", ch)
            self.channels.append(ch)
