"""The credit loop of one link over the sim cluster's cable (LinkChannel: two link
layers and a SimPhy), measured in Migen by paranic.bench.router_study.credit_round_trip:
the link layer's share of it is fixed (delay + 4 cycles each way on an idle link), every
word's credit comes back, and the round trip is the sum of its parts. The router's
share (``hold``) is what its design makes it (store-and-forward: the whole packet)."""

from paranic.bench.router_study import credit_round_trip
from paranic.spec import protocol as P


def test_credit_round_trip_parts():
    r = credit_round_trip(delay=2, reverse_busy=False, packets=1, mtu=64)
    words = P.packet_words(64)
    assert r["words"] == words            # every word's credit came back
    for part in ("forward", "back"):      # the link layer: SOF/registers + the cable
        assert r[part]["min"] == r[part]["max"] == 2 + 4
    assert r["hold"]["min"] >= 1
    assert r["round_trip"]["median"] == (r["forward"]["median"] + r["hold"]["median"]
                                         + r["back"]["median"])
