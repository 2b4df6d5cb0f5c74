"""The context sequences (userlib/src/ctxseq.c, paranic/pn_ctxseq.h) against a model of
the per-context registers (userlib/tests/ctxseq_test.c): order of writes, polling
while busy, giving up, a device that is gone, two sequences interleaved.

The mutants show that the test catches what matters: each compiles the test program
against a copy of ctxseq.c with one mistake a change could make, and the program must
report a failure."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from paranic.paths import INCLUDE, USERLIB

CASES = ("names", "open_idle", "open_busy", "busy_bits", "close", "clear", "give_up", "gone", "window",
         "interleave", "run", "edges")

#: (what the mistake is, text in ctxseq.c, its replacement)
MUTANTS = (
    ("close frees before posted writes landed",
     "{ PH_DISABLE, PH_QUIESCE, PH_SETTLE, PH_RESET, PH_QUIESCE, PH_DONE }",
     "{ PH_DISABLE, PH_QUIESCE, PH_RESET, PH_SETTLE, PH_QUIESCE, PH_DONE }"),
    ("open resets after enabling",
     "{ PH_DISABLE, PH_QUIESCE, PH_RESET, PH_QUIESCE, PH_PROGRAM, PH_DONE }",
     "{ PH_DISABLE, PH_QUIESCE, PH_PROGRAM, PH_RESET, PH_QUIESCE, PH_DONE }"),
    ("open without waiting",
     "{ PH_DISABLE, PH_QUIESCE, PH_RESET, PH_QUIESCE, PH_PROGRAM, PH_DONE }",
     "{ PH_DISABLE, PH_RESET, PH_QUIESCE, PH_PROGRAM, PH_DONE, PH_DONE }"),
    ("open enables before the PIO buffer is zero",
     "{ PH_DISABLE, PH_QUIESCE, PH_RESET, PH_QUIESCE, PH_PROGRAM, PH_DONE }",
     "{ PH_DISABLE, PH_QUIESCE, PH_RESET, PH_PROGRAM, PH_DONE, PH_DONE }"),
    ("close returns before the PIO buffer is zero",
     "{ PH_DISABLE, PH_QUIESCE, PH_SETTLE, PH_RESET, PH_QUIESCE, PH_DONE }",
     "{ PH_DISABLE, PH_QUIESCE, PH_SETTLE, PH_RESET, PH_DONE, PH_DONE }"),
    ("a pending status write does not hold the reset",
     "mask = ph == PH_QUIESCE ? PN_CTX_STATE_BUSY :",
     "mask = ph == PH_QUIESCE ? (PN_CTX_STATE_BUSY & ~PN_CTX_STATE_STATUS_DIRTY) :"),
    ("no SEL after the caller may have moved it",
     "s->sel_ok = 0;   /* the caller may run other accesses before the next call */",
     ""),
    ("a device that is gone reads as busy",
     "if (read_value == 0xffffffffu) {",
     "if (read_value == 0xfffffffeu) {"),
    ("giving up always resets",
     "if (how == PN_CTXSEQ_RESET_ANYWAY) {",
     "if (how == PN_CTXSEQ_RESET_ANYWAY || 1) {"),
    ("disable keeps the status block",
     "return enable ? c->status_addr : 0;",
     "return c->status_addr;"),
    ("the WRITE strobe before the last field",
     "PN_CTXREG_TX_LOG2, PN_CTXREG_STATUS_ADDR, PN_CTXREG_WIN_BASE, PN_CTXREG_WIN_SIZE,\n\tPN_CTXREG_WRITE,",
     "PN_CTXREG_TX_LOG2, PN_CTXREG_STATUS_ADDR, PN_CTXREG_WIN_BASE, PN_CTXREG_WRITE,\n\tPN_CTXREG_WIN_SIZE,"),
)


def test_ctxseq_cases(userlib_build):
    r = subprocess.run([str(userlib_build / "ctxseq_test")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    ok = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("ok ")]
    assert ok == list(CASES), r.stdout
    assert "FAIL" not in r.stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("what,old,new", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_ctxseq_mutant_fails(tmp_path: Path, what: str, old: str, new: str):
    src = (USERLIB / "src" / "ctxseq.c").read_text()
    assert src.count(old) == 1, f"the mutant {what!r} no longer applies: update it to ctxseq.c"
    (tmp_path / "ctxseq.c").write_text(src.replace(old, new))
    exe = tmp_path / "ctxseq_test"
    cc = subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Wextra", f"-I{INCLUDE}",
                         f"-I{USERLIB / 'tools'}", str(USERLIB / "tests" / "ctxseq_test.c"),
                         str(tmp_path / "ctxseq.c"), "-o", str(exe)], capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "FAIL" in r.stdout, f"{what}: not caught\n{r.stdout}"


@pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None, reason="needs gcc and nm")
def test_ctxseq_freestanding(tmp_path: Path):
    """ctxseq.c calls nothing (the kernel and the firmware link it as it is), at any
    optimisation level; pn_ctxseq.h compiles on its own in C11 and C++17."""
    for opt in ("-O0", "-O2", "-Os"):
        o = tmp_path / f"ctxseq{opt}.o"
        cc = subprocess.run(["gcc", "-std=c11", opt, "-ffreestanding", "-Wall", "-Wextra", "-Werror",
                             f"-I{INCLUDE}", "-c", str(USERLIB / "src" / "ctxseq.c"), "-o", str(o)],
                            capture_output=True, text=True)
        assert cc.returncode == 0, cc.stderr
        undefined = subprocess.run(["nm", "-u", str(o)], capture_output=True, text=True, check=True).stdout
        assert undefined.split() == [], f"{opt}: ctxseq.c calls {undefined.split()}"
    src = tmp_path / "h.c"
    src.write_text("#include <paranic/pn_ctxseq.h>\nint f(void);\n"
                   "int f(void) { return PN_CTXREG_COUNT + PN_CTXSEQ_WINDOW_SHRINK; }\n")
    for cc, lang, std in (("gcc", "c", "-std=c11"), ("g++", "c++", "-std=c++17")):
        r = subprocess.run([cc, std, "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}", "-x", lang, "-c", str(src),
                            "-o", str(tmp_path / "h.o")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
