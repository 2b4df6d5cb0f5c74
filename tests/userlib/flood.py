"""Idle connections to a Unix socket, as an attacker holds them (paranicd's limits, docs/paranicd.md)."""

from __future__ import annotations

import resource
import socket
from pathlib import Path


def flood(path: Path, n: int) -> list[socket.socket]:
    """``n`` connected, never-used stream sockets to ``path`` (the open-file limit raised as needed)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 256:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))
    out = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(path))
        out.append(s)
    return out
