"""The host model's own rules (tests/model/pcie.py), stepped by hand without a simulator:
the benches rely on it to flag what the NIC does wrong on the PCIe side."""

from __future__ import annotations

from model.pcie import CPL, RD, WR, PcieHost, completion_beats, request_violations


class Nic(dict):
    """The NIC's outputs: every port 0 unless set."""

    def __missing__(self, name: str) -> int:
        return 0


def test_request_rules():
    assert request_violations("read", 0x1000, 512, 512) == []
    assert len(request_violations("read", 0x1000, 520, 512)) == 1           # too long
    assert len(request_violations("write", 0x1F80, 256, 256)) == 1          # crosses 4 KiB
    assert len(request_violations("write", 0x1004, 8, 256)) == 1            # not 64-bit words
    assert len(request_violations("read", 0xFFC, 12, 8)) == 3


def test_completions_split_at_rcb_boundaries():
    beats = completion_beats(0x1030, list(range(12)), 64)  # 0x1030..0x1090: 2 + 8 + 2 words
    assert [b.dat for b in beats] == list(range(12))
    assert [(b.first, b.last) for b in beats if b.first or b.last] == \
        [(True, False), (False, True), (True, False), (False, True), (True, False), (False, True)]
    assert [b.end for b in beats] == [False] * 10 + [True] * 2
    assert [(b.adr, b.dwords) for b in beats][::2] == [(0x1030, 4), (0x1040, 16), (0x1040, 16),
                                                       (0x1040, 16), (0x1040, 16), (0x1080, 4)]
    assert completion_beats(0x2000, [], 64) == [(0, True, True, True, 2, 0x2000)]


def test_read_served_after_latency_with_back_pressure():
    host = PcieHost(read_latency=5)
    r = host.mem.add(0x4000, 0x100, "buf", dma_read=True)
    host.mem.write(0x4000, bytes(range(32)))
    nic = Nic({RD + "valid": 1, RD + "payload_adr": 0x4000, RD + "payload_len": 8})
    assert host.step(nic) == {}                 # taken at cycle 1
    nic[RD + "valid"] = 0
    seen = []
    for _ in range(14):
        host.step(nic)
        if host.drive[CPL + "valid"]:
            seen.append((host.cycle, host.drive[CPL + "payload_dat"]))
        nic[CPL + "ready"] = int(host.cycle % 2 == 0)   # the NIC takes every other cycle
    # driven from the edge of cycle 1 + 5 on, each beat until the NIC is ready at an edge
    w = [int.from_bytes(bytes(range(i, i + 8)), "little") for i in (0, 8, 16, 24)]
    assert seen == [(6, w[0]), (7, w[1]), (8, w[1]), (9, w[2]), (10, w[2]), (11, w[3]),
                    (12, w[3])]
    assert host.drive[CPL + "valid"] == 0
    assert host.read_requests == [(1, 0x4000, 32)] and r.reads == 32 and host.errors == []


def test_write_rules_and_regions():
    host = PcieHost(max_payload_bytes=64)
    ring = host.mem.add(0x8000, 0x100, "ring", dma_write=True)
    host.mem.add(0x9000, 0x100, "read only", dma_read=True)

    def write(adr, words, dwords=None, we=1):
        for i, w in enumerate(words):
            host.step(Nic({WR + "valid": 1, WR + "first": int(i == 0),
                           WR + "last": int(i == len(words) - 1), WR + "payload_we": we,
                           WR + "payload_adr": adr, WR + "payload_dat": w,
                           WR + "payload_len": 2 * len(words) if dwords is None else dwords}))

    write(0x8000, [1, 2])
    assert host.mem.read64(0x8008) == 2 and ring.writes == 16 and host.errors == []
    write(0x9000, [3])                          # not writable: not applied
    assert host.mem.read64(0x9000) == 0 and "stray DMA write" in host.errors[-1]
    write(0x8010, [4], dwords=4)                # length says 2 words, 1 sent
    assert "but 8 sent" in host.errors[-1]
    write(0x8000, [0] * 9)                      # longer than max_payload_bytes
    assert "72 bytes > 64" in host.errors[-1]
    n = len(host.errors)
    host.step(Nic({WR + "valid": 1, WR + "payload_dat": 5}))   # no first
    assert len(host.errors) == n + 1 and host.write_requests[0].words == [1, 2]


def test_mmio_accesses_in_order_and_reset():
    host = PcieHost()
    w = host.mmio.submit(0x10, 0xAB, write=True)
    rd = host.mmio.submit(0x14)
    out = host.step(Nic())
    assert (out["bus_adr"], out["bus_dat_w"], out["bus_we"], out["bus_cyc"]) == (4, 0xAB, 1, 1)
    out = host.step(Nic({"bus_ack": 1}))        # write acked, the read presented at once
    assert w.done and not rd.done and (out["bus_adr"], out["bus_we"]) == (5, 0)
    out = host.step(Nic({"bus_ack": 1, "bus_dat_r": 7}))
    assert rd.result == 7 and out["bus_cyc"] == 0 and host.mmio.idle
    host.mem.add(0, 64, "buf", dma_read=True)
    host.step(Nic({RD + "valid": 1, RD + "payload_len": 2}))
    host.step(Nic({"rst": 1}))                  # reset: the request in flight is forgotten
    for _ in range(80):
        host.step(Nic())
    assert host.drive[CPL + "valid"] == 0
