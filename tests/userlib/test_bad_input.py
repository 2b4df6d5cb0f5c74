"""Bad input to the C API and the CLI (docs/reliability.md, "Bad input"): refused with -EINVAL,
-EBADF or a one-line usage error, never accepted, never a crash.
docs/reliability.md, "Bad input".

The C calls run in a child process: on a library without the checks a use after close
is a crash, which must fail the test, not end the test session.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from paranic import cli

C_CALLS = r"""
import errno, sys
from paranic.clib import ffi, lib

cluster = sys.argv[1].encode()
def opts(backend=b"sw"):
    o = ffi.new("pn_open_opts_t *")
    lib.pn_open_opts_init(o)
    keep = [ffi.new("char[]", backend), ffi.new("char[]", cluster)]
    o.backend, o.cluster, o.node, o.nodes = keep[0], keep[1], 0, 2
    return o, keep

def say(what, rc):
    print(f"{what} {rc}", flush=True)

hp = ffi.new("pn_hal_t **")
o, keep = opts(b"")
say("open_empty_backend", lib.pn_open(hp, o))
o, keep = opts()
o.cluster = ffi.new("char[]", b"")
keep.append(o.cluster)
say("open_empty_cluster", lib.pn_open(hp, o))
o, keep = opts()
rc = lib.pn_open(hp, o)
assert rc == 0, rc
h = hp[0]
top = ffi.cast("void *", (1 << 64) - 4096)   # the last page: 8 KiB from here wrap to 0
say("register_wrap", lib.pn_mem_register(h, top, 8192))
say("send_null_buf_bad_node", lib.pn_send(h, 4000, 0, 1, ffi.NULL, 8))
say("send_pio_null_buf_bad_node", lib.pn_send_pio(h, 4000, 0, 1, ffi.NULL, 8))
rd = ffi.new("pn_rd_t **")
assert lib.pn_rd_attach(rd, h) == 0
buf = ffi.new("char[]", 16)
say("rd_recv_src_-5", lib.pn_rd_recv(rd[0], -5, buf, 16, ffi.NULL, ffi.NULL))
say("rd_peek_src_-5", lib.pn_rd_peek(rd[0], -5, ffi.NULL, ffi.NULL))
say("rd_recv_src_9", lib.pn_rd_recv(rd[0], 9, buf, 16, ffi.NULL, ffi.NULL))
assert lib.pn_rd_close(rd[0]) == 0
say("close", lib.pn_close(h))
# use after close, then double close: the handle's memory is kept, poisoned
st = ffi.new("pn_status_t *")
say("status_after_close", lib.pn_status(h, st))
say("send_pio_after_close", lib.pn_send_pio(h, 0, 0, 1, buf, 8))
say("tx_wait_after_close", lib.pn_tx_wait(h))
say("barrier_after_close", lib.pn_barrier(h))
say("node_id_after_close", lib.pn_node_id(h))
say("register_after_close", lib.pn_mem_register(h, buf, 16))
out = ffi.new("void **")
say("dma_alloc_after_close", lib.pn_dma_alloc(h, 4096, out))
say("deregister_after_close", lib.pn_mem_deregister(h, buf))
say("dma_free_after_close", lib.pn_dma_free(h, buf))
say("close_again", lib.pn_close(h))
print("done", flush=True)
"""

WANT = {
    "open_empty_backend": -errno.EINVAL,
    "open_empty_cluster": -errno.EINVAL,
    "register_wrap": -errno.EINVAL,
    "send_null_buf_bad_node": -errno.EINVAL,
    "send_pio_null_buf_bad_node": -errno.EINVAL,
    "rd_recv_src_-5": -errno.EINVAL,
    "rd_peek_src_-5": -errno.EINVAL,
    "rd_recv_src_9": -errno.EHOSTUNREACH,
    "close": 0,
    "status_after_close": -errno.EBADF,
    "send_pio_after_close": -errno.EBADF,
    "tx_wait_after_close": -errno.EBADF,
    "barrier_after_close": -errno.EBADF,
    "node_id_after_close": -errno.EBADF,
    "register_after_close": -errno.EBADF,
    "dma_alloc_after_close": -errno.EBADF,
    "deregister_after_close": -errno.EBADF,
    "dma_free_after_close": -errno.EBADF,
    "close_again": -errno.EBADF,
}


def test_c_api_refuses_bad_handles_and_arguments(userlib_build):
    from paranic import lib

    cluster = f"badin-{os.getpid()}"
    env = dict(os.environ, PARANIC_DAEMON="off")
    try:
        r = subprocess.run([sys.executable, "-c", C_CALLS, cluster], capture_output=True, text=True, env=env,
                           timeout=60)
    finally:
        lib.sw_cluster_destroy(cluster, missing_ok=True)
    got = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines() if " " in line)
    assert r.returncode == 0 and "done" in r.stdout, \
        f"the calls did not all return (exit {r.returncode}):\n{r.stdout}\n{r.stderr[-2000:]}"
    bad = {k: (int(got.get(k, 1 << 40)), v) for k, v in WANT.items() if int(got.get(k, 1 << 40)) != v}
    assert not bad, f"(got, wanted): {bad}"


@pytest.mark.parametrize("argv, word", [
    (["run", "--ber", "nan", "--", "true"], "finite"),
    (["run", "--backend", "sim", "--ber", "inf", "--", "true"], "finite"),
    (["run", "--ber=-1e-3", "--", "true"], "out of range"),
    (["run", "--timeout", "315360000", "--", "true"], "out of range"),
    (["run", "--timeout", "-1", "--", "true"], "out of range"),
    (["run", "--nodes", "0", "--", "true"], "out of range"),
    (["run", "--ppn", "65", "--", "true"], "out of range"),
    (["mpirun", "--timeout", "1e9", "--", "true"], "not an integer"),
    (["mpirun", "--ber", "nan", "--", "true"], "finite"),
    (["daemon", "status", "--node", "-1"], "out of range"),
    (["topo", "ring:4", "--node", "99999"], "out of range"),
])
def test_cli_refuses_numbers_out_of_range(argv, word, capsys):
    """Refused while parsing (exit 2, the option named), before anything is built or run."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "error:" in err and word in err, err
