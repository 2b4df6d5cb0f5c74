"""PHY adapters: what sits between a link layer and a cable.

Every adapter moves one line word per cycle in each direction as a :func:`phy_layout`
stream: 64 data bits and the control flag that marks link control words. The
simulated cable the cluster simulator and the tests use is ``paranic.sim.cable``.
"""

from __future__ import annotations

from paranic.spec import protocol as P


def phy_layout(dw: int = P.WORD_BITS) -> list[tuple[str, int]]:
    """Layout of the PHY streams: one 64-bit word (a wide link: one ``dw``-bit beat)
    and its control flag per cycle."""
    P.beat_words(dw)
    return [("data", dw), ("ctrl", 1)]


def connect_phy(link_layer, adapter) -> list:
    """Statements joining a LinkLayer to a PHY adapter (the PHY adapter contract)."""
    return [
        link_layer.phy_tx.connect(adapter.sink),
        adapter.source.connect(link_layer.phy_rx),
        link_layer.phy_hold.eq(adapter.hold),
        link_layer.phy_up.eq(adapter.up),
    ]
