"""The op table (``collscope/vocab/ops.py``) is the only place op facts are written (issue 24 item 5).

Every module of the package is parsed (ast) and searched for code that decides by an op's name: a comparison with
an op name (``op == "all_reduce"``, ``op in ("all_gather", "reduce_scatter")``), a dict literal keyed by op names,
a ``match`` case on one. Such code belongs in a row of :data:`collscope.vocab.ops.OP_TABLE`; what remains is
listed in :data:`ALLOWED` with the reason, per function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import collscope
from collscope.analysis.models import ALPHA_BETA_MODELS
from collscope.vocab.nccl import FUNCTIONS, OP_FUNC
from collscope.vocab.ops import (
    OP_BY_KERNEL,
    OP_BY_NCCL_TESTS_BINARY,
    OP_BY_TRACE_NAME,
    OP_FACTS,
    OP_TABLE,
    OPS,
    SPLIT_OPS,
    busbw_factor,
    elements_per_rank,
)

PACKAGE = Path(collscope.__file__).parent
TABLE = PACKAGE / "vocab" / "ops.py"
NAMES = frozenset(OPS)

HARNESS_BINDING = ("a harness binding: the engine's call for each op, its buffers and what it returns (adding an "
                   "op to the harnesses is one row plus these bindings)")
ALLOWED: dict[tuple[str, str], str] = {
    ("collectives/harness/mpi.py", "buffer_elements"): HARNESS_BINDING,
    ("collectives/harness/mpi.py", "_Buffers.__init__"): HARNESS_BINDING,
    ("collectives/harness/mpi.py", "_Buffers.fill_for_check"): HARNESS_BINDING,
    ("collectives/harness/mpi.py", "run_mpi_bench"): HARNESS_BINDING + "; MPI_Bcast works in place",
    ("collectives/harness/torch.py", "_check_spec"): HARNESS_BINDING + "; torch.distributed has no in-place alltoall",
    ("collectives/harness/torch.py", "_Tensors.__init__"): HARNESS_BINDING,
    ("collectives/harness/torch.py", "_Tensors.fill_for_check"): HARNESS_BINDING,
    ("collectives/harness/torch.py", "_measure"): HARNESS_BINDING + "; torch's all_reduce and broadcast work in "
                                                                      "place",
    ("collectives/harness/periodic.py", "expected_blocks"): "the expected output of each op (its definition), "
                                                            "checked by the harnesses",
    ("collectives/spec.py", "expected_result"): "the expected output of each op (its definition)",
    ("analysis/models.py", "<module>"): "ALPHA_BETA_MODELS: the registry of each op's model functions (code, not a "
                                        "fact; its keys are checked against OPS below)",
    ("analysis/ompi_models.py", "<module>"): "keyed by Open MPI's coll names (allreduce, bcast, reduce_scatter, "
                                             "...), three of which are spelled like collscope ops",
    ("vocab/ompi.py", "<module>"): "OMPI_ALGORITHMS is keyed by Open MPI's coll names, as ompi_info lists them",
    ("traces/gloo.py", "<module>"): "gloo runs reduce_scatter as an all_reduce: a fact of the gloo engine",
    ("traces/gloo.py", "gloo_calls"): "the warning about gloo's reduce_scatter (a fact of the gloo engine)",
    ("locate/srun.py", "SrunRunner._step"): "locate runs all_reduce_perf only: a choice of the tool, not a "
                                                 "fact of the op",
    ("sweeps/presets.py", "mpi_algos"): "a preset's data: which ops it sweeps with which settings",
}


def _names(node: ast.AST | None) -> list[str]:
    """Op names written as a literal in ``node``: a string, or a tuple/list/set (or frozenset(...)) of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names(e)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set",
                                                                                          "tuple") and node.args:
        return _names(node.args[0])
    return []


