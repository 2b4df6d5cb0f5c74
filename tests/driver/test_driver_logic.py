"""The driver's hardware-independent logic (driver/pn_logic.c) in user space.

The same source file the module links is compiled with ASan/UBSan into a small
line-protocol program (logic_prog.c); hypothesis feeds it random and hostile
arguments and every answer is compared with a Python model written from the spec
(docs/driver.md, docs/host-interface.md, paranic.spec.protocol). No kernel needed.
"""

from __future__ import annotations

import errno
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paranic.spec.protocol as P

ROOT = Path(__file__).resolve().parents[2]
PAGE = 4096


def _uapi_define(name: str) -> int:
    """An integer macro of the driver's ABI header (driver/include/uapi/paranic.h)."""
    m = re.search(rf"^#define {name} (\d+)\b", (ROOT / "driver/include/uapi/paranic.h").read_text(), re.M)
    assert m, f"{name} not in the ABI header"
    return int(m.group(1))


#: The mmap offset's region field (the ABI's PARANIC_MMAP_REGION_SHIFT).
REGION_SHIFT = _uapi_define("PARANIC_MMAP_REGION_SHIFT")
U64 = (1 << 64) - 1
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


class Prog:
    def __init__(self, exe: Path) -> None:
        self.p = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def __call__(self, *args: object) -> list[int]:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(" ".join(str(a) for a in args) + "\n")
        self.p.stdin.flush()
        out = self.p.stdout.readline().split()
        assert out and out[0] != "bad", f"harness refused {args}: {out}"
        return [int(x) for x in out]


