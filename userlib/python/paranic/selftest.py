"""`paranic selftest`: does the cluster work? One node's part, run as
``python -m paranic.selftest`` by ``paranic run`` (``paranic selftest --backend sw|sim
--nodes N`` does that) or by ``pn_launch`` (node, cluster and backend from the
environment); it uses only the Python bindings (``paranic.lib``). The tests run it too
(``tests/userlib/test_bindings.py::test_processes``).

1. rawdata (context 0), once all nodes have opened it (barrier): a message of a node-pair-specific size to every other node,
   then receive one from each and check sender, size and content;
2. HAL (a second context, any free one: the same on every node): a PIO and a
   3-packet DMA send to the next node, received from the previous one with the
   stamped source and the tag checked;
3. barriers between the steps; prints ``ok bindings ...`` at the end.
"""

from __future__ import annotations

import random

from paranic import lib as L


def payload(src: int, dst: int) -> bytes:
    """The message src sends to dst: sizes from 1 byte to several rawdata chunks."""
    size = 1 + (src * 7 + dst * 3) * 40_000 % 300_000
    return random.Random(src * 1000 + dst).randbytes(size)


def main() -> None:
    rd = L.RawData.open()
    hal = rd.hal
    me, n = hal.node_id, hal.num_nodes
    hal.barrier()                           # every node's context is open: nothing is dropped
    for peer in range(n):
        if peer != me:
            rd.send(peer, payload(me, peer))
    sizes = {}
    for _ in range(n - 1):
        src, data = rd.recv(timeout_ns=30_000_000_000)
        assert data == payload(src, me), f"node {me}: bad message from {src} ({len(data)} bytes)"
        sizes[src] = len(data)
    assert sorted(sizes) == [p for p in range(n) if p != me], sizes
    hal.barrier()

    with L.Hal.open() as h:
        nxt, prev = (me + 1) % n, (me - 1) % n
        hal.barrier()                       # every node's second context is open
        h.send_pio(nxt, h.ctx_id, 0x5000 + me, b"pio from %d" % me)
        big = random.Random(-1 - me).randbytes(2 * h.mtu + 17)
        h.send_dma(nxt, h.ctx_id, 0xD000 + me, big)
        hdr, data = h.recv(timeout_ns=30_000_000_000)
        assert (hdr.src_node, hdr.src_ctx, hdr.dst_node, hdr.tag, data) == \
            (prev, h.ctx_id, me, 0x5000 + prev, b"pio from %d" % prev), (hdr, data)
        got = b""
        for i in range(3):
            hdr, part = h.recv(timeout_ns=30_000_000_000)
            assert hdr.src_node == prev and hdr.tag == 0xD000 + prev and hdr.som == (i == 0) \
                and hdr.eom == (i == 2), hdr
            got += part
        assert got == random.Random(-1 - prev).randbytes(2 * h.mtu + 17)
        hal.barrier()                       # nobody closes while packets are on their way
        ctx = h.ctx_id
    print(f"ok bindings node={me} nodes={n} backend={hal.backend} rawdata_from={sizes} hal_ctx={ctx}",
          flush=True)
    rd.close()


if __name__ == "__main__":
    main()
