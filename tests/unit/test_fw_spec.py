"""The firmware's spec facts: the header's `direct` field, FwState/FwError, the firmware
status registers as NicCore CSRs, and the CSR-header lists generated from them."""

from __future__ import annotations

import re

from paranic.hw.standalone import NicCoreStandalone, csr_dict
from paranic.spec import cgen
from paranic.spec import fw as FW
from paranic.spec import protocol as P
from paranic.spec import sim as S


def test_direct_rt_and_reserved_bits():
    f = P.HEADER_FIELD["direct"]
    assert (f.offset, f.width) == (58, 3)
    t = P.HEADER_FIELD["rt"]
    assert (t.offset, t.width) == (61, 1)
    assert P.unpack_header(P.pack_header(rt=1))["rt"] == 1
    r = P.HEADER_FIELD["rsvd"]
    assert r.offset == 62 and r.offset + r.width == 64
    for d in range(8):
        w0, _ = P.header_words(dst_node=5, type=P.PacketType.CONTROL, direct=d)
        assert (w0 >> 58) & 7 == d
        assert P.unpack_header(P.pack_header(direct=d))["direct"] == d
    assert max(P.Port) > 4 and all(p <= 4 for p in P.Port if p != P.Port.DROP)


def test_fw_enums_as_contracted():
    assert [(s.name, int(s)) for s in FW.FwState] == [
        ("NONE", 0), ("BOOT", 1), ("DISCOVER", 2), ("ROUTED", 3), ("DEGRADED", 4), ("ERROR", 5)]
    assert FW.FwError.NONE == 0 and len(set(FW.FwError)) == len(FW.FW_ERROR_DOC)
    assert FW.FW_STATUS_NAMES == ("state", "error", "topo", "coords", "epoch", "links_in", "reroutes",
                                  "link_downs", "evacuated", "lost", "heartbeat", "fingerprint",
                                  "flush_timeouts", "phase")
    assert FW.cfg_node(None) == 0 and FW.cfg_node(7) == 0x8007
    assert FW.split_xy(3 | 2 << 16) == (3, 2)


def test_niccore_csrs_and_header_lists():
    regs = {n: r for n, r in NicCoreStandalone(n_links=4, n_ctx=2, mtu=64).csr_map().items()}
    for name, bits, _ in FW.FW_STATUS:
        assert regs[f"fw_{name}"].size == bits and regs[f"fw_{name}"].kind == "rw"
    for name, bits, _ in FW.ID_REGS:
        assert regs[f"id_{name}"].size == bits and regs[f"id_{name}"].kind == "ro"
    for name in ("tx_data", "tx_push", "tx_send", "tx_free", "tx_busy", "rx_packets", "rx_data",
                 "rx_pop", "rx_len", "tx_packets", "rx_packets_total"):
        assert f"mgmt_{name}" in regs, name
    d = csr_dict(regs)
    h = cgen.csr_header(d)
    fw = re.findall(r"\tX\((\w+), PN_CSR_FW_\w+, (\d+)\)", h)
    assert fw == [(n, str(b)) for n, b, _ in FW.FW_STATUS]       # FW_STATUS order (PN_FW_REG_*)
    # The link layer's fault CSRs are in the fault and status lists, every link port.
    for i in range(4):
        assert f"\tX({i}, PN_CSR_LINK{i}_DOWN_REASON, PN_CSR_LINK{i}_DOWNS) \\" in h
    ls = re.findall(r"\tX\((\d), (\d), PN_CSR_LINK\d_(\w+)\)", h)
    fields = [c for _, c in S.STATUS_LINK_FIELDS]
    assert {(int(p), int(k)) for p, k, _ in ls} >= {(p, fields.index(f)) for p in range(4)
                                                     for f in ("link_state", "down_reason")}
    assert all(n.lower() == fields[int(k)] for _, k, n in ls)


def test_status_record_layout():
    assert S.NODE_STATUS.size == 256
    assert S.NODE_STATUS.member("fw").count == len(FW.FW_STATUS)
    assert S.NODE_STATUS.member("link").count == S.STATUS_LINKS * len(S.STATUS_LINK_FIELDS)
    assert S.GLOBAL.size == 256 and S.GLOBAL.offset("status_off") < S.GLOBAL.offset("cycle")
    assert S.sim_dna(0) != 0 and len({S.sim_dna(i) for i in range(64)}) == 64
