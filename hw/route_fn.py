"""The routing function of one router input: the Migen twin of the HLS kernel ``route``.

``hls/route/route.cpp`` is the routing function in Vitis HLS C++; this module is the same
function in Migen, with the same ports (:data:`paranic.spec.kernels.ROUTE_PORTS`, defined
once): a destination inside the table (``dst < ROUTE_TABLE_NODES``) takes the table's
entry; one beyond it is routed by dimension-order computation (X then Y, the shorter way
round, ties split by the parity rule of ``spec/c/pn_route.c``), so a 4096-node torus
needs no 4096-entry table; a destination outside the topology is ``Port.DROP``. docs/hls.md describes both.

Blocks:

* :class:`RouteFn` -- the function, ``ap_ctrl_hs`` handshake, one request per cycle; a
  table hit or DROP answers in the cycle its table entry arrives, a destination beyond
  the table after a pipelined divider for its coordinates (``ap_done`` says when the
  result is there; a caller must not assume the latency, since the Vitis build's differs).
* :class:`RouteFnVitis` -- the same ports as an ``Instance`` of the kernel's exported
  RTL (module ``route``), for a board built with Vitis; only elaborated here.
* :class:`RouteFnDpi` -- the same ports as an ``Instance`` of the simulator's DPI-C shell
  (module ``route_dpi``), which runs the kernel's C++ in the Verilator cluster.
* :class:`RouteTable` -- the table: block RAM of ``ROUTE_TABLE_NODES`` entries, written
  through a port the router's CSRs drive, read through the kernel's ``ap_memory`` port.
* :class:`RouteUnit` -- a table and a routing function, the function chosen by the build
  option ``vitis`` (True: the HLS kernel's RTL; False: :class:`RouteFn`).
"""

from __future__ import annotations

from migen import ClockSignal, If, Instance, Memory, Module, Mux, ResetSignal, Signal

from paranic.spec import kernels as K
from paranic.spec import protocol as P


def _ports(m: Module) -> None:
    """Give ``m`` one Signal per kernel port except the clock and reset, named as the port."""
    for name, _dir, width, _doc in K.ROUTE_PORTS:
        if name not in ("ap_clk", "ap_rst"):
            setattr(m, name, Signal(width, name=name))


def _div_steps(m: Module, rem, q, a, d, bits: list[int]):
    """Restoring division steps for the quotient bits ``bits`` (highest first): from the
    partial remainder ``rem`` and quotient ``q``, shift in bit ``i`` of ``a``, subtract
    ``d`` when it fits. Returns the new (remainder, quotient) as combinational Signals."""
    for i in bits:
        shifted = Signal(len(rem))
        nrem = Signal(len(rem))
        nq = Signal(len(q))
        m.comb += [
            shifted.eq((rem << 1) | a[i]),
            nq.eq(q),
            If(shifted >= d, nrem.eq(shifted - d), nq[i].eq(1)).Else(nrem.eq(shifted)),
        ]
        rem, q = nrem, nq
    return rem, q


def _dor_step(a, b, n, key, plus: int, minus: int):
    """One dimension of dimension-order routing, as ``pn_dor_step`` in hls/route/route.h:
    ``Port.LOCAL`` when a == b, else the shorter way round; a tie (b half way round an
    even ring) goes + when ``a + key`` is even (``key``: the destination's coordinate in
    the other dimension), else - (spec/c/pn_route.c's tie rule)."""
    w = K.DIM_BITS + 1
    d = Signal(w)
    back = Signal(w)
    port = Signal(P.ROUTE_BITS)
    tie_plus = Signal()
    stmts = [
        d.eq(Mux(b >= a, b - a, b + n - a)),
        back.eq(n - d),
        tie_plus.eq(~(a[0] ^ key[0])),
        port.eq(Mux(d == 0, P.Port.LOCAL,
                    Mux(d == back, Mux(tie_plus, plus, minus), Mux(d < back, plus, minus)))),
    ]
    return port, stmts


