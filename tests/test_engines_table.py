"""The one engine table (collscope/vocab/engines.py): every row complete, every capability question answered from
it (by the launchers, the sweep constraints, locate and the CLI), no engine-name comparison elsewhere that states
a capability, and locate's steps built by the sweeps' launcher."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any, get_args

import click
import pytest

from collscope.collectives.measure import DTYPES
from collscope.collectives.record import ENGINES as RECORD_ENGINES
from collscope.collectives.spec import BENCH_DTYPES, BENCH_OPS
from collscope.errors import ConfigError
from collscope.locate.model import TestSpec
from collscope.locate.steps import StepOptions, step_launch
from collscope.sweeps.constraints import PlanContext, skip_reason
from collscope.sweeps.launch_options import LaunchOptions
from collscope.sweeps.launchers import build_launch
from collscope.sweeps.spec import BACKENDS, ENGINES, Point, SweepSpec
from collscope.vocab.engines import (
    BACKEND_NAMES,
    ENGINE_NAMES,
    ENGINE_ROWS,
    HARNESS_DTYPES,
    EngineRow,
    engine_row,
    reads_variable,
    rows_of,
)
from collscope.vocab.knobs import KNOBS, KnobFamily
from collscope.vocab.ops import DTYPE_NAMES, OPS

ROOT = Path(__file__).resolve().parents[1]
ROW_IDS = [r.name for r in ENGINE_ROWS]


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=ROW_IDS)
def test_every_row_is_complete(row: EngineRow):
    for f in fields(row):
        value = getattr(row, f.name)
        if f.name in ("backend", "srun_mpi", "default_backend", "master_addr", "persistent", "tuning_prefixes"):
            continue  # None / False / () are answers here
        assert value not in (None, "", (), frozenset()), f"{row.name}: {f.name} is empty"
    assert row.ops and set(row.ops) <= set(OPS) and len(set(row.ops)) == len(row.ops)
    assert set(row.dtypes) <= set(DTYPE_NAMES) and "float32" in row.dtypes
    assert row.knob_families <= set(get_args(KnobFamily))
    assert row.option.startswith(f"--engine {row.engine}") and (row.backend is None or row.backend in row.option)
    assert row.name == row.engine + (f"/{row.backend}" if row.backend and len(rows_of(row.engine)) > 1 else "")
    assert row.rail_unread({}) is None  # an empty environment pins rails
    assert all(row.honours(KNOBS[name].family) for name in row.rail_variables)  # it reads its own rail variables


def test_engines_and_backends_are_unique_and_each_has_one_default():
    keys = [(r.engine, r.backend) for r in ENGINE_ROWS]
    assert len(keys) == len(set(keys))
    assert set(ENGINE_NAMES) == {r.engine for r in ENGINE_ROWS}
    for engine in ENGINE_NAMES:
        rows = rows_of(engine)
        assert len(rows) == 1 or sum(r.default_backend for r in rows) == 1
        assert engine_row(engine) in rows


def test_the_engine_and_backend_names_elsewhere_agree_with_the_table():
    """Where a Literal type must name them (records, sweep specs), the names are the table's; the CLI's --engine
    choices are the table's; bench's ops and dtypes are the bench rows'."""
    assert RECORD_ENGINES == frozenset(ENGINE_NAMES)
    assert set(ENGINES) == set(ENGINE_NAMES) and set(BACKENDS) == set(BACKEND_NAMES)
    assert tuple(DTYPES) == HARNESS_DTYPES
    bench_rows = [r for r in ENGINE_ROWS if r.program == "bench"]
    assert set(BENCH_OPS) == {op for r in bench_rows for op in r.ops}
    assert set(BENCH_DTYPES) == {d for r in bench_rows for d in r.dtypes}
    from collscope.cli import main

    for command in ("bench", "sweep"):
        group = main.commands[command]
        cmd = group.commands["run"] if isinstance(group, click.Group) else group
        engine = next(p for p in cmd.params if p.name == "engine")
        assert isinstance(engine.type, click.Choice) and tuple(engine.type.choices) == ENGINE_NAMES, command


def test_torch_without_a_backend_is_gloo_as_bench_runs_it():
    assert engine_row("torch").name == "torch/gloo"
    assert engine_row("torch", "nccl").name == "torch/nccl"
    with pytest.raises(ConfigError, match="applies to engine torch only"):
        engine_row("mpi", "gloo")
    with pytest.raises(ConfigError, match="valid: mpi, torch, nccl-tests"):
        engine_row("hccl")


