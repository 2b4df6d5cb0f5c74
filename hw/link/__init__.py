"""The link layer: reliable, credit-carrying framing of router packets over one PHY lane.

=============  ===================================================================
``layer.py``   :class:`LinkLayer`: TX + RX + training + counters and CSRs
``tx.py``      :class:`LinkTX`: framer, replay buffer (go-back-N), ACK timer
``rx.py``      :class:`LinkRX`: checks, delivery to the router, far end's ACK/credits
``crc.py``     CRC-32/CRC-16 one word per cycle
``ctl.py``     control-word field slices
=============  ===================================================================

The wire format (control words, CRC polynomials, framing overhead, link states) is
the spec's (:mod:`paranic.spec.link`); ``docs/link-layer.md`` describes the protocol.
"""

from .layer import COUNTERS, LinkLayer, default_ack_timeout, default_replay_words
from .rx import LinkRX
from .tx import LinkTX

__all__ = ["COUNTERS", "LinkLayer", "LinkRX", "LinkTX", "default_ack_timeout", "default_replay_words"]
