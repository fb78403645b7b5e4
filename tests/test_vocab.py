"""The vocabulary is defined once: every Literal and every table elsewhere is the vocabulary's, or equal to it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

import collscope.vocab as vocab
from collscope.analysis import load
from collscope.analysis.nccl_model import constants, model
from collscope.analysis.recommend import records
from collscope.collectives import spec as bench_spec
from collscope.collectives.nccl_log import tuning
from collscope.collectives.nccl_tests import run as nccl_tests_run
from collscope.sweeps import check
from collscope.sweeps.adaptive import planner
from collscope.vocab import configs, knobs, nccl, ompi, ops

PACKAGE = Path(vocab.__file__).resolve().parent.parent


def test_op_literals_equal_the_vocab_tuples() -> None:
    assert get_args(ops.Op) == ops.OPS
    assert get_args(bench_spec.BenchOp) == ops.HARNESS_OPS == bench_spec.BENCH_OPS
    assert get_args(nccl_tests_run.NcclTestsOp) == ops.OPS
    assert check.KNOWN_OPS == ops.SWEEP_OPS == get_args(ops.SweepOp)
    assert set(ops.HARNESS_OPS) < set(ops.SWEEP_OPS) < set(ops.OPS)


def test_nccl_names_come_from_vocab() -> None:
    assert tuning.ALGORITHMS is nccl.ALGORITHMS and tuning.PROTOCOLS is nccl.PROTOCOLS
    assert constants.ALGOS is nccl.ALGORITHMS and constants.PROTOS is nccl.PROTOCOLS
    assert model.NCCL_OPS is nccl.OP_FUNC
    assert set(nccl.OP_FUNC) <= set(ops.OPS) and set(nccl.OP_FUNC.values()) == set(nccl.FUNCTIONS)
    assert tuning.normalize_algorithm("2") == "CollNetDirect" and tuning.normalize_protocol("1") == "LL128"


def test_config_naming_is_one_function() -> None:
    assert load.config_of is configs.config_of and load.is_tuning_variable is configs.is_tuning_variable
    assert load.DEFAULT_CONFIG is planner.DEFAULT_CONFIG is records.DEFAULT_CONFIG is configs.DEFAULT_CONFIG
    assert configs.config_of({}) == "default"
    assert configs.config_of({"NCCL_PROTO": "LL", "NCCL_ALGO": "Tree", ompi.DYNAMIC_RULES: "1"}) == \
        "NCCL_ALGO=Tree;NCCL_PROTO=LL"
    assert knobs.DYNAMIC_RULES is ompi.DYNAMIC_RULES


def test_public_api_is_importable() -> None:
    for name in vocab.__all__:
        assert getattr(vocab, name) is not None, name


def _literal_tuples(path: Path) -> list[tuple[int, tuple[str, ...]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Tuple) and len(node.elts) >= 3 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            found.append((node.lineno, tuple(e.value for e in node.elts)))  # type: ignore[attr-defined]
    return found


def test_no_module_outside_vocab_spells_out_a_vocabulary_list() -> None:
    lists = {ops.OPS, ops.HARNESS_OPS, ops.SWEEP_OPS, nccl.ALGORITHMS, nccl.PROTOCOLS, nccl.FUNCTIONS}
    copies = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
              if "vocab" not in path.parts for line, items in _literal_tuples(path) if items in lists]
    assert not copies, f"vocabulary lists re-defined (import them from collscope.vocab): {copies}"


def test_one_table_of_element_types_serves_records_harnesses_and_traces():
    """Element types live in vocab.ops.DTYPE_TABLE only: the harnesses' sizes, nccl-tests' names and every spelling
    the trace readers met before the table took them over (torch c10 names, C names, NCCL's enum names)."""
    from collscope.collectives.measure import DTYPES, ELEM_SIZE
    from collscope.traces.names import dtype_of, element_bytes
    from collscope.vocab.ops import DTYPE_ALIASES, DTYPE_SPELLINGS, DTYPE_TABLE

    assert ELEM_SIZE == {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8,
                         "int8": 1, "uint8": 1} and set(ELEM_SIZE) == set(DTYPES)
    seen_in_traces = {
        "Float": "float32", "c10::Float": "float32", "Half": "float16", "c10::Half": "float16", "BFloat16": "bfloat16",
        "c10::BFloat16": "bfloat16", "Double": "float64", "int": "int32", "long": "int64", "long int": "int64",
        "short": "int16", "char": "int8", "signed char": "int8", "byte": "uint8", "unsigned char": "uint8",
        "bool": "bool", "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
        "ncclFloat32": "float32", "ncclFloat": "float32", "ncclHalf": "float16", "ncclBfloat16": "bfloat16",
        "ncclFloat64": "float64", "ncclInt32": "int32", "ncclInt64": "int64", "ncclInt8": "int8", "ncclUint8": "uint8",
    }
    for spelling, name in seen_in_traces.items():
        assert dtype_of(spelling) == name, spelling
    assert dtype_of("complex64") is None and element_bytes("complex64") is None
    assert {d.name: element_bytes(d.name) for d in DTYPE_TABLE} == {d.name: d.elem_bytes for d in DTYPE_TABLE}
    assert all(DTYPE_SPELLINGS[alias.lower()] == name for alias, name in DTYPE_ALIASES.items())
    assert "c10::half" not in DTYPE_ALIASES  # records and nccl-tests tables take exact names only


def test_one_engine_table_answers_what_each_engine_can_do():
    """collscope/vocab/engines.py: every engine once; torch is one row per backend, gloo when none is given (as
    collscope bench runs it), so a sweep of torch without a backend skips NCCL knobs, which would not apply."""
    from collscope.sweeps.constraints import PlanContext, skip_reason
    from collscope.sweeps.spec import SweepSpec
    from collscope.vocab.engines import ENGINE_NAMES, ENGINE_ROWS, engine_row

    assert [r.name for r in ENGINE_ROWS] == ["nccl-tests", "torch/nccl", "mpi", "torch/gloo"]
    assert set(ENGINE_NAMES) == {"mpi", "torch", "nccl-tests"}
    assert {r.name for r in ENGINE_ROWS if r.persistent} == {"mpi"}
    assert {r.name for r in ENGINE_ROWS if r.needs_gpus} == {"nccl-tests", "torch/nccl"}
    assert engine_row("nccl-tests").rail_variables == ("NCCL_IB_HCA",)
    assert engine_row("torch").rail_variables == ("GLOO_SOCKET_IFNAME",)
    assert "reduce" in engine_row("nccl-tests").ops and "reduce" not in engine_row("mpi").ops
    ctx = PlanContext(spec=SweepSpec(name="x", engine="torch", repeats=1))
    assert "no effect on this engine (torch/gloo" in str(skip_reason("all_reduce", {"NCCL_PROTO": "LL"}, ctx))


def test_pxn_and_gdr_level_values_read_as_nccl_reads_them() -> None:
    from collscope.errors import ConfigError
    from collscope.vocab.nccl import net_gdr_level, pxn_disabled

    assert pxn_disabled("1") and pxn_disabled(" 01 ")  # paths.cc: ncclPxnDisable(comm) != 1 keeps PXN
    assert not any(pxn_disabled(v) for v in (None, "", "0", "2", "yes"))
    assert [net_gdr_level(v) for v in (None, "LOC", "0", "2", "3", "9", "PHB")] == [
        "PXB", "LOC", "LOC", "PXB", "PHB", "SYS", "PHB"]  # levelsOldToNew; larger is SYS
    with pytest.raises(ConfigError, match="'phb' is not a level NCCL reads"):
        net_gdr_level("phb")  # ncclGetLevel matches the names exactly


@pytest.mark.parametrize("name", ["NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL"])
def test_a_level_in_lower_case_is_refused_not_upper_cased(name: str) -> None:
    """ncclGetLevel (src/graph/paths.cc) matches the path names with strcmp: NCCL ignores 'phb', so a sweep that ran
    it upper-cased, or a predict --setting that modelled it as PHB, would describe another job than the one set."""
    from collscope.errors import ConfigError
    from collscope.vocab.knobs import validate_env, validate_setting

    assert validate_setting(name, "PHB") == "PHB" and validate_setting(name, " 2 ") == "2"
    with pytest.raises(ConfigError, match=rf"{name}='phb' is invalid: NCCL matches the level names exactly .* "
                                          r"ignores 'phb' and keeps its default; write PHB"):
        validate_setting(name, "phb")
    with pytest.raises(ConfigError, match="write SYS"):
        validate_env({name: "Sys"})
