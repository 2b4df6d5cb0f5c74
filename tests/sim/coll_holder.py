"""Take this node's collective unit on a port of context 0 (one allreduce, which every
node's holder makes together: the first command owns the unit), then run the command
given with the same environment, on another context; exit with its status.
For tests/sim/test_coll_unit_sim.py: contexts without the unit."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from paranic.ports import Ports

with Ports.open(ctx=0) as p:
    p.allreduce(np.zeros(1))
    print(f"holding the unit: {p.coll_path}", flush=True)
    sys.exit(subprocess.run(sys.argv[1:]).returncode)
