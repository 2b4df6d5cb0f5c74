"""The collective kernel's Migen twin (hw/collective_core.py) against its C++
(hls/collective): the same input message sequences, recorded from the C++ model cluster,
fed to both one message at a time; every output word must agree (tests/hls/collagree.py,
docs/hls.md "The Migen twin")."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from paranic import hls
from paranic.spec import kernels as K

import collagree as C


def _agree(seqs, stall_seeds=(0,)):
    cpp = C.run_cpp(seqs)
    assert len(cpp) == C.messages(seqs)
    for s in stall_seeds:
        mig = C.run_migen(seqs, stall_seed=s)
        bad = C.disagreements(seqs, cpp, mig)
        assert not bad, f"stall seed {s}: " + "\n".join(bad)
    return cpp


def test_csim_vectors_agree():
    """The csim bench's vectors (every op x type x reduction x size, each on a random
    cluster: three seeds, so each combination on three node counts and fan-outs; and the
    back-to-back sequences), every node's messages replayed."""
    cases = hls.sweep_cases(1) + hls.sweep_cases(2) + hls.sweep_cases(3) + hls.sequence_cases(20)
    cases += hls.a2a_cases(1) + hls.a2a_cases(2) + hls.sequence_cases(20, seed=4, a2a=0.7)
    seqs = C.record(cases)
    assert C.messages(seqs) > 5000
    _agree(seqs, stall_seeds=(0, 11))


def test_random_clusters_with_errors_and_strays_agree():
    """Random clusters (up to 16 nodes, fan-out 1, 2, 4 and radix_log2 3, four operations
    each, edge-case floats, 15 % of operations with a disagreeing or bad node), with
    foreign packets and random host commands mixed in; and single nodes of trees up to
    8191 nodes (node ids up to 4095); with and without stalls."""
    rng = random.Random(20261125)
    seqs = C.add_noise(rng, C.record(C.random_cases(rng, 150) + C.random_cases(rng, 60, a2a=0.7)), 0.05)
    assert C.messages(seqs) > 8000
    seqs += C.big_tree_sequences(rng, 400)
    _agree(seqs, stall_seeds=(0, 3))


def _pairs_case(dtype, values):
    """Two nodes: node 0's vector the first of each pair, node 1's the second; ALLREDUCE
    SUM, so node 0's result is a + b element-wise."""
    esz = K.COLL_TYPE_BYTES[dtype]
    per = K.COLL_MAX_BYTES // esz
    ops = []
    pairs = [(a, b) for a in values for b in values]
    for e in range(0, len(pairs), per):
        chunk = pairs[e:e + per]
        vecs = [b"".join(p[k].to_bytes(esz, "little") for p in chunk) for k in (0, 1)]
        ops.append(hls.CollOpCase(K.CollOp.ALLREDUCE, dtype, K.CollRed.SUM, 0, vecs, e // per))
    return hls.CollCase(2, 2, 1, ops), pairs


@pytest.mark.parametrize("dtype", [K.CollType.F32, K.CollType.F64])
def test_float_sum_of_every_pair_of_special_values(dtype):
    """Zeros, subnormals, the largest finite, infinities, NaNs (quiet, signalling, negative),
    ones and half-ulps: every pair summed; both agree, and node 0's results are IEEE's
    (numpy's), a NaN being the spec's canonical one."""
    bits = 8 * K.COLL_TYPE_BYTES[dtype]
    specials = C.F32_SPECIAL if bits == 32 else C.F64_SPECIAL
    case, pairs = _pairs_case(dtype, specials)
    seqs = C.record([case])
    cpp = _agree(seqs)
    # node 0's outputs: the results (host_out, 1 + 32 words) of its operations, in order
    got = []
    for line in cpp[:C.messages(seqs[:1])]:
        host = line[1:].split("|")[0].split()
        if len(host) > 1:
            got += [int(w, 16) for w in host[1:]]
    lanes = []
    for w in got:
        lanes += [w & 0xFFFFFFFF, w >> 32] if bits == 32 else [w]
    npt = np.float32 if bits == 32 else np.float64
    fmt = "<I" if bits == 32 else "<Q"
    qnan = K.COLL_F32_QNAN if bits == 32 else K.COLL_F64_QNAN
    assert len(lanes) == len(pairs)
    with np.errstate(all="ignore"):
        for (a, b), r in zip(pairs, lanes):
            x = np.frombuffer(struct.pack(fmt, a), npt)[0] + np.frombuffer(struct.pack(fmt, b), npt)[0]
            want = qnan if np.isnan(x) else struct.unpack(fmt, x.tobytes())[0]
            assert r == want, (hex(a), hex(b), hex(r), hex(want))


def test_make_core_gives_the_migen_twin_in_the_unit():
    """NicCore's option collective="migen": the unit with this core converts to Verilog."""
    from migen.fhdl.verilog import convert

    from paranic.hw.collective import CollectiveUnit, make_core
    from paranic.hw.collective_core import CollectiveMigen

    core = make_core("migen")
    assert isinstance(core, CollectiveMigen)
    u = CollectiveUnit(core)
    ios = {u.node_id, u.enable, u.ctx}
    for ep in (u.host_sink, u.host_source, u.net_sink, u.net_source):
        ios |= {ep.valid, ep.ready, ep.first, ep.last, ep.data}
    assert "module" in str(convert(u, ios=ios, name="coll_unit"))


@pytest.mark.slow
def test_long_random_agreement():
    """100 000+ messages: random clusters up to 40 nodes (half the ALLREDUCEs all-to-all; on more
    than 32 nodes those are answered at once), noise, big trees, random stalls."""
    rng = random.Random(4242)
    seqs = []
    while C.messages(seqs) < 100_000:
        seqs += C.add_noise(rng, C.record(C.random_cases(rng, 200, max_nodes=40, ops=6, a2a=0.5)), 0.05)
        seqs += C.big_tree_sequences(rng, 300)
    _agree(seqs, stall_seeds=(0, 99))


def test_all_to_all_sends_and_agrees():
    """An all-to-all ALLREDUCE command at node 3 of 4: the vector goes to the three other
    members in the barrier's a2a_order, header phase UP with a2a, from both kernels; then
    the members' vectors complete it (an I64 SUM, so no order shows), and a tree command after it."""
    from paranic.hw.barrier import a2a_order
    h = dict(op=int(K.CollOp.ALLREDUCE), dtype=int(K.CollType.I64), nbytes=8, nodes=4, episode=5, a2a=1)
    up = K.pack_coll(**h)
    msgs = [("h", [up, 7])] + [("n", C._net(s, 3, up, [10 + s])) for s in (2, 0, 1)]
    msgs += [("h", [K.pack_coll(**{**h, "episode": 6, "a2a": 0}), 9])]
    seqs = [C.Seq(3, 2, msgs)]     # node 3 of 4, fan-out 4: a leaf of the tree
    cpp = _agree(seqs, stall_seeds=(0, 5))
    host, net = cpp[0][1:].split("|")
    assert not host.split() and len(net.split()) == 3 * 4      # three packets of 4 words
    assert [int(w, 16) & 0xFFF for w in net.split()[0::4]] == a2a_order(3, 4)
    assert all(int(w, 16) == up for w in net.split()[2::4])
    res = cpp[3].split("|")[0].split()[1:]                     # the last member's packet completes it
    assert [int(w, 16) for w in res] == [K.pack_coll(**h, phase=int(K.CollPhase.DOWN)), 10 + 11 + 12 + 7]
