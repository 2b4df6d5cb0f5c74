"""7-series I/O primitives of the ribbon PHY, one class per role.

Everything above this file is plain logic that simulates; these classes are the only
place that instantiates vendor cells (as Migen ``Instance`` black boxes, so the design
elaborates to Verilog and lints without Vivado). Their *ports* are the model boundary
of the ribbon bench (``docs/phy.md``, section "ribbon"): per lane one parallel byte per
divided clock, and a bit-slip request.

Bit order: bit 0 of a lane byte is the first bit on the wire (OSERDESE2 ``D1`` is sent
first; ISERDESE2 ``Q8`` is the oldest bit received).

* :class:`S7LvdsTx`     -- OBUFDS + OSERDESE2, 8:1 DDR, one lane (data or forwarded clock).
* :class:`S7LvdsRx`     -- IBUFDS + IDELAYE2 (VAR_LOAD) + ISERDESE2 8:1 DDR with BITSLIP.
* :class:`S7ClockRx`    -- IBUFDS + BUFIO (serial clock) + BUFR /4 (the ``rx`` domain).
* :class:`S7IdelayCtrl` -- IDELAYCTRL on a 200 MHz reference (one per I/O bank group).
"""

from __future__ import annotations

from migen import Cat, ClockSignal, Instance, ResetSignal, Signal

from litex.gen import LiteXModule

#: Parallel bits per lane per divided clock (DATA_WIDTH of the serdes, DDR).
SERDES_RATIO = 8
#: IDELAYE2 tap count and width of its value.
IDELAY_TAPS = 32
IDELAY_BITS = 5


class S7LvdsTx(LiteXModule):
    """One LVDS output lane: ``data`` (8 bits, domain ``cd_div``) serialised at 8x DDR.

    ``cd_div`` is the word clock (CLKDIV), ``cd_ser`` the serial clock at 4x (CLK),
    phase-aligned from the same MMCM. ``pad_p``/``pad_n``: the pair.
    """

    def __init__(self, pad_p, pad_n, cd_div: str = "sys", cd_ser: str = "sys4x") -> None:
        self.data = Signal(SERDES_RATIO)
        oq = Signal()
        self.specials += [
            Instance("OSERDESE2",
                p_DATA_RATE_OQ="DDR", p_DATA_RATE_TQ="BUF", p_DATA_WIDTH=SERDES_RATIO,
                p_TRISTATE_WIDTH=1, p_SERDES_MODE="MASTER", p_INIT_OQ=0,
                i_OCE=1, i_TCE=0, i_RST=ResetSignal(cd_div),
                i_CLK=ClockSignal(cd_ser), i_CLKDIV=ClockSignal(cd_div),
                **{f"i_D{k + 1}": self.data[k] for k in range(SERDES_RATIO)},
                o_OQ=oq),
            Instance("OBUFDS", i_I=oq, o_O=pad_p, o_OB=pad_n),
        ]


