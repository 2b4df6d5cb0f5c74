#!/usr/bin/env python3
"""Where an allreduce's time goes on the simulated cluster (docs/benchmarks.md,
"Collectives": the cycle breakdown). Runs ``pn_collbench SIZE CALLS`` on NODES nodes of a
simulator started with ``-v -v`` (the harness logs every message the collective kernel
takes and every word it gives, with its cycle; sim/harness/coll.cpp), then, per call
(episode), from those records:

* ``enter``: the cycle each node's kernel has taken its host command (its last word);
* ``out``: the cycle the result's header left the node's kernel on host_out;
* per node, the kernel's time from the completing message's last word to the result
  header out (reading it, the fold, the wait), and from the last node's command to
  the result;
* per node, its kernel's last messages: kind (h: host, n: network), words, cycle and,
  for a network message, its source (``n4@3032<7``);
* node 0's call in four parts: its command to the first member's vector in, to the last
  one in, to its result out, to its next command.

Usage: coll_trace.py [--topo ring:8] [--nodes 8] [--bytes 8] [--calls 6] [--tree]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys

from paranic.launch import clean_env, cluster_name, launch, tool
from paranic.sim import run as simrun

TOOK = re.compile(r"node (\d+): collective kernel took a (host|network) message of (\d+) words at cycle (\d+): "
                  r"(\d+) words out(?: \(from node (\d+)\))?")
HOST_OUT = re.compile(r"node (\d+): host_out ([0-9a-f]+) at cycle (\d+)")
NET_OUT = re.compile(r"node (\d+): net_out ([0-9a-f]+) at cycle (\d+)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topo", default="ring:8")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--bytes", type=int, default=8)
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--tree", action="store_true", help="PARANIC_COLL_A2A_MAX=0")
    a = ap.parse_args()
    sock = simrun.RUN_DIR / f"coll-trace-{a.topo.replace(':', '')}.sock"
    simrun.RUN_DIR.mkdir(parents=True, exist_ok=True)
    sim = simrun.start(a.topo, socket=sock, extra_args=["-v", "-v"], timeout=900)
    try:
        env = sim.env(clean_env())
        env.update({"PARANIC_COLL": "hw", **({"PARANIC_COLL_A2A_MAX": "0"} if a.tree else {})})
        r = launch([str(tool("pn_collbench")), str(a.bytes), str(a.calls)], a.nodes, cluster_name("coll-trace"),
                   backend="sim", timeout=900, env=env)
        rows = [json.loads(ln) for ln in r.nodes[0] if ln.startswith("{")]
    finally:
        sim.stop()
    log = sim.log_text()
    # per node: the kernel's messages in order: (kind, words, cycle, words out)
    took: dict[int, list] = {}
    for m in TOOK.finditer(log):
        took.setdefault(int(m[1]), []).append((m[2], int(m[3]), int(m[4]), int(m[5]), m[6]))
    outs: dict[int, list] = {}
    for m in HOST_OUT.finditer(log):
        outs.setdefault(int(m[1]), []).append((int(m[2], 16), int(m[3])))
    hw = [r for r in rows if r["op"] == "allreduce"][0]["hw_ns"]
    print(f"pn_collbench on node 0, simulated ns per call: {hw}")
    # results: a header word has phase DOWN (bit 7); the vector words follow it
    from paranic.spec import kernels as K
    res = {n: [(K.unpack_coll(w), c) for w, c in ws if (w >> 7) & 1 and K.unpack_coll(w)["op"] == 1
               and K.unpack_coll(w)["nbytes"] == a.bytes] for n, ws in outs.items()}
    eps = sorted({h["episode"] for n in res for h, _ in res[n]})
    enters = {n: [c for kind, words, c, _, _ in took[n] if kind == "host" and words > 1] for n in took}
    lines = []
    for k, ep in enumerate(eps[1:], start=1):      # the first call: the unit's warm-up
        ent = {n: enters[n][k] for n in range(a.nodes) if len(enters[n]) > k}
        out = {n: next(c for h, c in res[n] if h["episode"] == ep) for n in range(a.nodes)}
        last = max(ent.values())
        lines.append((ep, min(ent.values()), last, out))
        spread = " ".join(f"{n}:{ent[n] - last:+d}/{out[n] - last}" for n in sorted(ent))
        print(f"episode {ep}: node: enter - last enter / result out - last enter (cycles): {spread}")
    d = [max(o.values()) - last for _, _, last, o in lines]
    d0 = [o[0] - last for _, _, last, o in lines]
    print(f"last enter -> last result out: median {statistics.median(d)} cycles (n={len(d)}), node 0: "
          f"median {statistics.median(d0)}")
    # node 0's call in four parts (medians over the calls): its command in the kernel ->
    # the first member's vector in -> the last one in -> the result header out -> its
    # next command in the kernel
    parts = []
    for k, (ep, _, _, out) in enumerate(lines, start=1):
        if len(enters[0]) <= k + 1:
            break
        e, o, nxt = enters[0][k], out[0], enters[0][k + 1]
        ins = [c for kind, _w, c, _o, _s in took[0] if kind == "network" and e <= c <= o]
        if ins:
            parts.append((ins[0] - e, ins[-1] - ins[0], o - ins[-1], nxt - o))
    if parts:
        med = [statistics.median(p[i] for p in parts) for i in range(4)]
        print(f"node 0, median of {len(parts)} calls (cycles): command -> first vector in {med[0]}, "
              f"first -> last in {med[1]}, last in -> result out {med[2]}, result out -> next command {med[3]}; "
              f"sum {sum(med)}")
    # the completing message at each node: the last network message before its result
    for n in range(a.nodes):
        seq = took[n]
        print(f"node {n}: " + ", ".join(f"{kind[0]}{words}@{c}" + (f"<{src}" if kind == "network" and src else "")
                                        for kind, words, c, _, src in seq[-(2 * a.nodes):]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
