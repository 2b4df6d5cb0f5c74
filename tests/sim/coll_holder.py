"""Hold a context of this node (the first attached, so its collective unit is this
process's), then run the command given with the same environment; exit with its status.
For tests/sim/test_coll_unit_sim.py: a context without the unit."""

from __future__ import annotations

import subprocess
import sys

from paranic.lib import Hal

with Hal.open(ctx=0):
    print("holding ctx 0", flush=True)
    sys.exit(subprocess.run(sys.argv[1:]).returncode)
