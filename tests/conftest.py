"""Test-wide set-up: the tests' own helpers (``tests/model`` ...) are importable, in this
process and in the simulators cocotb starts (they take ``PYTHONPATH``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))
_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if str(TESTS_DIR) not in _path:
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), *_path])
