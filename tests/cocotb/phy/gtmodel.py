"""Transceiver-level model of an 8b/10b serial lane for the gt adapter's cocotb bench.

* :class:`Encoder8b10b` / :class:`Decoder8b10b`: IBM 8b/10b with running disparity,
  built from the standard 5b/6b and 3b/4b tables below (written out from the
  published code tables, Widmer & Franaszek 1983 / IEEE 802.3 clause 36).
* :class:`SerialLane`: one direction of a cable: the sender's characters are encoded
  and serialised into a bit stream (first bit first), optionally with bit errors
  (a geometric gap generator: exact BER, no per-bit random draw), bit slips (a bit
  dropped or repeated) and a cut (the line goes quiet: all zeros).
* :class:`CommaAligner`: the receiver: takes 10 x W bits per recovered clock, realigns
  whenever a comma (0011111 / 1100000) shows up anywhere but at the start of its
  word, like a GT's comma aligner with ALIGN_COMMA_WORD = W, and decodes.

Symbols are strings of '0'/'1' in transmission order ("abcdei fghj").
"""

from __future__ import annotations

import random

# 5b/6b: EDCBA value -> (abcdei for RD-, abcdei for RD+)
_5B6B = {
    0: ("100111", "011000"), 1: ("011101", "100010"), 2: ("101101", "010010"),
    3: ("110001", "110001"), 4: ("110101", "001010"), 5: ("101001", "101001"),
    6: ("011001", "011001"), 7: ("111000", "000111"), 8: ("111001", "000110"),
    9: ("100101", "100101"), 10: ("010101", "010101"), 11: ("110100", "110100"),
    12: ("001101", "001101"), 13: ("101100", "101100"), 14: ("011100", "011100"),
    15: ("010111", "101000"), 16: ("011011", "100100"), 17: ("100011", "100011"),
    18: ("010011", "010011"), 19: ("110010", "110010"), 20: ("001011", "001011"),
    21: ("101010", "101010"), 22: ("011010", "011010"), 23: ("111010", "000101"),
    24: ("110011", "001100"), 25: ("100110", "100110"), 26: ("010110", "010110"),
    27: ("110110", "001001"), 28: ("001110", "001110"), 29: ("101110", "010001"),
    30: ("011110", "100001"), 31: ("101011", "010100"),
}
_K28_6B = ("001111", "110000")
# 3b/4b: HGF value -> (fghj for RD-, fghj for RD+)
_3B4B_D = {0: ("1011", "0100"), 1: ("1001", "1001"), 2: ("0101", "0101"), 3: ("1100", "0011"),
           4: ("1101", "0010"), 5: ("1010", "1010"), 6: ("0110", "0110"), 7: ("1110", "0001")}
_D_A7 = ("0111", "1000")
_3B4B_K = {0: ("1011", "0100"), 1: ("0110", "1001"), 2: ("1010", "0101"), 3: ("1100", "0011"),
           4: ("1101", "0010"), 5: ("0101", "1010"), 6: ("1001", "0110"), 7: ("0111", "1000")}

#: The twelve valid K characters.
K_CHARS = tuple([0x1C | (y << 5) for y in range(8)] + [0xF7, 0xFB, 0xFD, 0xFE])
COMMA_P, COMMA_M = "0011111", "1100000"


def _disp(bits: str) -> int:
    return 2 * bits.count("1") - len(bits)


def _encode(byte: int, k: int, rd: int) -> str:
    """Symbol for ``byte`` (K if ``k``) at running disparity ``rd`` (-1/+1)."""
    x, y = byte & 0x1F, byte >> 5
    col = 0 if rd < 0 else 1
    if k:
        if byte not in K_CHARS:
            raise ValueError(f"not a K character: {byte:#04x}")
        six = _K28_6B[col] if x == 28 else _5B6B[x][col]
    else:
        six = _5B6B[x][col]
    rd6 = rd if _disp(six) == 0 else -rd
    col4 = 0 if rd6 < 0 else 1
    if k:
        four = _3B4B_K[y][col4]
    elif y == 7 and ((rd6 < 0 and x in (17, 18, 20)) or (rd6 > 0 and x in (11, 13, 14))):
        four = _D_A7[col4]
    else:
        four = _3B4B_D[y][col4]
    return six + four


#: (byte, k, rd) -> (symbol, rd after); symbol -> {rd_in: (byte, k)}
ENC: dict[tuple[int, int, int], tuple[str, int]] = {}
DEC: dict[str, dict[int, tuple[int, int]]] = {}
for _rd in (-1, 1):
    for _b in range(256):
        for _k in (0, 1):
            if _k and _b not in K_CHARS:
                continue
            _s = _encode(_b, _k, _rd)
            _d = _disp(_s)
            ENC[(_b, _k, _rd)] = (_s, _rd if _d == 0 else -_rd)
            DEC.setdefault(_s, {})[_rd] = (_b, _k)