class S7ClockRx(LiteXModule):
    """Forwarded clock input: IBUFDS -> BUFIO (serial, ``clk_io``) and BUFR /4 (``cd_div``).

    Creates the clock domain ``cd_div`` (clocked by the BUFR output) whose reset the
    caller drives. The pair must sit on a clock-capable (CC) pin, and every data lane in
    the same I/O bank (a BUFIO drives one bank).
    """

    def __init__(self, pad_p, pad_n, cd_div: str = "ribbon_rx") -> None:
        self.clk_io = Signal()
        clk_ibuf = Signal()
        clk_div = Signal()
        self.specials += [
            Instance("IBUFDS", p_DIFF_TERM="TRUE", i_I=pad_p, i_IB=pad_n, o_O=clk_ibuf),
            Instance("BUFIO", i_I=clk_ibuf, o_O=self.clk_io),
            Instance("BUFR", p_BUFR_DIVIDE=str(SERDES_RATIO // 2), i_I=clk_ibuf, i_CE=1,
                     i_CLR=0, o_O=clk_div),
        ]
        self.comb += ClockSignal(cd_div).eq(clk_div)


class S7LvdsRx(LiteXModule):
    """One LVDS input lane: IBUFDS -> IDELAYE2 -> ISERDESE2 8:1 DDR.

    ``data`` (8 bits) and ``bitslip`` (one-cycle request) are in domain ``cd_div``;
    ``clk_io`` is the BUFIO serial clock. ``delay``/``delay_load`` (domain
    ``cd_ctl``) load the IDELAYE2 tap (78 ps each at a 200 MHz reference).

    ISERDESE2 BITSLIP in DDR mode alternately shifts the word boundary by one bit one
    way and three bits the other, so 8 requests visit all 8 boundaries; a request must
    be followed by at least two quiet divided-clock cycles.
    """

    def __init__(self, pad_p, pad_n, clk_io, cd_div: str = "ribbon_rx", cd_ctl: str = "sys",
                 default_delay: int = 0) -> None:
        if not 0 <= default_delay < IDELAY_TAPS:
            raise ValueError(f"default_delay {default_delay} not in 0..{IDELAY_TAPS - 1}")
        self.data = Signal(SERDES_RATIO)
        self.bitslip = Signal()
        self.delay = Signal(IDELAY_BITS, reset=default_delay)
        self.delay_load = Signal()
        ibuf = Signal()
        dly = Signal()
        q = [Signal() for _ in range(SERDES_RATIO)]
        self.specials += [
            Instance("IBUFDS", p_DIFF_TERM="TRUE", i_I=pad_p, i_IB=pad_n, o_O=ibuf),
            Instance("IDELAYE2",
                p_IDELAY_TYPE="VAR_LOAD", p_DELAY_SRC="IDATAIN", p_SIGNAL_PATTERN="DATA",
                p_HIGH_PERFORMANCE_MODE="TRUE", p_REFCLK_FREQUENCY=200.0,
                p_IDELAY_VALUE=default_delay, p_PIPE_SEL="FALSE", p_CINVCTRL_SEL="FALSE",
                i_C=ClockSignal(cd_ctl), i_LD=self.delay_load, i_CNTVALUEIN=self.delay,
                i_CE=0, i_INC=0, i_LDPIPEEN=0, i_REGRST=0, i_CINVCTRL=0, i_DATAIN=0,
                i_IDATAIN=ibuf, o_DATAOUT=dly),
            Instance("ISERDESE2",
                p_DATA_RATE="DDR", p_DATA_WIDTH=SERDES_RATIO, p_INTERFACE_TYPE="NETWORKING",
                p_NUM_CE=1, p_IOBDELAY="IFD", p_SERDES_MODE="MASTER",
                i_DDLY=dly, i_CE1=1, i_CE2=1, i_RST=ResetSignal(cd_div),
                i_CLK=clk_io, i_CLKB=~clk_io, i_CLKDIV=ClockSignal(cd_div),
                i_BITSLIP=self.bitslip, i_DYNCLKDIVSEL=0, i_DYNCLKSEL=0, i_OFB=0,
                i_OCLK=0, i_OCLKB=0,
                **{f"o_Q{k + 1}": q[k] for k in range(SERDES_RATIO)}),
        ]
        # Q8 is the oldest bit: lane bit 0.
        self.comb += self.data.eq(Cat(*reversed(q)))


class S7IdelayCtrl(LiteXModule):
    """IDELAYCTRL on ``cd_ref`` (200 MHz). Boards whose CRG already has one skip this."""

    def __init__(self, cd_ref: str = "idelay") -> None:
        self.ready = Signal()
        self.specials += Instance("IDELAYCTRL", i_REFCLK=ClockSignal(cd_ref),
                                  i_RST=ResetSignal(cd_ref), o_RDY=self.ready)


__all__ = ["SERDES_RATIO", "IDELAY_TAPS", "IDELAY_BITS", "S7LvdsTx", "S7LvdsRx", "S7ClockRx",
           "S7IdelayCtrl"]
