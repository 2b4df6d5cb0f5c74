"""The one definition of the packet format: Python helpers and the generated C header agree."""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from paranic.spec import cgen, docgen
from paranic.spec import protocol as P

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "userlib/include/paranic/pn_protocol.h"


@pytest.mark.parametrize("fields,nbits", [(P.HEADER_FIELDS, 128), (P.TX_DESC_FIELDS, 256),
                                          (P.STATUS_FIELDS, 128)])
def test_fields_tile_the_structure(fields, nbits):
    covered = 0
    for f in fields:
        m = f.mask << f.offset
        assert covered & m == 0, f"{f.name} overlaps"
        covered |= m
    assert covered == (1 << nbits) - 1


def test_header_roundtrip_random():
    rng = random.Random(1)
    for _ in range(500):
        v = {f.name: rng.getrandbits(f.width) for f in P.HEADER_FIELDS}
        assert P.unpack_header(P.pack_header(**v)) == v


def test_header_rejects_bad_values():
    with pytest.raises(ValueError):
        P.pack_header(dst_node=P.MAX_NODES)
    with pytest.raises(KeyError):
        P.pack_header(nonsense=1)
    with pytest.raises(ValueError):
        P.unpack_header(b"\0" * 8)


def test_layout_sizes():
    assert P.rx_slot_bytes(1024) == 1088
    assert P.rx_slot_bytes(1024) % 64 == 0
    assert P.rx_valid_offset(1024) == 1080
    assert P.packet_words(0) == 2 and P.packet_words(1) == 3 and P.packet_words(8) == 3
    assert P.HEADER_BYTES + P.DEFAULT_MTU <= P.PIO_WINDOW_BYTES
    with pytest.raises(ValueError):
        P.rx_slot_bytes(1001)
    assert P.words_to_bytes(P.bytes_to_words(b"abcdefghij"), 10) == b"abcdefghij"


def test_c_header_is_up_to_date():
    assert HEADER.read_text() == cgen.protocol_header(), "run `make headers`"


C_PROG = r"""
#include <stdio.h>
#include <stdint.h>
#include "paranic/pn_protocol.h"
int main(void) {
    uint64_t w[2] = {0, 0};
    unsigned long long v[10];
    for (int i = 0; i < 10; i++) if (scanf("%llx", &v[i]) != 1) return 2;
    PN_SET(w, PN_HDR_DST_NODE, v[0]); PN_SET(w, PN_HDR_SRC_NODE, v[1]);
    PN_SET(w, PN_HDR_DST_CTX, v[2]); PN_SET(w, PN_HDR_SRC_CTX, v[3]);
    PN_SET(w, PN_HDR_TYPE, v[4]); PN_SET(w, PN_HDR_VC, v[5]);
    PN_SET(w, PN_HDR_LENGTH, v[6]); PN_SET(w, PN_HDR_FLAGS, v[7]);
    PN_SET(w, PN_HDR_TAG, v[9]);
    printf("%016llx %016llx %llx\n", (unsigned long long)w[0], (unsigned long long)w[1],
           (unsigned long long)PN_GET(w, PN_HDR_LENGTH));
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_c_header_packs_like_python(tmp_path):
    src = tmp_path / "t.c"
    src.write_text(C_PROG)
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I",
                    str(ROOT / "userlib/include"), str(src), "-o", str(exe)], check=True)
    rng = random.Random(2)
    names = ["dst_node", "src_node", "dst_ctx", "src_ctx", "type", "vc", "length", "flags",
             "rsvd", "tag"]
    for _ in range(50):
        v = {n: rng.getrandbits(P.HEADER_FIELD[n].width) for n in names}
        v["rsvd"] = 0
        out = subprocess.run([str(exe)], input=" ".join(f"{v[n]:x}" for n in names),
                             capture_output=True, text=True, check=True).stdout.split()
        w0, w1 = P.header_words(**v)
        assert int(out[0], 16) == w0 and int(out[1], 16) == w1
        assert int(out[2], 16) == v["length"]


def test_protocol_doc_tables_are_generated():
    doc = (ROOT / "docs/protocol.md").read_text()
    start = doc.index("<!-- BEGIN GENERATED: protocol -->")
    start = doc.index("\n", start) + 1
    end = doc.index("<!-- END GENERATED -->")
    assert doc[start:end] == docgen.protocol_tables(), "regenerate with `make headers`"


def test_ctx_state_bits():
    """One bit per entry, the busy mask made of the bits that say the NIC may still touch
    the context's memory, and the C header's values the same."""
    assert [int(P.CtxState[n.upper()]) for n, _ in P.CTX_STATE_BITS] == [1 << i for i in range(8)]
    assert P.CTX_BUSY_MASK == 0x96
    h = HEADER.read_text()
    assert "#define PN_CTX_STATE_TX_INFLIGHT (1u << 2)" in h and "#define PN_CTX_STATE_BUSY 0x96u" in h