@pytest.fixture(scope="module")
def prog(tmp_path_factory):
    out = tmp_path_factory.mktemp("logic") / "logic_prog"
    cmd = ["gcc", "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
           f"-I{ROOT / 'driver'}", f"-I{ROOT / 'driver/include'}", f"-I{ROOT / 'userlib/include'}",
           str(ROOT / "driver/pn_logic.c"), str(Path(__file__).parent / "logic_prog.c"), "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    p = Prog(out)
    yield p
    assert p.p.stdin
    p.p.stdin.close()
    assert p.p.wait(timeout=10) == 0, "the harness crashed (sanitizer report on stderr)"


E = errno


# ---- contexts --------------------------------------------------------------------------------

def model_claim(m: int, n: int, want: int) -> tuple[int, int]:
    if not 1 <= n <= 64:
        return -E.EINVAL, m
    if want >= 0:
        if want >= n:
            return -E.EINVAL, m
        return (-E.EBUSY, m) if m >> want & 1 else (want, m | 1 << want)
    for c in range(n):
        if not m >> c & 1:
            return c, m | 1 << c
    return -E.EBUSY, m


@SETTINGS
@given(m=st.integers(0, U64), n=st.integers(0, 70), want=st.integers(-3, 70))
def test_claim_matches_model(prog, m, n, want):
    assert prog("claim", m, n, want) == list(model_claim(m, n, want))


@SETTINGS
@given(m=st.integers(0, U64), n=st.integers(0, 70), c=st.integers(0, 1 << 32 - 1))
def test_free_refuses_double_free(prog, m, n, c):
    r, m2 = prog("free", m, n, c)
    if n <= 64 and c < n and m >> c & 1:
        assert (r, m2) == (0, m & ~(1 << c))
    else:
        assert (r, m2) == (-E.EINVAL, m)


def test_every_context_once_then_busy(prog):
    m, got = 0, []
    for _ in range(P.DEFAULT_CONTEXTS):
        r, m = prog("claim", m, P.DEFAULT_CONTEXTS, -1)
        got.append(r)
    assert got == list(range(P.DEFAULT_CONTEXTS))
    assert prog("claim", m, P.DEFAULT_CONTEXTS, -1)[0] == -E.EBUSY
    r, m = prog("free", m, P.DEFAULT_CONTEXTS, 5)
    assert r == 0 and prog("free", m, P.DEFAULT_CONTEXTS, 5)[0] == -E.EINVAL  # double close
    assert prog("claim", m, P.DEFAULT_CONTEXTS, -1)[0] == 5


# ---- ring geometry and mmap ---------------------------------------------------------------------

def up(v: int, a: int) -> int:
    return (v + a - 1) // a * a


def model_geom(mtu, rxl, txl, page):
    if not (8 <= mtu <= P.MAX_MTU and mtu % 8 == 0 and 1 <= rxl <= 16 and 1 <= txl <= 16
            and page >= 4096 and page & (page - 1) == 0):
        return None
    rx = up((1 << rxl) * P.rx_slot_bytes(mtu), page)
    tx = up((1 << txl) * P.TX_DESC_BYTES, page)
    if rx > 64 << 20 or tx > 64 << 20:
        return None
    return [0, 1 << rxl, P.rx_slot_bytes(mtu), 1 << txl, rx, tx, page]


mtus = st.one_of(st.sampled_from([8, 256, 1024, P.MAX_MTU]), st.integers(0, P.MAX_MTU + 16))


@SETTINGS
@given(mtu=mtus, rxl=st.integers(0, 18), txl=st.integers(0, 18),
       page=st.sampled_from([0, 1024, 4096, 8192, 65536, 12288]))
def test_geometry_matches_protocol(prog, mtu, rxl, txl, page):
    out = prog("geom", mtu, rxl, txl, page)
    want = model_geom(mtu, rxl, txl, page)
    assert (out if want else out[0]) == (want if want else -E.EINVAL)


def model_mmap(mtu, rxl, txl, off, length, win, writable):
    g = model_geom(mtu, rxl, txl, PAGE)
    if g is None:
        return -E.EINVAL
    if off % (1 << REGION_SHIFT) or length == 0 or length > U64 - PAGE:
        return -E.EINVAL
    region = off >> REGION_SHIFT
    sizes = {0: PAGE, 1: g[4], 2: g[5], 3: PAGE}
    if region == 4:
        if not win:
            return -E.ENXIO
        sizes[4] = up(win, PAGE)
    if region not in sizes or up(length, PAGE) > sizes[region]:
        return -E.EINVAL
    if writable and region in (1, 3):
        return -E.EACCES
    return region


offsets = st.one_of(st.integers(0, 6).map(lambda r: r << REGION_SHIFT), st.integers(0, U64),
                    st.integers(0, 6).map(lambda r: (r << REGION_SHIFT) + PAGE))
lengths = st.one_of(st.sampled_from([0, 1, PAGE, PAGE + 1, 1 << 20, U64, U64 - PAGE + 1]),
                    st.integers(0, 1 << 30))


@SETTINGS
@given(rxl=st.integers(1, 12), txl=st.integers(1, 12), off=offsets, length=lengths,
       win=st.sampled_from([0, 1, PAGE, 3 * PAGE + 5, 1 << 26]), writable=st.booleans())
def test_mmap_bounds(prog, rxl, txl, off, length, win, writable):
    """Only region starts, never past a region's end, RX ring and status read-only."""
    assert prog("mmap", 1024, rxl, txl, off, length, win, int(writable))[0] == \
        model_mmap(1024, rxl, txl, off, length, win, writable)


def test_mmap_examples(prog):
    # The context page (one page), never two; another region's offset inside it refused.
    assert prog("mmap", 1024, 8, 6, 0, PAGE, 0, 1)[0] == 0
    assert prog("mmap", 1024, 8, 6, 0, 2 * PAGE, 0, 1)[0] == -E.EINVAL
    assert prog("mmap", 1024, 8, 6, PAGE, PAGE, 0, 1)[0] == -E.EINVAL   # another context's page
    rx_ring = 256 * P.rx_slot_bytes(1024)
    assert prog("mmap", 1024, 8, 6, 1 << REGION_SHIFT, rx_ring, 0, 1)[0] == -E.EACCES
    assert prog("mmap", 1024, 8, 6, 1 << REGION_SHIFT, rx_ring, 0, 0)[0] == 1
    assert prog("mmap", 1024, 8, 6, 4 << REGION_SHIFT, PAGE, 0, 1)[0] == -E.ENXIO


# ---- memory registration -------------------------------------------------------------------------

TOP = 1 << 47


def model_mem(addr, length, flags, rsvd, used, limit, top):
    if rsvd or flags & ~1 or length == 0:
        return [-E.EINVAL]
    if used:
        return [-E.EBUSY]
    if length > limit:
        return [-E.E2BIG]
    if flags & 1:
        return [-E.EINVAL] if addr else [0, 0, up(length, PAGE) // PAGE]
    if addr == 0 or addr >= top or length > top - addr:
        return [-E.EFAULT]
    first = addr // PAGE * PAGE
    return [0, first, (up(addr + length, PAGE) - first) // PAGE]


@SETTINGS
@given(addr=st.one_of(st.integers(0, U64), st.integers(TOP - 3 * PAGE, TOP + PAGE), st.integers(1, 1 << 20)),
       length=st.one_of(st.integers(0, U64), st.integers(0, 1 << 22), st.sampled_from([U64, U64 - 4095])),
       flags=st.sampled_from([0, 1, 2, 3, 1 << 31]), rsvd=st.sampled_from([0, 0, 0, 1]),
       used=st.sampled_from([0, 0, 0, PAGE]), limit=st.sampled_from([64 << 20, U64, 0]))
def test_registration_bounds(prog, addr, length, flags, rsvd, used, limit):
    out = prog("mem", addr, length, flags, rsvd, used, limit, TOP)
    want = model_mem(addr, length, flags, rsvd, used, limit, TOP)
    assert (out if want[0] == 0 else out[:1]) == want
    if want[0] == 0 and not flags & 1:
        # The pinned pages cover the range and stay below the top of user space.
        assert out[1] <= addr and out[1] + out[2] * PAGE >= addr + length
        assert out[1] + out[2] * PAGE <= TOP


# ---- administrator ioctls -------------------------------------------------------------------------

@SETTINGS
@given(node=st.integers(0, 1 << 32 - 1), n=st.integers(0, 5000), x=st.integers(0, 5000),
       y=st.integers(0, 70))
def test_node_id(prog, node, n, x, y):
    ok = 1 <= n <= P.MAX_NODES and node < n and x >= 1 and y >= 1 and x * y == n
    assert prog("node", node, n, x, y)[0] == (0 if ok else -E.EINVAL)


@SETTINGS
@given(first=st.integers(0, 1 << 32 - 1), count=st.integers(0, 1 << 32 - 1), ptr=st.sampled_from([0, 4096]),
       table=st.sampled_from([256, 4096]))
def test_routes(prog, first, count, ptr, table):
    ok = count and first < table and count <= table - first and ptr
    assert prog("routes", first, count, ptr, table)[0] == (0 if ok else -E.EINVAL)


@pytest.mark.parametrize("links", [2, 4])
def test_route_ports(prog, links):
    for p in range(256):
        ok = p in (P.Port.LOCAL, P.Port.DROP) or 1 <= p <= links
        assert prog("port", p, links)[0] == (0 if ok else -E.EINVAL), p


@SETTINGS
@given(nodes=st.integers(0, 5000), radix=st.integers(0, 5), mode=st.integers(0, 3), rsvd=st.sampled_from([0, 1]),
       part=st.one_of(st.integers(0, U64), st.integers(0, 0xffff)), nctx=st.sampled_from([0, 1, 16, 64, 65]))
def test_barrier(prog, nodes, radix, mode, rsvd, part, nctx):
    ok = (1 <= nctx <= 64 and not rsvd and 1 <= nodes <= P.MAX_NODES and radix <= 3 and mode <= 1
          and (nctx == 64 or part >> nctx == 0))
    assert prog("barrier", nodes, radix, mode, rsvd, part, nctx)[0] == (0 if ok else -E.EINVAL)


# ---- semi-user-level send, doorbells, ioctl numbers ------------------------------------------------

@SETTINGS
@given(dst=st.integers(0, 0xffff), ctx=st.integers(0, 255), typ=st.integers(0, 255),
       length=st.one_of(st.integers(0, 4096), st.integers(0, 1 << 32 - 1)), tag=st.integers(0, U64),
       mtu=st.sampled_from([256, 1024, 4096]))
def test_send_header(prog, dst, ctx, typ, length, tag, mtu):
    """Checked like the NIC checks a PIO header; the header packs like paranic.spec.protocol."""
    r, h0, h1 = prog("send", dst, ctx, typ, length, tag, mtu)
    if typ not in [int(t) for t in P.USER_PACKET_TYPES] or dst >= P.MAX_NODES or ctx >= P.MAX_CONTEXTS:
        assert r == -E.EINVAL
    elif length > min(mtu, P.PIO_WINDOW_BYTES - P.HEADER_BYTES):
        assert r == -E.EMSGSIZE
    else:
        assert r == 0
        assert (h0, h1) == P.header_words(dst_node=dst, dst_ctx=ctx, type=typ, length=length, tag=tag,
                                          flags=P.Flags.SOM | P.Flags.EOM)


def test_doorbells(prog):
    allowed = {P.CtxReg.TX_TAIL, P.CtxReg.RX_HEAD, P.CtxReg.BARRIER, P.CtxReg.IRQ_ARM}
    for reg in list(range(0, 0x1000, 4)) + [1 << 31, (1 << 32) - 1]:
        assert prog("db", reg)[0] == (0 if reg in allowed else -E.EINVAL), hex(reg)
    assert prog("db", P.CtxReg.PIO_DOORBELL)[0] == -E.EINVAL  # the window is the kernel's here


@SETTINGS
@given(cmd=st.integers(0, (1 << 32) - 1))
def test_random_ioctl_numbers(prog, cmd):
    known = set(prog("ioctls"))
    assert prog("ioctl", cmd)[0] == (0 if cmd in known else -E.ENOTTY)


def test_ioctl_numbers_encode_size(prog):
    """A command with the right number but another size (an old or foreign ABI) is refused."""
    for cmd in prog("ioctls"):
        size = cmd >> 16 & 0x3fff
        for other in (size - 8, size + 8, 0):
            bad = (cmd & ~(0x3fff << 16)) | ((other & 0x3fff) << 16)
            assert prog("ioctl", bad)[0] == -E.ENOTTY


def test_registration_edges(prog):
    """The end of user space, wrap-around, the per-context cap, one window per context."""
    lim = 64 << 20
    assert prog("mem", TOP - PAGE, PAGE, 0, 0, 0, lim, TOP) == [0, TOP - PAGE, 1]
    assert prog("mem", TOP - PAGE, PAGE + 1, 0, 0, 0, lim, TOP)[0] == -E.EFAULT
    assert prog("mem", TOP - 1, 2, 0, 0, 0, lim, TOP)[0] == -E.EFAULT
    assert prog("mem", U64 - 10, 20, 0, 0, 0, lim, TOP)[0] == -E.EFAULT      # wraps
    assert prog("mem", PAGE + 8, PAGE, 0, 0, 0, lim, TOP) == [0, PAGE, 2]    # straddles two pages
    assert prog("mem", PAGE, lim + 1, 0, 0, 0, lim, TOP)[0] == -E.E2BIG
    assert prog("mem", PAGE, PAGE, 0, 0, PAGE, lim, TOP)[0] == -E.EBUSY      # window taken
    assert prog("mem", 0, PAGE, 1, 0, 0, lim, TOP) == [0, 0, 1]              # driver-allocated
    assert prog("mem", PAGE, PAGE, 1, 0, 0, lim, TOP)[0] == -E.EINVAL
