"""ParaNIC's spec: the facts every part agrees on, defined once, importing nothing of ours.

=================  ============================================================
``protocol``       packet header, types, flags, ports, context page, context-state
                   bits, RX slot, DMA descriptor, status block, PCI ids, BAR0 map
``topo``           rings and 2-D tori, node coordinates, routing tables
``link``           line words, link control words, CRCs, framing, link states
``sim``            the cluster simulator's client protocol and cable error model
``fields``         bit-field structures (``Field``, pack, unpack)
``cstruct``        C structures described once for C and Python
``cgen``           generated C headers (pn_protocol.h, pn_sim_shm.h, pn_csr.h)
``docgen``         generated tables of the documents in docs/
=================  ============================================================

Everything above it (gateware, simulator, C library, driver, tools) takes its constants
from here or from the headers generated here. ``python -m paranic.spec`` regenerates
the headers and the documents' tables (``--check``: only compare, exit 1 if stale).
"""
