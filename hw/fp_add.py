"""IEEE-754 binary floating-point addition in Migen: :class:`FPAdd`.

Round to nearest even, subnormal operands and results, infinities; every NaN result (a
NaN operand, or inf - inf) is one given NaN, so the result is a function of the operands'
values (the collective kernel's float SUM, hw/collective_core.py, gives the spec's
canonical NaN). A pipeline of 5 stages, one operation per cycle; a multiplier-free design
(no DSP): compare and swap, align with guard/round/sticky bits, add or subtract, normalize,
round and pack.
"""

from __future__ import annotations

from migen import Cat, If, Module, Mux, Replicate, Signal


class FPAdd(Module):
    """IEEE-754 binary addition ``a + b`` (``ebits`` exponent, ``mbits`` fraction bits),
    round to nearest even, subnormals in and out; a NaN result (a NaN operand, or
    inf - inf) is ``qnan``. A pipeline of ``LATENCY`` cycles: the result of
    the operands present at cycle t is on ``result`` at t + LATENCY."""

    LATENCY = 5

    def __init__(self, ebits: int, mbits: int, qnan: int) -> None:
        n = 1 + ebits + mbits
        self.a = Signal(n)
        self.b = Signal(n)
        self.result = Signal(n)

        # # #

        emax = (1 << ebits) - 1
        assert (qnan >> mbits) & emax == emax and qnan & ((1 << mbits) - 1), "qnan: not a NaN"
        mw = mbits + 4                          # mantissa with the implicit bit and G, R, S
        sync = self.sync

        def unpack(x):
            e, f = x[mbits:n - 1], x[:mbits]
            return x[n - 1], e, f, (e == emax) & (f != 0), (e == emax) & (f == 0)

        # Stage 1: specials; the operands ordered by magnitude, exponents made effective.
        sa, ea, fa, nan_a, inf_a = unpack(self.a)
        sb, eb, fb, nan_b, inf_b = unpack(self.b)
        swap = Signal()
        self.comb += swap.eq(self.b[:n - 1] > self.a[:n - 1])
        big, small = Signal(n), Signal(n)
        self.comb += If(swap, big.eq(self.b), small.eq(self.a)).Else(big.eq(self.a), small.eq(self.b))
        s1_special, s1_sval = Signal(), Signal(n)
        s1_sign, s1_sub = Signal(), Signal()
        s1_e, s1_es = Signal(ebits), Signal(ebits)
        s1_mb, s1_ms = Signal(mbits + 1), Signal(mbits + 1)
        eB, eS = big[mbits:n - 1], small[mbits:n - 1]
        sync += [
            s1_special.eq(nan_a | nan_b | inf_a | inf_b),
            If(nan_a | nan_b | (inf_a & inf_b & (sa != sb)), s1_sval.eq(qnan)
            ).Elif(inf_a, s1_sval.eq(self.a)
            ).Else(s1_sval.eq(self.b)),
            s1_sign.eq(big[n - 1]),
            s1_sub.eq(sa != sb),
            s1_e.eq(Mux(eB == 0, 1, eB)),
            s1_es.eq(Mux(eS == 0, 1, eS)),
            s1_mb.eq(Cat(big[:mbits], eB != 0)),
            s1_ms.eq(Cat(small[:mbits], eS != 0)),
        ]

        # Stage 2: align the smaller one (G, R and a sticky bit below its last bit).
        d = Signal(ebits)
        dc = Signal(max=mw + 2)
        self.comb += [d.eq(s1_e - s1_es), dc.eq(Mux(d > mw + 1, mw + 1, d))]
        wide = Signal(2 * mw + 1)
        self.comb += wide.eq(Cat(Replicate(0, mw + 1 + 3), s1_ms) >> dc)
        s2 = dict(special=Signal(), sval=Signal(n), sign=Signal(), sub=Signal(), e=Signal(ebits),
                  mb=Signal(mw), ms=Signal(mw))
        sync += [
            s2["special"].eq(s1_special), s2["sval"].eq(s1_sval), s2["sign"].eq(s1_sign),
            s2["sub"].eq(s1_sub), s2["e"].eq(s1_e),
            s2["mb"].eq(Cat(Replicate(0, 3), s1_mb)),
            s2["ms"].eq(Cat(wide[mw + 1] | (wide[:mw + 1] != 0), wide[mw + 2:])),
        ]

        # Stage 3: add or subtract the magnitudes (the bigger minus the smaller: >= 0).
        s3 = dict(special=Signal(), sval=Signal(n), sign=Signal(), sub=Signal(), e=Signal(ebits),
                  m=Signal(mw + 1))
        sync += [
            s3["special"].eq(s2["special"]), s3["sval"].eq(s2["sval"]), s3["sign"].eq(s2["sign"]),
            s3["sub"].eq(s2["sub"]), s3["e"].eq(s2["e"]),
            s3["m"].eq(Mux(s2["sub"], s2["mb"] - s2["ms"], s2["mb"] + s2["ms"])),
        ]

        # Stage 4: normalize: right by one on a carry; left by the leading zeros, but not
        # below the smallest exponent (a subnormal result).
        m3 = s3["m"]
        lz = Signal(max=mw + 1)
        for i in range(mw):          # the highest set bit wins (the last assignment)
            self.comb += If(m3[i], lz.eq(mw - 1 - i))
        sh = Signal(max=mw + 1)
        self.comb += sh.eq(Mux(lz > s3["e"] - 1, s3["e"] - 1, lz))
        s4 = dict(special=Signal(), sval=Signal(n), sign=Signal(), zero=Signal(),
                  e=Signal(ebits + 1), m=Signal(mw))
        sync += [
            s4["special"].eq(s3["special"]), s4["sval"].eq(s3["sval"]),
            s4["zero"].eq(m3 == 0),
            s4["sign"].eq(Mux((m3 == 0) & s3["sub"], 0, s3["sign"])),   # x + (-x) = +0
            If(m3[mw],
                s4["e"].eq(s3["e"] + 1),
                s4["m"].eq(Cat(m3[0] | m3[1], m3[2:mw + 1])),
            ).Else(
                s4["e"].eq(s3["e"] - sh),
                s4["m"].eq(m3[:mw] << sh),
            ),
        ]

        # Stage 5: round to nearest even and pack (a carry out of the fraction goes into the
        # exponent: a subnormal becomes normal, the largest finite becomes infinity).
        m4, e4 = s4["m"], s4["e"]
        efield = Signal(ebits + 1)
        self.comb += efield.eq(Mux(m4[mw - 1], e4, 0))
        rup = Signal()
        self.comb += rup.eq(m4[2] & (m4[1] | m4[0] | m4[3]))
        packed = Signal(n)
        self.comb += packed.eq(Cat(m4[3:3 + mbits], efield[:ebits]) + rup)
        sync += If(s4["special"], self.result.eq(s4["sval"])
            ).Elif(s4["zero"], self.result.eq(Cat(Replicate(0, n - 1), s4["sign"]))
            ).Elif(efield >= emax, self.result.eq(Cat(Replicate(0, mbits), Replicate(1, ebits), s4["sign"]))
            ).Else(self.result.eq(Cat(packed[:n - 1], s4["sign"])))