class RouteFn(Module):
    """The routing function (ports :data:`~paranic.spec.kernels.ROUTE_PORTS`), a pipeline
    taking one request per cycle.

    Cycle 0: ``ap_start`` with the inputs; the table is read at ``dst``, the inputs are
    registered with the request's class (outside the topology: DROP; inside the table).
    Cycle 1: the table entry arrives (``table_q0``). A DROP or a table hit takes the
    short path: ``ap_done`` and ``ap_return`` in that same cycle 1, combinational from
    ``table_q0`` (:attr:`latency_table`). A request beyond the table takes the long path:
    the destination's coordinates ``dst / dim_x``, ``dst % dim_x`` from a restoring
    divider, ``div_bits`` quotient bits per cycle (``NODE_BITS / div_bits`` stages, for
    timing: a 12-step compare-and-subtract chain is too long for one 125 MHz cycle), then
    the dimension-order port, registered; ``ap_done`` at :attr:`latency` (2 + stages).
    Results stay in request order (``ap_ctrl_hs``), at most one ``ap_done`` per cycle: a
    request that could take the short path while an earlier one is still on the long path,
    or in the cycle the long path's registered ``ap_done`` is out, takes the long path
    too. Callers wait for ``ap_done`` and never count cycles (the Vitis build's latency is
    its own).

    ``table_nodes``: entries of the table behind the ``ap_memory`` port (default the C++
    kernel's ``ROUTE_TABLE_NODES``; a router with a smaller table gives its own size, so
    that the computed fallback starts where its table ends).
    """

    def __init__(self, div_bits: int = 4, table_nodes: int = K.ROUTE_TABLE_NODES) -> None:
        if not 1 <= div_bits <= P.NODE_BITS:
            raise ValueError(f"div_bits must be 1..{P.NODE_BITS}")
        if table_nodes & (table_nodes - 1) or not 2 <= table_nodes <= P.MAX_NODES:
            raise ValueError(f"table_nodes must be a power of two in 2..{P.MAX_NODES}")
        self.table_nodes = table_nodes
        _ports(self)
        ab = (table_nodes - 1).bit_length()
        nb = P.NODE_BITS
        if ab != len(self.table_address0):
            self.table_address0 = Signal(ab, name="table_address0")
        self.comb += [
            self.table_address0.eq(self.dst[:ab]),
            self.table_ce0.eq(self.ap_start),
            self.ap_ready.eq(1),
        ]

        def stage(name: str) -> dict[str, Signal]:
            return dict(valid=Signal(name=f"{name}_valid"), dst=Signal(nb), nx=Signal(nb), ny=Signal(nb),
                        dimx=Signal(K.DIM_BITS), dimy=Signal(K.DIM_BITS),
                        rem=Signal(K.DIM_BITS + 1), q=Signal(nb))

        # -- stage 0: the request, registered; the table entry arrives
        s0 = stage("s0")
        self.sync += [s0["valid"].eq(self.ap_start),
                      If(self.ap_start, s0["dst"].eq(self.dst), s0["nx"].eq(self.node_x),
                         s0["ny"].eq(self.node_y), s0["dimx"].eq(self.dim_x), s0["dimy"].eq(self.dim_y))]
        # The request's class (outside the topology: DROP; inside the table), computed from
        # the inputs in cycle 0 and registered with them: in cycle 1 the short path's answer
        # is only a choice after table_q0 (the dim_x * dim_y multiplier stays off the path
        # from the table's output into the caller).
        drop = Signal()
        in_table = Signal()
        self.sync += If(self.ap_start, drop.eq(self.dst >= self.dim_x * self.dim_y),
                        in_table.eq(self.dst < table_nodes))
        # -- division stages (the long path only): each takes div_bits quotient bits, highest first
        prev = dict(s0)
        long_valid = Signal()
        self.comb += [s0["rem"].eq(0), s0["q"].eq(0)]
        high_first = list(range(nb - 1, -1, -1))
        groups = [high_first[i:i + div_bits] for i in range(0, nb, div_bits)]
        valids = [s0["valid"]]
        long_valids = []
        short = Signal()
        for k, bits in enumerate(groups):
            rem, q = _div_steps(self, prev["rem"], prev["q"], prev["dst"], prev["dimx"], bits)
            nxt = stage(f"div{k}")
            self.sync += [nxt[f].eq(prev[f]) for f in ("dst", "nx", "ny", "dimx", "dimy")]
            self.sync += [nxt["valid"].eq(prev["valid"] & ~short if k == 0 else prev["valid"]),
                          nxt["rem"].eq(rem), nxt["q"].eq(q)]
            valids.append(nxt["valid"])
            long_valids.append(nxt["valid"])
            prev = nxt
        # The short path, unless an earlier request is on the long path (order) or its
        # registered answer is out in this cycle (one ap_done per cycle).
        busy_long = long_valids[0]
        for v in long_valids[1:]:
            busy_long = busy_long | v
        long_done = Signal()        # the long path's ap_done (registered below)
        self.comb += [long_valid.eq(busy_long),
                      short.eq(s0["valid"] & (drop | in_table) & ~long_valid & ~long_done)]
        # -- last stage: dimension order, the choice, the result registered
        px, sx = _dor_step(prev["nx"], prev["rem"], prev["dimx"], prev["q"], P.Port.XP, P.Port.XM)
        py, sy = _dor_step(prev["ny"], prev["q"], prev["dimy"], prev["rem"], P.Port.YP, P.Port.YM)
        self.comb += sx + sy
        # A request on the long path because of an earlier one may be a DROP or a table hit:
        # those are kept with it.
        hold_drop = Signal()
        hold_table = Signal()
        hold_tq = Signal(P.ROUTE_BITS)
        hd, ht, hq = [hold_drop], [hold_table], [hold_tq]
        self.sync += [hd[0].eq(drop), ht[0].eq(in_table), hq[0].eq(self.table_q0)]
        for k in range(1, len(groups)):
            d, t, q = Signal(), Signal(), Signal(P.ROUTE_BITS)
            self.sync += [d.eq(hd[-1]), t.eq(ht[-1]), q.eq(hq[-1])]
            hd.append(d)
            ht.append(t)
            hq.append(q)
        port = Signal(P.ROUTE_BITS)
        self.comb += If(hd[-1], port.eq(P.Port.DROP)
                        ).Elif(ht[-1], port.eq(hq[-1])
                               ).Elif(px != P.Port.LOCAL, port.eq(px)
                                      ).Else(port.eq(py))
        # The long path's answer is registered; the short path's is combinational from
        # table_q0, in the cycle the entry arrives.
        long_ret = Signal(P.ROUTE_BITS)
        self.sync += [
            long_done.eq(prev["valid"]),
            If(prev["valid"], long_ret.eq(port)),
        ]
        self.comb += [
            self.ap_done.eq(short | long_done),
            self.ap_return.eq(Mux(short, Mux(drop, P.Port.DROP, self.table_q0), long_ret)),
        ]
        busy = self.ap_start | long_done
        for v in valids:
            busy = busy | v
        self.comb += self.ap_idle.eq(~busy)
        #: Cycles from ap_start to ap_done of a request on the long path (beyond the table).
        self.latency = 2 + len(groups)
        #: Cycles from ap_start to ap_done of a request on the short path (in the table, or
        #: DROP) when no earlier request is on the long path or answering.
        self.latency_table = 1