def _findings(tree: ast.AST) -> Iterator[tuple[str, int, str]]:
    """(enclosing function's qualified name or ``<module>``, line, what) for every decision by an op name."""
    def visit(node: ast.AST, scope: str) -> Iterator[tuple[str, int, str]]:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inner = child.name if scope == "<module>" else f"{scope}.{child.name}"
            if isinstance(child, ast.Compare):
                found = [n for part in (child.left, *child.comparators) for n in _names(part)]
                if found:
                    yield inner, child.lineno, f"comparison with {found}"
            elif isinstance(child, ast.Dict):
                found = [n for key in child.keys for n in _names(key)]
                if found:
                    yield inner, child.lineno, f"dict keyed by {found}"
            elif isinstance(child, ast.match_case):
                found = _names(child.pattern.value) if isinstance(child.pattern, ast.MatchValue) else []
                if found:
                    yield inner, child.pattern.lineno, f"match case {found}"
            yield from visit(child, inner)

    yield from visit(tree, "<module>")


def _package_findings() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE:
            continue
        rel = path.relative_to(PACKAGE).as_posix()
        for scope, line, what in _findings(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            out.setdefault((rel, scope), []).append(f"collscope/{rel}:{line} in {scope}: {what}")
    return out


def test_no_op_name_decisions_outside_the_table():
    found = _package_findings()
    bad = [line for key, lines in found.items() if key not in ALLOWED for line in lines]
    assert not bad, "decide by the op table (collscope/vocab/ops.py), not by op names:\n" + "\n".join(bad)


def test_every_allowance_is_still_needed_and_says_why():
    found = _package_findings()
    stale = [key for key in ALLOWED if key not in found]
    assert not stale, f"allowed but no longer needed (remove them): {stale}"
    assert all(len(reason) > 30 for reason in ALLOWED.values())


@pytest.mark.parametrize(("source", "expected"), [
    ('if op == "all_reduce":\n    pass\n', "comparison"),
    ('x = op in ("all_gather", "reduce_scatter")\n', "comparison"),
    ('x = op not in frozenset({"alltoall"})\n', "comparison"),
    ('T = {"broadcast": 1}\n', "dict"),
    ('match op:\n    case "sendrecv":\n        pass\n', "match"),
])
def test_the_search_finds_each_form(source, expected):
    assert [what for _, _, what in _findings(ast.parse(source))][0].startswith(expected)


def test_the_search_leaves_other_strings_alone():
    assert not list(_findings(ast.parse('x = name == "AllReduce" or algo in ("ring", "tree")\ny = {"ring": 1}\n')))


def test_the_table_is_complete_and_consistent():
    assert tuple(row.name for row in OP_TABLE) == OPS
    assert OP_BY_NCCL_TESTS_BINARY["all_reduce_perf"] == "all_reduce" and len(OP_BY_NCCL_TESTS_BINARY) == len(OPS)
    assert set(OP_FUNC.values()) == set(FUNCTIONS)  # NCCL's tunable functions, read from the table
    assert OP_BY_KERNEL["AllReduce"] == "all_reduce" and OP_BY_TRACE_NAME["all_to_all"] == "alltoall"
    assert set(ALPHA_BETA_MODELS) <= set(OPS)
    # nccl-tests src/*.cu *GetBw: 2(n-1)/n, (n-1)/n for the split ops, 1 for broadcast/reduce/sendrecv
    assert busbw_factor("all_reduce", 8) == 1.75 and busbw_factor("alltoall", 8) == 0.875
    assert {op for op in OPS if busbw_factor(op, 8) == 1.0} == {"broadcast", "reduce", "sendrecv"}
    assert SPLIT_OPS == {"all_gather", "reduce_scatter", "alltoall", "gather", "scatter", "hypercube"}
    assert elements_per_rank("reduce_scatter", 10, 4) == (40, 10) and elements_per_rank("alltoall", 10, 4) == (40, 40)
    assert OP_FACTS["broadcast"].rooted and OP_FACTS["reduce"].reduces and not OP_FACTS["gather"].reduces


def test_every_nccl_tests_op_has_a_model():
    """Models for every op nccl-tests has (issue 24 item 5), hypercube aside (no model yet: it is said so)."""
    assert set(OPS) - set(ALPHA_BETA_MODELS) == {"hypercube"}
