"""The 8b/10b model of the gt bench against known properties of the code."""

from __future__ import annotations

import random

import pytest

from gtmodel import (COMMA_M, COMMA_P, DEC, ENC, K_CHARS, BitErrors, CommaAligner,
                     Decoder8b10b, Encoder8b10b, SerialLane)


def test_every_code_word_has_disparity_0_or_2():
    for (byte, k, rd), (sym, rd_out) in ENC.items():
        ones = sym.count("1")
        assert len(sym) == 10 and ones in (4, 5, 6), (byte, k, rd, sym)
        # A non-neutral word always moves the running disparity towards the other side.
        if ones == 6:
            assert rd == -1 and rd_out == 1
        elif ones == 4:
            assert rd == 1 and rd_out == -1
        else:
            assert rd_out == rd
        # No run longer than five equal bits inside a symbol.
        assert "000000" not in sym and "111111" not in sym


def test_table_is_a_code():
    # 256 D + 12 K characters at each disparity; no symbol decodes two ways.
    assert len(ENC) == 2 * (256 + 12)
    for sym, entry in DEC.items():
        assert len(set(entry.values())) == 1, (sym, entry)
    assert len({v for e in DEC.values() for v in e.values()}) == 268


def test_known_symbols():
    assert ENC[(0xBC, 1, -1)][0] == "0011111010"   # K28.5 RD-
    assert ENC[(0xBC, 1, 1)][0] == "1100000101"    # K28.5 RD+
    assert ENC[(0x00, 0, -1)][0] == "1001110100"   # D0.0 RD-
    assert ENC[(0xFB, 1, -1)][0] == "1101101000"   # K27.7 RD-


def test_comma_only_in_k28_1_5_7():
    """The comma sequence occurs inside K28.1/5/7 only, never in another symbol and
    never across two symbols of a valid stream (singular comma)."""
    commas = {0x3C, 0xBC, 0xFC}
    for (byte, k, rd), (sym, _) in ENC.items():
        has = COMMA_P in sym or COMMA_M in sym
        assert has == (k == 1 and byte in commas), (hex(byte), k, sym)
        if has:
            assert sym.startswith(COMMA_P) or sym.startswith(COMMA_M)
    rng = random.Random(5)
    enc = Encoder8b10b()
    stream = "".join(enc.encode(rng.randrange(256), 0) for _ in range(20000))
    assert COMMA_P not in stream and COMMA_M not in stream


@pytest.mark.parametrize("start_rd", [-1, 1])
def test_round_trip_all_characters(start_rd):
    chars = [(b, 0) for b in range(256)] + [(k, 1) for k in K_CHARS]
    rng = random.Random(start_rd)
    seq = chars * 3
    rng.shuffle(seq)
    enc, dec = Encoder8b10b(), Decoder8b10b()
    enc.rd = dec.rd = start_rd
    for b, k in seq:
        assert dec.decode(enc.encode(b, k)) == (b, k, 0)
    assert len(K_CHARS) == 12


def test_decoder_flags_errors():
    dec = Decoder8b10b()
    assert dec.decode("0000000000")[2] == 1          # not in the table
    dec = Decoder8b10b()
    dec.rd = 1
    assert dec.decode(ENC[(0x00, 0, -1)][0])[2] == 1  # D0.0 RD- at RD+: disparity error


def test_bit_errors_rate():
    be = BitErrors(1e-3, random.Random(1))
    out = be.apply("0" * 1_000_000)
    assert out.count("1") == be.count
    assert 850 < be.count < 1150


@pytest.mark.parametrize("nbytes,slip", [(2, 3), (4, 17), (4, 0)])
def test_lane_aligns_and_decodes(nbytes, slip):
    """Idle clocks with a comma in lane 0 align the receiver after any bit slip."""
    rng = random.Random(slip)
    lane = SerialLane(nbytes, rng, slip=slip)
    sent = []
    for i in range(400):
        if i % 8 == 0:
            bs, ks = [0xBC] + [0x1C] * (nbytes - 1), [1] * nbytes
        else:
            bs, ks = [rng.randrange(256) for _ in range(nbytes)], [0] * nbytes
        lane.send(bs, ks)
        sent.append((bs, ks))
    got = [lane.receive() for _ in range(397)]
    # After alignment every clock comes out as sent, a fixed number of clocks later.
    tail = [(b, k) for b, k, e in got[100:]]
    assert all(sum(e) == 0 for _, _, e in got[100:])
    lat = [d for d in range(1, 5) if tail == sent[100 - d:397 - d]]
    assert lat, "received stream is not the sent one"
    assert lane.rx.realigns >= (1 if slip else 0)
