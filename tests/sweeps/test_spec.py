"""SweepSpec as a typed config: shared measurement fields with BenchSpec, validation on construction and on
override, msgspec decoding of YAML and JSON spec files, and ids that the restructuring left unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from collscope.collectives.measure import MeasureSpec
from collscope.collectives.spec import BenchSpec
from collscope.errors import ConfigError
from collscope.sweeps.plan import PRESETS, plan_sweep, preset
from collscope.sweeps.spec import SPEC_KEYS, SweepSpec
from collscope.sweeps.specfile import decode_spec, load_spec, spec_from_dict

AR = "OMPI_MCA_coll_tuned_allreduce_algorithm"


# ---- one definition of the measurement fields -----------------------------------------------------------------
def test_measurement_fields_are_defined_once_and_shared() -> None:
    shared = {f.name: f for f in dataclasses.fields(MeasureSpec)}
    assert set(shared) == {"min_bytes", "max_bytes", "factor", "iters", "warmup", "dtype", "check"}
    for cls in (BenchSpec, SweepSpec):
        assert issubclass(cls, MeasureSpec)
        own = {f.name: f for f in dataclasses.fields(cls)}
        for name, f in shared.items():
            assert (own[name].default, own[name].type) == (f.default, f.type), (cls, name)
        assert cls.check_measure is MeasureSpec.check_measure


@pytest.mark.parametrize(("kw", "match"), [
    ({"min_bytes": 0}, "0 < min_bytes <= max_bytes"), ({"min_bytes": 16, "max_bytes": 8}, "min_bytes=16"),
    ({"factor": 1.0}, "factor must be > 1"), ({"iters": 0}, "iters must be >= 1"),
    ({"warmup": -1}, "warmup must be >= 0"), ({"dtype": "half"}, "unknown dtype 'half'; valid: float32"),
])
def test_one_rule_per_measurement_field_in_both_specs(kw: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        BenchSpec(op="all_reduce", **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=match):
        SweepSpec(name="x", **kw)  # type: ignore[arg-type]


def test_spec_keys_are_the_fields() -> None:
    assert set(SPEC_KEYS) == {f.name for f in dataclasses.fields(SweepSpec)}
    assert list(SweepSpec(name="x").to_dict()) == list(SPEC_KEYS)


# ---- validated on construction and on override ----------------------------------------------------------------
def test_spec_is_frozen_slotted_and_keyword_only() -> None:
    spec = SweepSpec(name="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.nranks = 4  # type: ignore[misc]
    assert not hasattr(spec, "__dict__")
    with pytest.raises(TypeError):
        SweepSpec("x")  # type: ignore[misc]


def test_construction_normalises_knob_values() -> None:
    a = SweepSpec(name="x", grid={AR: ["ring", "4", None]}, fixed_env={"NCCL_DEBUG": "info"},  # type: ignore[dict-item]
                  variants=({"NCCL_MIN_CTAS": 8, "NCCL_MAX_CTAS": "default"},))  # type: ignore[dict-item]
    assert a.grid == {AR: ("4", "")} and a.fixed_env == {"NCCL_DEBUG": "INFO"}
    assert a.variants == ({"NCCL_MIN_CTAS": "8"},)
    assert a == SweepSpec(name="x", grid={AR: ("4", "")}, fixed_env={"NCCL_DEBUG": "INFO"},
                          variants=({"NCCL_MIN_CTAS": "8"},))


def test_override_with_replace_validates_again() -> None:
    # What `collscope sweep run` does with its options: dataclasses.replace runs __post_init__.
    spec = preset("demo")
    assert dataclasses.replace(spec, nranks=4, max_bytes=1 << 20).nranks == 4
    with pytest.raises(ConfigError, match="nranks must be an integer >= 1, got 0"):
        dataclasses.replace(spec, nranks=0)
    with pytest.raises(ConfigError, match="min_bytes <= max_bytes"):
        dataclasses.replace(spec, max_bytes=4)
    with pytest.raises(ConfigError, match="engine 'slurm' is unknown; valid: mpi, torch, nccl-tests"):
        dataclasses.replace(spec, engine="slurm")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="backend 'mpi' is unknown; valid: gloo, nccl"):
        dataclasses.replace(spec, backend="mpi")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="nnodes <= nranks"):
        dataclasses.replace(spec, nnodes=4)


def test_ops_must_be_a_list_of_known_ops() -> None:
    with pytest.raises(ConfigError, match="ops must be a non-empty list"):
        SweepSpec(name="x", ops="all_reduce")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="ops lists an op twice"):
        SweepSpec(name="x", ops=("all_reduce", "all_reduce"))
    with pytest.raises(ConfigError, match="unknown op 'sendrecv'; valid: all_reduce, .*, reduce$"):
        SweepSpec(name="x", ops=("sendrecv",))


# ---- spec files ------------------------------------------------------------------------------------------------
YAML = """
name: ar
engine: nccl-tests
ops: [all_reduce, all_gather]
min_bytes: 1K
max_bytes: 1M
nranks: 8
grid: {NCCL_ALGO: [default, ring], NCCL_PROTO: simple}
per_op_grid: {all_gather: {NCCL_MAX_CTAS: 8}}
fixed_env: {NCCL_DEBUG: info}
"""


def test_json_and_yaml_files_give_the_same_spec(tmp_path: Path) -> None:
    y = tmp_path / "s.yaml"
    y.write_text(YAML)
    j = tmp_path / "s.json"
    j.write_text(json.dumps({"name": "ar", "engine": "nccl-tests", "ops": ["all_reduce", "all_gather"],
                             "min_bytes": "1K", "max_bytes": 1 << 20, "nranks": 8,
                             "grid": {"NCCL_ALGO": ["default", "ring"], "NCCL_PROTO": "simple"},
                             "per_op_grid": {"all_gather": {"NCCL_MAX_CTAS": 8}},
                             "fixed_env": {"NCCL_DEBUG": "info"}}))
    assert load_spec(y) == load_spec(j)
    assert load_spec(j).grid == {"NCCL_ALGO": ("", "Ring"), "NCCL_PROTO": ("Simple",)}


def test_spec_round_trips_through_its_dict() -> None:
    for name in PRESETS:
        spec = preset(name)
        assert spec_from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


@pytest.mark.parametrize(("text", "match"), [
    ('{"nranks": 2, "bogus": 1}', r"s\.json: unknown key 'bogus'; valid keys: name, engine.*collnet_plugin$"),
    ('{"nrank": 2}', r"s\.json: unknown key 'nrank'; valid keys: .*; did you mean 'nranks'\?$"),
    ('{"nranks": "2"}', r"s\.json: nranks: expected an integer, got '2'"),
    ('{"nranks": 2,\n "ops": [1}', r"s\.json: not valid JSON: line 2"),
    ('[1, 2]', r"s\.json: expected a mapping of spec keys, got list"),
])
def test_json_errors_name_the_file_and_the_field(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "s.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_spec(path)


@pytest.mark.parametrize(("text", "match"), [
    ("ops: [all_reduce, 3]\n", r"ops\[1\]: expected text, got 3"),
    ("variants: [1]\n", r"variants\[0\]: expected a mapping, got 1"),
    ("per_op_grid: {all_reduce: [1]}\n", r"per_op_grid\.all_reduce: expected a mapping of knob -> values"),
    ("factor: fast\n", "factor: expected a number, got 'fast'"),
    ("min_bytes: [1]\n", r"min_bytes: expected a size such as 8, '1K' or '1M', got \[1\]"),
    ("min_bytes: 0\n", "0 < min_bytes"),
    ("1: 2\n", "every key must be text"),
    ("dtype: half\n", "unknown dtype 'half'; valid: float32, float64"),
    ("name: null\n", "name: expected text, got None"),
])
def test_yaml_errors_name_the_field_and_what_was_expected(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as exc:
        decode_spec(text, source="my spec.yaml")
    assert str(exc.value).startswith("my spec.yaml: ")


# ---- ids did not move ------------------------------------------------------------------------------------------
# Sweep ids and the last point id of every preset with 1 repeat, as computed before SweepSpec became a validated,
# msgspec-loaded config: an existing results directory must resume under the same ids. Since sweeps default to 3
# repeats (issue 11), `--repeats 1` reproduces these ids, and a 3-repeat plan keeps every 1-repeat point id (its
# repeat-0 points are already measured in an old directory). The NCCL presets' ids moved once, on purpose, when
# their timed runs went from NCCL_DEBUG=INFO to WARN (issue 11: INFO logs every call inside the timed loop of
# NCCL >= 2.24): results timed at INFO are not resumed into.
IDS = {
    "mpi-algos": ("mpi-algos-f3ade00fe2", "all-gather-allgalgo4-usedynarule1-r0-4689ca016304", 9),
    "nccl-algo-proto": ("nccl-algo-proto-8c9f8ef736", "reduce-scatter-algonvls-protsimple-r0-9d25a6025e25", 34),
    "nccl-pxn-rails": ("nccl-pxn-rails-a98c4c3d68",
                       "all-gather-crosnic1-pxndisa1-testsplimask0x7-r0-2fbacd16e613", 18),
    "nccl-channels": ("nccl-channels-ca4f17fb18", "all-gather-maxncha32-minncha32-r0-373d56797f05", 18),
    "demo": ("demo-d17e351fd4", "all-reduce-allralgo4-usedynarule1-r0-d2afeff08285", 3),
}


@pytest.mark.parametrize("name", sorted(IDS))
def test_preset_ids_are_unchanged(name: str) -> None:
    p = plan_sweep(preset(name, repeats=1), env={})
    assert (p.sweep_id, p.points[-1].point_id, len(p.points)) == IDS[name]
    three = plan_sweep(preset(name), env={})
    assert len(three.points) == 3 * len(p.points)
    assert {pt.point_id for pt in p.points} <= {pt.point_id for pt in three.points}


def test_sweeps_default_to_three_repeats():
    """The analysis claims no difference on fewer than 3 repeats (collscope.analysis.noise), so sweeps take 3."""
    assert SweepSpec(name="x").repeats == 3
    assert {name: preset(name).repeats for name in PRESETS} == {name: 3 for name in PRESETS}
    assert spec_from_dict({"name": "y"}).repeats == 3
    assert SweepSpec(name="x", repeats=1).repeats == 1  # still the user's to lower