class Encoder8b10b:
    """Running-disparity encoder (starts at RD-)."""

    def __init__(self) -> None:
        self.rd = -1

    def encode(self, byte: int, k: int = 0) -> str:
        s, self.rd = ENC[(byte, k, self.rd)]
        return s


class Decoder8b10b:
    """Decoder with running disparity: ``decode`` -> (byte, k, error)."""

    def __init__(self) -> None:
        self.rd = -1

    def decode(self, sym: str) -> tuple[int, int, int]:
        d = _disp(sym)
        entry = DEC.get(sym)
        if entry is None:
            # Not in the table: resynchronise the disparity from the symbol if we can.
            if d:
                self.rd = 1 if d > 0 else -1
            return 0, 0, 1
        err = 0
        if self.rd in entry:
            byte, k = entry[self.rd]
        else:
            (byte, k), = entry.values()
            err = 1        # disparity error: valid symbol, wrong running disparity
        if d:
            self.rd = 1 if d > 0 else -1
        return byte, k, err


class BitErrors:
    """Flips bits at a given bit error rate (exponential gaps between errors)."""

    def __init__(self, ber: float, rng: random.Random) -> None:
        self.ber = ber
        self.rng = rng
        self.count = 0
        self.gap = self._draw()

    def _draw(self) -> int:
        if self.ber <= 0:
            return 1 << 62
        return int(self.rng.expovariate(self.ber))

    def apply(self, bits: str) -> str:
        n = len(bits)
        if self.gap >= n:
            self.gap -= n
            return bits
        out = list(bits)
        pos = self.gap
        while pos < n:
            out[pos] = "1" if out[pos] == "0" else "0"
            self.count += 1
            pos += 1 + self._draw()
        self.gap = pos - n
        return "".join(out)


class SerialLane:
    """One direction of the cable: characters in, bits through the line, characters out.

    ``send(bytes_, ks)`` encodes one transceiver clock's characters (lane 0 first) and
    appends their bits to the line; ``receive()`` returns the receiver's view of one
    clock: ``(bytes_, ks, errs)``. The line keeps ``latency`` clocks of bits in flight.
    """

    def __init__(self, nbytes: int, rng: random.Random, ber: float = 0.0, slip: int = 0,
                 latency: int = 3) -> None:
        self.nbytes = nbytes
        self.enc = Encoder8b10b()
        self.rx = CommaAligner(nbytes)
        self.errors = BitErrors(ber, rng)
        self.rng = rng
        self.cut = False
        # Random initial bit slip: the receiver starts somewhere inside a symbol.
        self.line = "".join(rng.choice("01") for _ in range(latency * 10 * nbytes + slip))
        self.slips = 0

    def set_ber(self, ber: float) -> None:
        self.errors.ber = ber
        self.errors.gap = self.errors._draw()

    def slip(self, drop: bool = True) -> None:
        """Lose (``drop``) or repeat one bit on the line: the receiver loses alignment."""
        self.line = self.line[1:] if drop else self.line[:1] + self.line
        self.slips += 1

    def send(self, bytes_: list[int], ks: list[int]) -> None:
        bits = "".join(self.enc.encode(b, k) for b, k in zip(bytes_, ks))
        if self.cut:
            bits = "0" * len(bits)
        self.line += self.errors.apply(bits)

    def receive(self) -> tuple[list[int], list[int], list[int]]:
        n = 10 * self.nbytes
        word, self.line = self.rx.take(self.line, n)
        return self.rx.decode(word)


class CommaAligner:
    """Receiver: word alignment on commas, like a GT with ALIGN_COMMA_WORD = nbytes.

    Every clock it looks for a comma in the next word's bits; a comma that does not
    start at bit 0 of the word moves the alignment (the bits before it are skipped)
    so that it lands in byte lane 0. ``realigns`` counts the moves.
    """

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.dec = Decoder8b10b()
        self.realigns = 0
        self.aligned = False

    def take(self, line: str, n: int) -> tuple[str, str]:
        window = line[:n + 6]
        p = min((i for i in (window.find(COMMA_P), window.find(COMMA_M)) if i >= 0), default=-1)
        if 0 < p < n:
            self.realigns += 1
            line = line[p:]
        if p == 0:
            self.aligned = True
        if len(line) < n:   # should not happen: the line keeps clocks of latency
            line = line + "0" * (n - len(line))
        return line[:n], line[n:]

    def decode(self, word: str) -> tuple[list[int], list[int], list[int]]:
        bs, ks, es = [], [], []
        for i in range(self.nbytes):
            b, k, e = self.dec.decode(word[10 * i:10 * i + 10])
            bs.append(b)
            ks.append(k)
            es.append(e)
        return bs, ks, es