def _spec(row: EngineRow, **kw) -> SweepSpec:
    return SweepSpec(name="t", engine=row.engine, backend=row.backend, repeats=1, **kw)


def _binary(op: str) -> str:
    return f"/nt/{op}_perf_mpi"


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=ROW_IDS)
@pytest.mark.parametrize("op", OPS)
def test_the_launcher_runs_exactly_the_ops_of_the_row(row: EngineRow, op: str):
    spec = _spec(row, nranks=4, nnodes=2)
    options = LaunchOptions(python="/py", nccl_tests_binary=_binary(op) if row.program == "nccl-tests" else None)
    if op in row.ops:
        command = build_launch("srun", spec, Point("p", op, {}), "/o.jsonl", options)
        assert command.records_from == row.records_from
        assert (row.program == "bench") == ("collscope" in command.argv)
    else:
        with pytest.raises(ConfigError, match=f"op \\(engine {row.engine}\\)='{op}' is invalid"):
            build_launch("srun", spec, Point("p", op, {}), "/o.jsonl", options)


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=ROW_IDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_launcher_takes_exactly_the_dtypes_of_the_row(row: EngineRow, dtype: str):
    spec = _spec(row, dtype=dtype)
    options = LaunchOptions(python="/py", nccl_tests_binary=_binary("all_reduce") if row.program == "nccl-tests"
                            else None)
    if dtype in row.dtypes:
        build_launch("srun", spec, Point("p", "all_reduce", {}), "/o.jsonl", options)
    else:
        with pytest.raises(ConfigError, match="dtype"):
            build_launch("srun", spec, Point("p", "all_reduce", {}), "/o.jsonl", options)


