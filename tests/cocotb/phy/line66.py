"""One direction of a 64b/66b serial lane for the gt66 benches (Migen and cocotb):
the transmitter's G raw bits per clock, bit 0 first, reach the far receiver with a
random start offset, bit errors at a given rate and bit slips."""

from __future__ import annotations

import random


class Line:
    """G bits per transmitter clock: a start offset (bits of noise first), bit errors at
    rate ``ber`` (exponential gaps), ``slip()`` loses a bit or repeats one, ``cut``
    sends zeros (a pulled cable: every sync header invalid)."""

    def __init__(self, g: int, rng: random.Random, ber: float = 0.0):
        self.g, self.rng, self.ber = g, rng, ber
        self.offset = rng.randrange(1, 2 * g)
        self.q = rng.getrandbits(self.offset)     # queued bits, bit 0 next
        self.n = self.offset
        self.errors = 0
        self.next_err = self._gap()
        self.slips = 0
        self.cut = False

    def _gap(self) -> int:
        if not self.ber:
            return 1 << 62
        return int(self.rng.expovariate(self.ber)) + 1

    def step(self, word: int) -> int:
        """The word the receiver gets in the clock the transmitter sends ``word``."""
        if self.cut:
            word = 0
        while self.next_err < self.g:
            word ^= 1 << self.next_err
            self.errors += 1
            self.next_err += self._gap()
        self.next_err -= self.g
        self.q |= word << self.n
        out = self.q & ((1 << self.g) - 1)
        self.q >>= self.g
        return out

    def slip(self, repeat: bool = False) -> None:
        """Lose a bit (the lock needs 65 slips to find the boundary again) or, with
        ``repeat``, send one twice (one slip)."""
        self.slips += 1
        if repeat:
            self.q = (self.q << 1) | (self.q & 1)
            self.n += 1
            return
        self.q >>= 1
        self.n -= 1
        if self.n < 1:
            self.q = (self.q << self.g) | self.rng.getrandbits(self.g)
            self.n += self.g
