"""A minimal client of paranic-sim written against the socket/shared-memory protocol
itself, for tests of the harness's side: bad hellos, bad queue entries, register
reads, a PIO send to itself, idle throttling.

The layouts are the spec's (:mod:`paranic.spec.sim`, which also generates
pn_sim_shm.h); libparanic's hal_sim.c is the real client."""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import struct
import time

from paranic.spec import protocol as P
from paranic.spec import sim as S

OP_W32, OP_W64, OP_R32, OP_RCSR = S.OpKind.W32, S.OpKind.W64, S.OpKind.R32, S.OpKind.RCSR
CTL_QHEAD, CTL_QTAIL, CTL_RVALUE, CTL_RSEQ = (S.CTL.offset(n) for n in ("q_head", "q_tail", "r_value", "r_seq"))


class Refused(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"attach refused: {status} ({os.strerror(-status)})")
        self.status = status


class RawClient:
    QSIZE = 256
    QUEUE_OFF = 4096
    STATUS_OFF = 8192
    RX_OFF = 12288

    def __init__(self, sock_path, node: int = 0, ctx: int = -1, nodes: int = 0, rx_log2: int = 4,
                 tx_log2: int = 4, mem: int = 16 << 20, seal: bool = True, version: int = S.VERSION,
                 mtu: int = P.DEFAULT_MTU) -> None:
        self.fd = os.memfd_create("rawclient", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, mem)
        if seal:
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        self.mem = mmap.mmap(self.fd, mem)
        self.mtu = mtu
        self.slot = P.rx_slot_bytes(mtu)
        self.rx_slots = 1 << rx_log2
        rx_bytes = self.rx_slots * self.slot
        self.tx_off = (self.RX_OFF + rx_bytes + 4095) // 4096 * 4096
        self.heap_off = (self.tx_off + (P.TX_DESC_BYTES << tx_log2) + 4095) // 4096 * 4096
        self.mem[0:S.CTL.size] = S.CTL.pack(magic=S.MAGIC_CTL, version=S.VERSION, qsize=self.QSIZE,
                                            queue_off=self.QUEUE_OFF)
        self.head = 0
        self.rseq = 0
        self.hello = S.HELLO.pack(magic=S.MAGIC_HELLO, version=version, node=node, ctx=ctx, nodes=nodes,
                                  pid=os.getpid(), rx_log2=rx_log2, tx_log2=tx_log2, flags=0, mem_bytes=mem,
                                  status_off=self.STATUS_OFF, rx_off=self.RX_OFF, tx_off=self.tx_off,
                                  heap_off=self.heap_off, heap_bytes=max(mem - self.heap_off, 0))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.connect(str(sock_path))
        self.welcome: dict = {}
        self.gfd = -1

    def attach(self, raw_hello: bytes | None = None, timeout: float = 60.0) -> dict:
        """Send the hello (or ``raw_hello``) with the memfd; returns the welcome, raises
        :class:`Refused` with its status."""
        socket.send_fds(self.sock, [raw_hello if raw_hello is not None else self.hello], [self.fd])
        self.sock.settimeout(timeout)
        data, fds, _, _ = socket.recv_fds(self.sock, 256, 1)
        if fds:
            self.gfd = fds[0]
        w = S.WELCOME.unpack(data)
        w["topo"] = w["topo"].rstrip(b"\0").decode()
        assert w["magic"] == S.MAGIC_WELCOME and w["version"] == S.VERSION
        if w["status"]:
            raise Refused(w["status"])
        self.welcome = w
        self.sock.setblocking(False)
        return w

    # -- the MMIO queue -----------------------------------------------------------------------
    def push(self, kind: int, off: int, value: int = 0) -> None:
        while self.head - struct.unpack_from("<Q", self.mem, CTL_QTAIL)[0] >= self.QSIZE:
            time.sleep(0.001)
        slot = self.QUEUE_OFF + S.OP.size * (self.head % self.QSIZE)
        self.mem[slot:slot + S.OP.size] = S.OP.pack(kind=int(kind), off=off, value=value)
        self.head += 1
        struct.pack_into("<Q", self.mem, CTL_QHEAD, self.head)
        try:
            self.sock.send(b"w")   # always wake (cheap; the harness discards it)
        except BlockingIOError:
            pass

    def read(self, kind: int, off: int, timeout: float = 30.0) -> int:
        self.rseq += 1
        self.push(kind, off, self.rseq)
        t0 = time.time()
        while struct.unpack_from("<Q", self.mem, CTL_RSEQ)[0] != self.rseq:
            if time.time() - t0 > timeout:
                raise TimeoutError(f"no answer to read {off:#x}")
            time.sleep(0.0005)
        return struct.unpack_from("<Q", self.mem, CTL_RVALUE)[0]

    def reg(self, r: int) -> int:
        return self.read(OP_R32, int(r))

    def csr(self, addr: int) -> int:
        return self.read(OP_RCSR, addr)

    def pio_send(self, dst_node: int, dst_ctx: int, payload: bytes, tag: int = 0, **hdr) -> None:
        fields = dict(dst_node=dst_node, dst_ctx=dst_ctx, type=int(P.PacketType.DATA), tag=tag,
                      length=len(payload), flags=int(P.Flags.SOM | P.Flags.EOM))
        fields.update(hdr)
        data = P.pack_header(**fields) + bytes(payload)
        data += b"\0" * (-len(data) % 8)
        for i in range(0, len(data), 8):
            self.push(OP_W64, P.PIO_WINDOW_OFFSET + i, int.from_bytes(data[i:i + 8], "little"))
        self.push(OP_W32, int(P.CtxReg.PIO_DOORBELL), len(data))

    # -- host memory --------------------------------------------------------------------------
    def status(self) -> dict:
        return P.unpack_status(self.mem[self.STATUS_OFF:self.STATUS_OFF + P.STATUS_BLOCK_BYTES])

    def rx_slot(self, n: int) -> tuple[int, dict, bytes]:
        """(valid word, header, payload) of RX slot ``n``."""
        a = self.RX_OFF + (n % self.rx_slots) * self.slot
        valid = struct.unpack_from("<Q", self.mem, a + P.rx_valid_offset(self.mtu))[0]
        hdr = P.unpack_header(self.mem[a:a + P.HEADER_BYTES])
        return valid, hdr, bytes(self.mem[a + P.RX_SLOT_PAYLOAD_OFFSET:a + P.RX_SLOT_PAYLOAD_OFFSET + hdr["length"]])

    def close(self) -> None:
        self.sock.close()
        if self.gfd >= 0:
            os.close(self.gfd)
            self.gfd = -1
        self.mem.close()
        os.close(self.fd)
