"""Link control words in gateware: the field slices of :data:`paranic.spec.link.CTL_FIELDS`."""

from __future__ import annotations

from paranic.spec.link import CTL


def ctl_slice(sig, name: str):
    """Slice of a control word (or its 48-bit body) holding field ``name``."""
    f = CTL[name]
    return sig[f.offset:f.offset + f.width]
