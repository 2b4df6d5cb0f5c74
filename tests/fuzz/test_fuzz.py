"""libFuzzer harnesses of every wire parser of libparanic (docs/reliability.md, "Fuzzing").

Each tests/fuzz/fuzz_<parser>.c calls the library's own parsing function (the simulator's
attach protocol on both sides, paranicd's frames on both sides and its HELLOs, the ports,
AM and socket wire headers, the RX ring records) and checks what it promised; built with
ASan and UBSan, a read outside the input is a crash as well.

* ``make test``: every input of tests/fuzz/corpus/<parser>/ (seeds generated from the
  headers by gen_corpus.c, and the crashers found, kept as regression inputs) through its
  harness once; and the committed seeds still match what the headers generate.
* ``make test-all`` (slow): a time-boxed campaign per harness (PARANIC_FUZZ_TIME seconds,
  default 60) that must not crash; prints executions and coverage.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from paranic.sim.paths import build_lock

HERE = Path(__file__).resolve().parent
BUILD = HERE.parents[1] / "build" / "fuzz"
CORPUS = HERE / "corpus"
#: one harness per parser: tests/fuzz/fuzz_<parser>.c, its corpus in corpus/<parser>/
PARSERS = sorted(p.stem[len("fuzz_"):] for p in HERE.glob("fuzz_*.c"))


def _run(exe: Path, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, ASAN_OPTIONS="abort_on_error=0:detect_leaks=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_every_parser_has_a_corpus():
    assert len(PARSERS) >= 7, PARSERS
    for p in PARSERS:
        files = list((CORPUS / p).glob("*"))
        assert files, f"tests/fuzz/corpus/{p}/ is empty: make -C tests/fuzz corpus"


@pytest.mark.parametrize("parser", PARSERS)
def test_corpus_replay(fuzz_build, parser, tmp_path):
    """Every corpus input once (-runs=0): no crash, no sanitizer report."""
    files = sorted((CORPUS / parser).glob("*"))
    r = _run(fuzz_build / f"fuzz_{parser}", ["-runs=0", f"-artifact_prefix={tmp_path}/crash-", str(CORPUS / parser)],
             timeout=120)
    assert r.returncode == 0, f"fuzz_{parser} crashed on its corpus:\n{r.stderr[-4000:]}"
    m = re.search(r"INITED.*?cov: (\d+)", r.stderr)
    assert m, r.stderr[-2000:]
    assert f"{len(files)} files found" in r.stderr or "seed corpus: files:" in r.stderr, r.stderr[-2000:]


def test_seeds_match_the_headers(fuzz_build, tmp_path):
    """The committed seeds are what gen_corpus writes from today's headers (a layout change
    must regenerate them: make -C tests/fuzz corpus)."""
    with build_lock("fuzz"):
        r = subprocess.run(["make", "-s", "-C", str(HERE), f"BUILD={BUILD}", f"{BUILD}/gen_corpus"],
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([str(BUILD / "gen_corpus"), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for d in sorted(tmp_path.iterdir()):
        for f in sorted(d.iterdir()):
            kept = CORPUS / d.name / f.name
            assert kept.exists() and filecmp.cmp(f, kept, shallow=False), \
                f"{kept} differs from what the headers give: make -C tests/fuzz corpus"


@pytest.mark.slow
@pytest.mark.parametrize("parser", PARSERS)
def test_fuzz_campaign(fuzz_build, parser, tmp_path):
    """A time-boxed campaign (PARANIC_FUZZ_TIME s, default 60) from the corpus: no crash."""
    secs = int(os.environ.get("PARANIC_FUZZ_TIME", "60"))
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS / parser, work)
    r = _run(fuzz_build / f"fuzz_{parser}",
             [f"-max_total_time={secs}", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/crash-", str(work)],
             timeout=secs + 120)
    done = re.findall(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+)", r.stderr)
    crashes = sorted(p.name for p in tmp_path.glob("crash-*"))
    if done:
        execs, cov, ft = done[-1]
        print(f"\nfuzz_{parser}: {int(execs)} executions in {secs} s, cov {cov}, ft {ft}, "
              f"{len(list(work.iterdir()))} corpus inputs, {len(crashes)} crashes")
    assert r.returncode == 0 and not crashes, \
        f"fuzz_{parser} crashed ({crashes}); keep the input in tests/fuzz/corpus/{parser}/:\n{r.stderr[-4000:]}"
