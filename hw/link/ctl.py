"""Link control words in gateware: the field slices of :data:`paranic.spec.link.CTL_FIELDS`."""

from __future__ import annotations

from paranic.spec.link import CTL, CtlKind


def ctl_slice(sig, name: str):
    """Slice of a control word (or its 48-bit body) holding field ``name``."""
    f = CTL[name]
    return sig[f.offset:f.offset + f.width]


def is_filler(data, ctrl):
    """True for a line word a PHY may drop: a STATUS or TRAIN control word without a NAK.

    STATUS words carry cumulative ACKs and credits, so the next one repeats what a
    dropped one said; TRAIN words repeat until the partner answers. A NAK is sent once
    per error, so a word carrying one is kept. A word with a flipped bit may be
    misjudged either way; the link layer's checks catch that as for any other error.
    """
    kind = ctl_slice(data, "kind")
    return ctrl & ((kind == CtlKind.STATUS) | (kind == CtlKind.TRAIN)) & ~ctl_slice(data, "nak")
