"""The router-port pins of a link bench: what ``tb_link.Side`` drives and reads, one
list for every bench that puts a LinkLayer behind a PHY (link, ribbon, gt)."""

from __future__ import annotations

from typing import Callable

from migen import Signal


def router_port_pins(pin: Callable[..., Signal], side: str, port) -> list:
    """Statements joining ``port`` (a ``LinkPortIf``) to the pins ``{side}_tx_*``,
    ``{side}_rx_*`` (with ``{side}_rx_words``: the SOF's length beside a packet's first
    word), ``{side}_credit_*``, ``{side}_drained``, ``{side}_up`` and ``{side}_buf_free``
    (input: free words in the bench's buffer model). ``pin(name, width=1)`` makes a pin."""
    w = len(port.source.data)
    return [
        port.source.valid.eq(pin(f"{side}_tx_valid")),
        port.source.first.eq(pin(f"{side}_tx_first")),
        port.source.last.eq(pin(f"{side}_tx_last")),
        port.source.data.eq(pin(f"{side}_tx_data", w)),
        pin(f"{side}_tx_ready").eq(port.source.ready),
        pin(f"{side}_rx_valid").eq(port.sink.valid),
        pin(f"{side}_rx_first").eq(port.sink.first),
        pin(f"{side}_rx_last").eq(port.sink.last),
        pin(f"{side}_rx_error").eq(port.sink.error),
        pin(f"{side}_rx_data", w).eq(port.sink.data),
        port.sink.ready.eq(pin(f"{side}_rx_ready")),
        pin(f"{side}_credit_valid").eq(port.credit_valid),
        pin(f"{side}_credit_words", 16).eq(port.credit_words),
        port.drained.eq(pin(f"{side}_drained")),
        pin(f"{side}_up").eq(port.up),
        pin(f"{side}_rx_words", len(port.sink_words)).eq(port.sink_words),
        port.buf_free.eq(pin(f"{side}_buf_free", 16)),
    ]
