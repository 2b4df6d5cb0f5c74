"""Where the tools find their files: the source tree they run from and its builds.

The tools build and run C code of the tree (libparanic, its tools and tests, the
driver, the simulator's harness), so they run from a source checkout in which
``make deps`` installed this package (editable). The tree is the simulator's
(:mod:`paranic.sim.paths`); everything here is a place inside it.
"""

from __future__ import annotations

from paranic.sim.paths import BUILD_ROOT, RUN_DIR, TREE

__all__ = ["TREE", "BUILD_ROOT", "RUN_DIR", "USERLIB", "INCLUDE", "USERLIB_BUILD", "BIN", "TESTS",
           "LIBRARY", "DRIVER", "SCRIPTS", "DOCS"]

#: libparanic's sources and public headers.
USERLIB = TREE / "userlib"
INCLUDE = USERLIB / "include"
#: libparanic's build (``make -C userlib``): the library, its tools, its test programs.
USERLIB_BUILD = TREE / "build" / "userlib"
BIN = USERLIB_BUILD / "bin"
TESTS = USERLIB_BUILD / "tests"
LIBRARY = USERLIB_BUILD / "libparanic.so"
#: The Linux driver, the helper scripts, the documents.
DRIVER = TREE / "driver"
SCRIPTS = TREE / "scripts"
DOCS = TREE / "docs"
