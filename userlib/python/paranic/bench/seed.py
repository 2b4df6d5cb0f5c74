"""The seed papers' published figures, which every benchmark prints beside its own.

They are facts (``seed_figures.json``, package data of :mod:`paranic.bench`, with its
sources in ``_about``); a benchmark reads this copy and nothing outside the package.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=1)
def seed_figures() -> dict:
    return json.loads(resources.files(__package__).joinpath("seed_figures.json").read_text())