class RouteFnVitis(Module):
    """The HLS kernel's exported RTL (Verilog module ``route``) behind the same ports.

    Used when a board is built with Vitis (``RouteUnit(vitis=True)``): the RTL comes from
    ``hls/route/run_hls.tcl``'s IP export and is added to the build's sources then.
    Without Vitis this is only elaborated (the RTL does not exist here).
    """

    MODULE = "route"

    def __init__(self) -> None:
        _ports(self)
        conn = {}
        for name, d, _w, _doc in K.ROUTE_PORTS:
            if name == "ap_clk":
                conn["i_ap_clk"] = ClockSignal()
            elif name == "ap_rst":
                conn["i_ap_rst"] = ResetSignal()
            else:
                conn[f"{d}_{name}"] = getattr(self, name)
        self.specials += Instance(self.MODULE, **conn)


class RouteFnDpi(RouteFnVitis):
    """The same ports as an ``Instance`` of ``route_dpi`` (``sim/harness/route_dpi.sv``):
    in the Verilator cluster, a SystemVerilog shell that reads the table through the real
    ``ap_memory`` port and calls the kernel's C++ ``route()`` through DPI-C
    (``sim/harness/route_dpi.cpp``; docs/simulator.md, "The route kernel")."""

    MODULE = "route_dpi"


class RouteTable(Module):
    """The routing table: ``ROUTE_TABLE_NODES`` entries of ``ROUTE_BITS``, initially DROP.

    Write port ``we``/``adr``/``dat`` (the router's CSRs); read port ``address0``/``ce0``
    -> ``q0`` one cycle later (the kernel's ``ap_memory`` interface, latency 1).
    """

    def __init__(self, init: list[int] | None = None) -> None:
        n = K.ROUTE_TABLE_NODES
        init = list(init or [])
        if len(init) > n or any(not 0 <= v <= P.Port.DROP for v in init):
            raise ValueError(f"table init: at most {n} entries, each a Port value")
        self.we = Signal()
        self.adr = Signal(K.ROUTE_TABLE_ADDR_BITS)
        self.dat = Signal(P.ROUTE_BITS)
        self.address0 = Signal(K.ROUTE_TABLE_ADDR_BITS)
        self.ce0 = Signal()
        self.q0 = Signal(P.ROUTE_BITS)
        self.specials.mem = mem = Memory(P.ROUTE_BITS, n, init=init + [int(P.Port.DROP)] * (n - len(init)))
        wp = mem.get_port(write_capable=True)
        rp = mem.get_port(has_re=True)
        self.specials += wp, rp
        self.comb += [wp.we.eq(self.we), wp.adr.eq(self.adr), wp.dat_w.eq(self.dat),
                      rp.adr.eq(self.address0), rp.re.eq(self.ce0), self.q0.eq(rp.dat_r)]


class RouteUnit(Module):
    """A routing table and the routing function, the function's implementation chosen
    by the build option ``vitis``. Exposes the function's request ports (``ap_start``,
    ``dst``, ``node_x`` ...) and the table's write port (``table_we``/``_adr``/``_dat``)."""

    def __init__(self, vitis: bool = False, table_init: list[int] | None = None) -> None:
        self.submodules.fn = fn = RouteFnVitis() if vitis else RouteFn()
        self.submodules.table = t = RouteTable(table_init)
        self.comb += [t.address0.eq(fn.table_address0), t.ce0.eq(fn.table_ce0), fn.table_q0.eq(t.q0)]
        for name, _d, _w, _doc in K.ROUTE_PORTS:
            if not name.startswith(("ap_clk", "ap_rst", "table_")):
                setattr(self, name, getattr(fn, name))
        self.table_we, self.table_adr, self.table_dat = t.we, t.adr, t.dat
