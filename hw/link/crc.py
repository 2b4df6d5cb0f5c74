"""CRCs in gateware: one 64-bit word per cycle.

:func:`crc_next` is the parallel step of a reflected CRC (the link layer uses it for the
frame trailer's CRC-32 and the control word's CRC-16, with the polynomials of
:mod:`paranic.spec.link`, whose bit-serial references the tests compare against).
"""

from __future__ import annotations

import operator
from functools import reduce

from migen import Constant, Module, Mux, Signal

from paranic.spec import protocol as P
from paranic.spec.link import CRC32_POLY


def crc_taps(width: int, poly: int, data_width: int) -> list[tuple[list[int], list[int]]]:
    """XOR equations of a reflected CRC advanced by ``data_width`` bits at once.

    Data bits enter LSB first (bit 0 of a little-endian word is the first bit on the
    wire). Returns, for every bit of the next CRC state, the list of current-state
    bits and the list of data bits whose XOR gives it. Computed by running the
    bit-serial LFSR on symbolic values (sets of variables, XOR = symmetric difference).
    """
    state = [frozenset([("s", i)]) for i in range(width)]
    for j in range(data_width):
        fb = state[0] ^ frozenset([("d", j)])
        nxt = state[1:] + [frozenset()]
        for i in range(width):
            if (poly >> i) & 1:
                nxt[i] = nxt[i] ^ fb
        state = nxt
    return [(sorted(i for k, i in s if k == "s"), sorted(i for k, i in s if k == "d"))
            for s in state]


def crc_next(last, data, width: int, poly: int):
    """Migen expression: CRC state ``last`` (``width`` bits, or an int) advanced over ``data``.

    The step is linear: the XOR of one constant column per set input bit. For a
    reflected CRC, state bit ``j`` enters exactly like data bit ``j``, so the two are
    XORed first (64 terms for CRC-32 over a word instead of 96). Written per column
    the expression stays small, which keeps Verilator's C++ and Migen's simulator
    fast; synthesis sees the same XOR network as a per-bit formulation. Use it
    directly in ``sync`` statements on registered inputs.
    """
    data_width = len(data)
    taps = crc_taps(width, poly, data_width)
    s_cols, d_cols = [0] * width, [0] * data_width
    for i, (s_bits, d_bits) in enumerate(taps):
        for j in s_bits:
            s_cols[j] |= 1 << i
        for j in d_bits:
            d_cols[j] |= 1 << i

    def sbit(j):
        return Constant((last >> j) & 1, 1) if isinstance(last, int) else last[j]

    terms = []
    for j in range(max(width, data_width)):
        sc = s_cols[j] if j < width else 0
        dc = d_cols[j] if j < data_width else 0
        if sc and sc == dc:
            terms.append(Mux(data[j] ^ sbit(j), Constant(sc, width), 0))
            continue
        if sc:
            terms.append(Mux(sbit(j), Constant(sc, width), 0))
        if dc:
            terms.append(Mux(data[j], Constant(dc, width), 0))
    return reduce(operator.xor, terms)


class CRCEngine(Module):
    """Combinational CRC step: ``next`` = CRC state ``last`` advanced over ``data``.

    No init and no final XOR here: the users load ``CRC*_INIT`` and complement the
    result themselves. (The link layer itself uses :func:`crc_next` inside its
    ``sync`` statements.)
    """

    def __init__(self, data_width: int = P.WORD_BITS, width: int = 32, poly: int = CRC32_POLY):
        self.data = Signal(data_width)
        self.last = Signal(width)
        self.next = Signal(width)
        self.comb += self.next.eq(crc_next(self.last, self.data, width, poly))


# ---------------------------------------------------------------------------
# Control words
