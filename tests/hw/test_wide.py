"""The router + link-layer datapath at 128 bits (issue 15 part 5), Migen simulation.

Routers, link layers and simulated cables built with ``dw=128``
(:class:`paranic.sim.testnet.RouterChain`): a stream of packets arrives intact and in
order and back to back (the framing's bound exactly), a single bit error in the upper
word of a beat is NAKed and replayed, and the cut-through hop of an MTU packet through
a middle router. The 64-bit behaviour is the other router/link tests' (unchanged).
"""

from __future__ import annotations

import random

import pytest

from paranic.bench import wide
from paranic.spec import link as LK
from paranic.spec import protocol as P


def test_beat_units():
    """A beat holds dw/64 words; a packet and a frame in beats (spec)."""
    assert [P.beat_words(w) for w in (64, 128, 256)] == [1, 2, 4]
    assert P.packet_beats(0, 128) == 1 and P.packet_beats(8, 128) == 2
    assert P.packet_beats(1024, 64) == P.packet_words(1024) == 130
    assert P.packet_beats(1024, 128) == 65 and P.packet_beats(1024, 256) == 33
    assert LK.frame_beats(1024, 64) == LK.frame_words(1024)
    assert LK.link_efficiency(1024, 128) == pytest.approx(1024 / (16 * 67))
    with pytest.raises(ValueError):
        P.beat_words(96)


def test_line_rate_to_clock_and_width():
    """A QSFP28 lane needs 128 bits (195.3 MHz at 25 Gb/s payload); an SFP+ lane 64."""
    assert LK.nic_clock_and_width(25.78125e9) == (pytest.approx(195.3125e6), 128)
    assert LK.nic_clock_and_width(10.3125e9) == (pytest.approx(156.25e6), 64)
    assert LK.nic_clock_and_width(10e9, code=(8, 10)) == (pytest.approx(125e6), 64)
    assert LK.nic_clock_and_width(25.78125e9, max_clk_hz=150e6)[1] == 256
    with pytest.raises(ValueError):
        LK.nic_clock_and_width(4 * 25.78125e9)


def test_checker_catches_broken_packing():
    """The stream check unpacks beats word by word: swapped words in a beat, a word
    shifted into the next beat, or a non-zero unused word fail it."""
    rng = random.Random(3)
    words = [wide.make_packet(rng, 40, tag=1, dst=1)]      # 7 words: last beat half used
    good = [wide.make_beats(w, 128) for w in words]
    wide.check_stream(words, good, 128)
    m = (1 << 64) - 1
    swapped = [[((b & m) << 64) | (b >> 64) for b in good[0]]]
    shifted = [wide.make_beats([0] + words[0][:-1], 128)]
    dirty = [good[0][:-1] + [good[0][-1] | (1 << 100)]]
    for broken in (swapped, shifted, dirty):
        with pytest.raises((AssertionError, ValueError)):
            wide.check_stream(words, broken, 128)


def test_stream_128_intact_in_order_back_to_back():
    """Six 256-byte packets node 0 -> node 1 at 128 bits: every one intact, in order,
    none bad; once streaming, one packet per frame_beats cycles (SOF + 17 beats +
    trailer: the framing's bound, no bubble)."""
    # Link buffers of 128 beats (7 packet slots of 17 beats, the MTU): with the default
    # two MTU packets (3 slots) the credit loop, whose round trip does not shrink with
    # the frames, lets only every other packet go back to back at 128 bits.
    res = wide.run_stream(dw=128, packets=6, length=256, nodes=2, router_kw={"buf_words": 128})
    wide.check_stream(res["sent_words"], res["received"], 128)
    assert res["bad"] == []
    gaps = {b - a for a, b in zip(res["t_last"], res["t_last"][1:])}
    assert gaps == {LK.frame_beats(256, 128)}
    assert wide.payload_fraction(res, 256) == pytest.approx(LK.link_efficiency(256, 128))
    assert res["counters"]["replays_a"] == 0 and res["counters"]["rx_packets_b"] == 6


def test_bit_error_128_replayed():
    """A bit flipped in the upper word of a data beat on the cable: the CRC-32 (over
    whole beats) fails, the frame is NAKed and replayed, and every packet still arrives
    once, intact and in order."""
    res = wide.run_stream(dw=128, packets=4, length=128, nodes=2, flip=(12, 64 + 37))
    wide.check_stream(res["sent_words"], res["received"], 128)
    assert res["bad"] == []
    c = res["counters"]
    assert c["crc_errors_b"] >= 1 and c["replays_a"] >= 1


@pytest.mark.slow
def test_hop_latency_128_mtu():
    """Cut-through at 128 bits: an MTU packet's header beat is valid on the middle
    router's link output 4 cycles after it arrived on its link input (as at 64 bits:
    tests/hw/test_router.py HOP), its tail 5 (the link layer takes the header a cycle
    late, sending the frame's SOF beat first), long before the tail of a 65-beat
    packet could have arrived for store-and-forward."""
    res = wide.run_stream(dw=128, packets=3, length=P.DEFAULT_MTU, nodes=3)
    wide.check_stream(res["sent_words"], res["received"], 128)
    print(f"\n  hop header {res['hop_header']}, tail {res['hop_tail']}")
    assert res["hop_header"] == [4, 4, 4] and res["hop_tail"] == [5, 5, 5]