_A_VALUE = {"NCCL_ALGO": "Ring", "NCCL_TESTS_SPLIT_MASK": "0x1", "GLOO_SOCKET_IFNAME": "eth0",
            "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=ROW_IDS)
@pytest.mark.parametrize("name", sorted(_A_VALUE))
def test_a_sweep_skips_exactly_the_knobs_of_families_the_row_does_not_read(row: EngineRow, name: str):
    family = KNOBS[name].family
    ctx = PlanContext(spec=_spec(row, nnodes=1))
    reason = skip_reason("all_reduce", {name: _A_VALUE[name]}, ctx)
    if row.honours(family):
        assert reason is None or "no effect on this engine" not in reason
    else:
        assert reason is not None and f"no effect on this engine ({row.name}" in reason


def test_every_knob_family_is_read_by_some_engine():
    families = {k.family for k in KNOBS.values()}
    assert families == set(get_args(KnobFamily))
    assert all(any(r.honours(f) for r in ENGINE_ROWS) for f in families)


@pytest.mark.parametrize(("name", "readers"), [
    ("NCCL_BUFFSIZE", {"nccl-tests", "torch/nccl"}),
    ("OMPI_MCA_coll_tuned_priority", {"mpi"}),
    ("OMPI_MCA_pml", {"mpi"}),  # the point-to-point layer under the collectives: Open MPI reads it
    ("GLOO_SOCKET_IFNAME", set()),
])
def test_which_engine_reads_an_inherited_variable(name: str, readers: set[str]):
    assert {r.name for r in ENGINE_ROWS if reads_variable(r, name)} == readers


# ---- no second home for an engine's capabilities --------------------------------------------------------------

_NAMES = r'"(?:mpi|torch|nccl-tests|gloo|nccl)"'
_COMPARISON = re.compile(
    rf"\b(?:engine|backend)\b\s*(?:==|!=)\s*{_NAMES}"
    rf"|\b(?:engine|backend)\b\s*(?:not\s+)?in\s*[(\[{{]\s*{_NAMES}"
    rf"|{_NAMES}\s*(?:==|!=)\s*[\w.]*\b(?:engine|backend)\b")

ALLOWED: dict[str, int] = {
    # plain dispatch on the harness to run, not a capability: bench starts the mpi4py or the torch harness, and
    # the torch harness checks and sets up its backend (CUDA device, NCCL version)
    "collscope/cli/bench.py": 3,
    "collscope/collectives/harness/torch.py": 8,
    # traces: the backend a trace names (gloo's worker threads), not an engine of collscope
    "collscope/traces/gloo.py": 4,
    # analysis: the NCCL cost model applies to records whose backend is NCCL (records, not engines)
    "collscope/analysis/efficiency.py": 3,
    "collscope/analysis/expected.py": 1,
    "collscope/analysis/recommend/env.py": 1,
    # locate: the mpi engine's steps get Open MPI's asynchronous modex (a workaround of an Open MPI 5.0 bug)
    "collscope/locate/steps.py": 1,
    # sweep meta: record mpirun's version for the mpi engine
    "collscope/sweeps/meta.py": 1,
    # ingest's summary names the library of a run that is not NCCL's (rccl-tests): a record's value, not a capability
    "collscope/cli/ingest.py": 1,
    # the nccl-tests reader's -R 2 note is about NCCL's symmetric-memory kernels, not RCCL's: the run's library
    "collscope/collectives/nccl_tests/launch.py": 1,
}
"""Comparisons of engine or backend names that remain outside the table, each with why it is not a capability.
A new one fails the test: read the row instead (collscope/vocab/engines.py)."""


def _comparisons() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted((ROOT / "collscope").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("collscope/vocab/"):
            continue
        count = len(_COMPARISON.findall(path.read_text()))
        if count:
            found[rel] = count
    return found


def test_no_module_outside_the_table_compares_engine_names_for_a_capability():
    found = _comparisons()
    extra = {p: n for p, n in found.items() if n > ALLOWED.get(p, 0)}
    assert not extra, f"engine/backend names compared outside collscope/vocab/engines.py: {extra}"


def test_the_comparison_scan_sees_the_forms_it_forbids():
    for line in ('if spec.engine == "mpi":', 'ok = engine in ("mpi", "torch")', 'if "nccl" == spec.backend:',
                 'if backend != "gloo":', "if engine not in ('mpi',):".replace("'", '"')):
        assert _COMPARISON.search(line), line
    assert not _COMPARISON.search('engine_row(spec.engine).program == "bench"')


# ---- locate's steps are sweep launches --------------------------------------------------------------------------

def _sweep_launch(row: EngineRow, *, nodes: int, per_node: int, size: int, gpus: int, **launch) -> tuple[str, ...]:
    spec = SweepSpec(name="x", engine=row.engine, backend=row.backend, min_bytes=size, max_bytes=size,
                     iters=10, warmup=3, check=False, nranks=nodes * per_node, nnodes=nodes, repeats=1)
    sizes = (size,) if row.program == "bench" else None
    options = LaunchOptions(python="/py", srun_mpi="pmix", gpus_per_node=gpus or None, rank_timeout_s=54,
                            nccl_tests_binary="/nt/all_reduce_perf_mpi" if row.program == "nccl-tests" else None,
                            **launch)
    return build_launch("srun", spec, Point("p", "all_reduce", {}, sizes=sizes), "/w/o.jsonl", options).argv


def _without(argv: tuple[str, ...], *pairs: str) -> tuple[str, ...]:
    out = list(argv)
    for name in pairs:
        at = out.index(name)
        del out[at:at + 2]
    return tuple(out)


@pytest.mark.parametrize("row", ENGINE_ROWS, ids=ROW_IDS)
def test_a_locate_step_is_the_sweep_launch_of_the_same_geometry(row: EngineRow):
    """A group test on 2 nodes: the argv a sweep's srun launcher builds for the same ranks, nodes, size and GPU
    policy, plus the step's own nodes and name."""
    gpus = 8 if row.needs_gpus else 0
    gpu_facts: dict[str, Any] = {"slurm_version": (23, 11, 0), "cpus_on_node": 224} if gpus else {}
    options = StepOptions(engine=row.engine, backend=row.backend or "gloo", python="/py", gpus_per_node=gpus,
                          nccl_tests_binary="/nt/all_reduce_perf_mpi", rank_timeout_s=54, **gpu_facts)
    step = step_launch(TestSpec(kind="group", nodes=("n1", "n2")), options, "/w/o.jsonl")
    per_node = gpus or 1
    sweep = _sweep_launch(row, nodes=2, per_node=per_node, size=16 << 20, gpus=gpus, even_placement=True,
                          **gpu_facts)
    assert _without(step.argv, "--nodelist", "--job-name") == sweep
    assert step.argv[step.argv.index("--nodelist") + 1] == "n[1-2]"
    assert f"--ntasks-per-node={per_node}" in step.argv
    if gpus:
        assert "--tres-bind=gres/gpu:none" in step.argv and "--cpus-per-task=28" in step.argv
