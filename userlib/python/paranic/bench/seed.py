"""The seed papers' published figures (../shared/reference/seed_figures.json)."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]


@lru_cache(maxsize=1)
def seed_figures() -> dict:
    """Figures to print beside ours; PARANIC_SEED_FIGURES overrides the path."""
    candidates = [os.environ.get("PARANIC_SEED_FIGURES"),
                  ROOT.parent / "shared/reference/seed_figures.json"]
    for c in candidates:
        if c and Path(c).is_file():
            return json.loads(Path(c).read_text())
    raise FileNotFoundError("seed_figures.json not found (set PARANIC_SEED_FIGURES)")
