"""The credit loop of one link over the sim cluster's cable (LinkChannel: two link
layers and a SimPhy), measured in Migen by paranic.bench.router_study.credit_round_trip:
the link layer's share of it is fixed (delay + 1 cycles forward, delay + 2 back on an
idle link; delay + 4 each way while LinkTX had an output register and LinkRX an input
and an output register), every
word's credit comes back, and the round trip is the sum of its parts. The router's
share (``hold``) is what its design makes it. Under cut-through a word drained before its
frame's CRC verdict is credited only with the verdict (docs/link-layer.md, "Cut-through and
stomping"), so the way back of early words includes waiting for the tail."""

from paranic.bench.router_study import credit_round_trip
from paranic.spec import protocol as P


def test_credit_round_trip_parts():
    r = credit_round_trip(delay=2, reverse_busy=False, packets=1, mtu=64)
    words = P.packet_words(64)
    assert r["words"] == words            # every word's credit came back
    # the link layer: the cable + the receiver's one-word hold
    assert r["forward"]["min"] == r["forward"]["max"] == 2 + 1
    # Cut-through: a word drained before its frame's tail (CRC verdict) has arrived is
    # credited only with the verdict, so early words wait up to the frame's length.
    # back: the drained count's register, the cable, the registered credit_valid
    assert r["back"]["min"] == 2 + 2
    assert r["back"]["max"] <= 2 + 2 + words
    assert r["hold"]["min"] >= 1
    assert r["round_trip"]["median"] == (r["forward"]["median"] + r["hold"]["median"]
                                         + r["back"]["median"])
