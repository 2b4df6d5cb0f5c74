"""The layers of docs/architecture.md, enforced: who may import whom, where the tools find
their files, and that nothing of the project reads outside its own tree.

  paranic.spec   (spec/)          imports nothing of ours
  paranic.hw     (hw/)            the spec
  paranic.sim    (sim/python/)    the spec and the gateware
  paranic.boards (boards/)        the spec and the gateware (board targets, a tool layer)
  paranic        (userlib/python) anything above; never the test tree
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: layer folder -> the paranic packages its modules may import
ALLOWED = {
    "spec": ("paranic.spec",),
    "hw": ("paranic.spec", "paranic.hw"),
    "sim/python": ("paranic.spec", "paranic.hw", "paranic.sim"),
    "boards": ("paranic.spec", "paranic.hw", "paranic.boards"),
}


def _imports(path: Path) -> list[str]:
    """Absolute module names a file imports (relative imports stay inside its package)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_below(layer):
    bad = []
    for f in sorted((ROOT / layer).rglob("*.py")):
        for mod in _imports(f):
            if (mod == "paranic" or mod.startswith("paranic.")) and \
                    not any(mod == a or mod.startswith(a + ".") for a in ALLOWED[layer]):
                bad.append(f"{f.relative_to(ROOT)} imports {mod}")
    assert not bad, "\n".join(bad)


def _test_tree_modules() -> set[str]:
    """Names the tests import their own helpers by: modules and packages of tests/."""
    return {p.stem for p in (ROOT / "tests").rglob("*.py")} | \
        {p.parent.name for p in (ROOT / "tests").rglob("__init__.py")}


def test_no_package_needs_the_test_tree():
    """No installed module imports a module of tests/ or builds a path into it."""
    test_mods = _test_tree_modules() - {"conftest", "__init__"}
    bad = []
    for pkg in ("spec", "hw", "sim/python", "boards", "userlib/python/paranic"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for mod in _imports(f):
                if mod.split(".")[0] in test_mods:
                    bad.append(f"{f.relative_to(ROOT)} imports {mod} (tests/)")
            if re.search(r"""(TREE|ROOT)\s*/\s*["']tests\b|["']tests/(cocotb|model|sim|hw|unit|userlib)""",
                         f.read_text()):
                bad.append(f"{f.relative_to(ROOT)} names a path in tests/")
    assert not bad, "\n".join(bad)


def _tracked_files() -> list[Path]:
    r = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:   # not a git checkout (an unpacked release): every file under the tree
        return [p for p in ROOT.rglob("*") if p.is_file() and not {".venv", "build", ".git"} & set(p.parts)]
    return [ROOT / ln for ln in r.stdout.splitlines()]


def test_nothing_reads_outside_the_tree():
    """A user's clone has nothing beside it: no file of the project (code, tests, Makefiles,
    scripts, documents) refers to the developers' shared folder next to the tree."""
    pattern = re.compile(re.escape("..") + r"/" + "shared" + r"\b|" + "shared" + r"/reference")
    me = Path(__file__).resolve()
    bad = []
    for f in _tracked_files():
        if f.resolve() == me or f.suffix in (".png", ".json") or not f.is_file():
            continue
        try:
            text = f.read_text()
        except UnicodeDecodeError:
            continue
        bad += [f"{f.relative_to(ROOT)}:{i}" for i, ln in enumerate(text.splitlines(), 1) if pattern.search(ln)]
    assert not bad, "these read or point outside the tree: " + ", ".join(bad)


def test_seed_figures_are_package_data():
    """The seed papers' figures come with the package: read through importlib.resources,
    and selected by pyproject.toml's package-data of paranic.bench in that package's
    folder, so a wheel carries them too."""
    import tomllib

    from paranic.bench.seed import seed_figures
    d = seed_figures()
    assert d["parastation"]["hardware"]["router_delay_ns_per_hop"] > 0
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder = ROOT / cfg["package-dir"]["paranic.bench"]
    selected = {p.name for pattern in cfg["package-data"]["paranic.bench"] for p in folder.glob(pattern)}
    assert "seed_figures.json" in selected, (folder, cfg["package-data"])
