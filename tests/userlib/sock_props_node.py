"""One node of tests/userlib/test_sock_props.py: an unmodified Python sockets program
(the standard library's socket module, nothing of ParaNIC) run under
LD_PRELOAD=libparanic_sock.so. Node 1 serves, node 0 is the client.

argv: tcp|udp ADDR1 PORT SIZES... (the client's write sizes / datagram sizes) -- READS...
(the server's recv sizes, cycled). The payload is a deterministic byte pattern; the
server prints its SHA-256 and the sizes it saw, the client the SHA-256 it sent."""
from __future__ import annotations

import hashlib
import os
import socket
import sys
import time


def pattern(n: int, seed: int) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def main() -> int:
    kind, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[4:]
    cut = rest.index("--")
    sizes = [int(x) for x in rest[:cut]]
    reads = [int(x) for x in rest[cut + 1:]] or [65536]
    node = int(os.environ["PARANIC_NODE"])
    total = sum(sizes)
    if kind == "tcp":
        if node == 1:
            ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((addr, port))
            ls.listen(1)
            print("listening", flush=True)
            c, _ = ls.accept()
            h, got, k = hashlib.sha256(), 0, 0
            while got < total:
                b = c.recv(reads[k % len(reads)])
                k += 1
                if not b:
                    break
                h.update(b)
                got += len(b)
            extra = c.recv(1)   # the client closes after its last byte: EOF, nothing more
            print(f"server got {got} eof={extra == b''} sha {h.hexdigest()}", flush=True)
            c.close()
            ls.close()
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            for _ in range(500):   # the server may not listen yet
                try:
                    s.connect((addr, port))
                    break
                except ConnectionRefusedError:
                    s.close()
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    time.sleep(0.01)
            h = hashlib.sha256()
            for i, n in enumerate(sizes):
                b = pattern(n, i)
                s.sendall(b)
                h.update(b)
            s.close()
            print(f"client sent {total} sha {h.hexdigest()}", flush=True)
    else:
        if node == 1:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.bind((addr, port))
            open(os.environ["READY"], "w").close()   # the client sends once this exists
            seen = []
            for i in range(len(sizes)):
                b, src = u.recvfrom(65535)
                ok = b == pattern(len(b), i)
                seen.append(f"{len(b)}{'' if ok else '!'}")
            print("server dgrams " + " ".join(seen), flush=True)
            u.sendto(b"done", src)
        else:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            # a datagram to a port nobody has bound is dropped: wait until the server's is
            deadline = time.time() + 30
            while not os.path.exists(os.environ["READY"]) and time.time() < deadline:
                time.sleep(0.005)
            for i, n in enumerate(sizes):
                u.sendto(pattern(n, i), (addr, port))
                time.sleep(0.002)   # UDP may drop on a full receive queue; pace it
            u.settimeout(30)
            b, _ = u.recvfrom(16)
            print(f"client sent {len(sizes)} answer {b.decode()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
