"""One node of test_coll.py::test_python_bindings (run under pn_launch): the Python
bindings of pn_allreduce / pn_reduce / pn_bcast with numpy arrays and bytes."""

import os

import numpy as np

from paranic.clib import PnError
from paranic.ports import Ports

node, n = int(os.environ["PARANIC_NODE"]), int(os.environ["PARANIC_NODES"])
p = Ports.open(ctx=1)
p.barrier()
r = p.allreduce(np.arange(8, dtype=np.float64) * (node + 1))
print("ok allreduce", r.tolist())
print("ok bcast", p.bcast(1, bytes([node]) * 8).hex())
print("ok bcast int8", p.bcast(2, np.full(4, node, dtype=np.int8)).tolist())
x = p.reduce(0, np.array([node, -node], dtype=np.int32), red="max")
print("ok reduce", None if x is None else x.tolist())
print("ok bytes", p.allreduce(int(node + 1).to_bytes(8, "little"), red="sum", dtype="I64").hex())
try:
    p.allreduce(np.zeros(3, dtype=np.float32), red="and")
except PnError as e:
    print("ok error", e.errno)
p.barrier()
p.close()
