"""Numeric command-line options of the ``paranic`` tools, checked where they are parsed.

argparse's ``type=float`` takes ``nan`` and ``inf``, and ``type=int`` any integer; the
types here refuse what no option can mean (not finite, out of range) with one clear
line (``argparse.ArgumentTypeError``: the CLI prints it and exits 2), before anything
is built or started. Only the standard library: the CLI must not need libparanic to
parse its options (the bindings' argument checks are :mod:`paranic.argcheck`).
"""

from __future__ import annotations

import argparse
import math
from typing import Callable


def finite_float(lo: float, hi: float, what: str = "a number") -> Callable[[str], float]:
    """An argparse type: a finite float in ``lo..hi`` (``nan``, ``inf`` refused)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"{text!r}: must be a finite number in {lo:g}..{hi:g}")
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range {lo:g}..{hi:g}")
        return v

    parse.__name__ = "number"   # argparse names the type in its messages
    return parse


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi``."""

    def parse(text: str) -> int:
        try:
            v = int(text, 0) if text.strip().lower().startswith(("0x", "-0x")) else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is out of range {lo}..{hi}")
        return v

    parse.__name__ = "integer"
    return parse


#: ``--ber``: a bit-error rate.
ber = finite_float(0.0, 1.0, "a bit-error rate (0..1)")
#: ``--timeout`` of ``paranic run``/``mpirun`` in seconds (0: none): at most a year.
MAX_TIMEOUT_S = 365 * 86400
timeout_s = int_in(0, MAX_TIMEOUT_S)
