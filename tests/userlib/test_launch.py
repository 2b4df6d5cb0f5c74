"""pn_launch: processes per node (-p), their environment and output prefixes."""
from __future__ import annotations


SCRIPT = 'echo "env $PARANIC_NODES $PARANIC_NODE $PARANIC_LOCAL_RANK $PARANIC_RANK $PARANIC_PPN"'


def test_ppn_environment_and_prefixes(run_nodes) -> None:
    run = run_nodes(["sh", "-c", SCRIPT], 3, "launch-ppn", ppn=2)
    assert run.rc == 0, run.out
    assert not run.nodes  # with ppn > 1 every line is "node.local: ..."
    assert sorted(run.procs) == [(n, r) for n in range(3) for r in range(2)]
    for (n, r), lines in run.procs.items():
        assert lines == [f"env 3 {n} {r} {n * 2 + r} 2"], run.out


def test_one_process_per_node_keeps_node_prefix(run_nodes) -> None:
    run = run_nodes(["sh", "-c", SCRIPT], 2, "launch-ppn1")
    assert run.rc == 0, run.out
    assert run.nodes == {0: ["env 2 0 0 0 1"], 1: ["env 2 1 0 1 1"]}
    assert run.procs[(1, 0)] == run.nodes[1]


def test_bad_ppn_is_refused(run_nodes) -> None:
    run = run_nodes(["true"], 2, "launch-ppn0", ppn=0, extra=[])
    assert run.rc == 2 and "usage" in run.out
