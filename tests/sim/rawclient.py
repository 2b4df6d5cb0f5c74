"""A minimal client of paranic-sim written against the socket/shared-memory protocol
itself (userlib/src/pn_sim_shm.h), for tests of the harness's side: bad hellos,
bad queue entries, register reads, a PIO send to itself, idle throttling.

The struct formats below restate pn_sim_shm.h's layouts (the header has static
asserts on their sizes); libparanic's hal_sim.c is the real client."""

from __future__ import annotations

import fcntl
import mmap
import os
import socket
import struct
import time

from paranic import protocol as P

HELLO_FMT = "<QIiiiiIIIQQQQQQ"           # struct pn_sim_hello (88 bytes)
WELCOME_FMT = "<QIiIIIIIIIIQQ32s"        # struct pn_sim_welcome (96 bytes)
MAGIC_HELLO = 0x4F4C4C45484D4953
MAGIC_WELCOME = 0x454D4F434C574D53
MAGIC_CTL = 0x4C54434D49534E50
VERSION = 1
OP_W32, OP_W64, OP_R32, OP_RCSR, OP_WINDOW = 1, 2, 3, 4, 5
# struct pn_sim_ctl: magic@0 version@8 qsize@12 queue_off@16 q_head@64 q_tail@128 r_value@192 r_seq@200
CTL_QHEAD, CTL_QTAIL, CTL_RVALUE, CTL_RSEQ = 64, 128, 192, 200

assert struct.calcsize(HELLO_FMT) == 88 and struct.calcsize(WELCOME_FMT) == 96


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
                 tx_log2: int = 4, mem: int = 16 << 20, seal: bool = True, version: int = VERSION,
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
        struct.pack_into("<QIIQ", self.mem, 0, MAGIC_CTL, VERSION, self.QSIZE, self.QUEUE_OFF)
        self.head = 0
        self.rseq = 0
        self.hello = struct.pack(HELLO_FMT, MAGIC_HELLO, version, node, ctx, nodes, os.getpid(), rx_log2,
                                 tx_log2, 0, mem, self.STATUS_OFF, self.RX_OFF, self.tx_off, self.heap_off,
                                 max(mem - self.heap_off, 0))
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
        f = struct.unpack(WELCOME_FMT, data)
        w = dict(zip(("magic", "version", "status", "node", "nodes", "sim_nodes", "ctx", "n_ctx", "mtu",
                      "csr_dropped", "rsvd", "dma_base", "global_bytes"), f[:13]))
        w["topo"] = f[13].rstrip(b"\0").decode()
        assert w["magic"] == MAGIC_WELCOME and w["version"] == VERSION
        if w["status"]:
            raise Refused(w["status"])
        self.welcome = w
        self.sock.setblocking(False)
        return w

    # -- the MMIO queue -----------------------------------------------------------------------
    def push(self, kind: int, off: int, value: int = 0) -> None:
        while self.head - struct.unpack_from("<Q", self.mem, CTL_QTAIL)[0] >= self.QSIZE:
            time.sleep(0.001)
        struct.pack_into("<IIQ", self.mem, self.QUEUE_OFF + 16 * (self.head % self.QSIZE), kind, off, value)
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
