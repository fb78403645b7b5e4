"""Records from another input never pool with a sweep's records of the same configuration (issue 26, item 3).

docs/slurm.md section 8 compares a check run with the sweep: `collscope analyze results/ check.jsonl`. The check's
records were merged into the sweep's row of the same configuration, so a regression between the two could not
show. Now each input is part of a configuration's identity, the two are shown side by side, and the noise rule
says whether they differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl

SIZES = [1 << i for i in range(10, 21)]  # 1 KiB .. 1 MiB
HOSTS = ("node1", "node2")
TREE = {"NCCL_ALGO": "Tree"}


def _records(settings: dict[str, str], busbw: float, *, repeats: int = 3, sweep: str | None = "sw-check",
             source: str = "collscope bench --engine mpi") -> list[Measurement]:
    label = "-".join(f"{k}{v}" for k, v in settings.items()) or "default"
    return [Measurement(
        engine="mpi", backend="mpi", op="all_reduce", size_bytes=size, count=size // 4, dtype="float", redop="sum",
        root=None, in_place=False, nranks=4, nnodes=2, time_us=size / (bw * 1e3), algbw_gbps=bw, busbw_gbps=bw * 1.5,
        ok=True, iters=20, warmup=5, repeat=r, settings=dict(settings), hosts=HOSTS, source=source,
        point_id=None if sweep is None else f"all-reduce-{label}-r{r}", sweep_id=sweep)
        for r in range(repeats) for size in SIZES for bw in [busbw * (1 + 0.005 * (r - 1))]]


def _sweep(root: Path) -> Path:
    """A sweep: default at 10 GB/s and Tree at 10.1 GB/s, 3 repeats each, on node1-2."""
    (root / "points").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": "sw-check"}))
    by_point: dict[str, list[Measurement]] = {}
    for rec in [*_records({}, 10.0), *_records(TREE, 10.1)]:
        by_point.setdefault(str(rec.point_id), []).append(rec)
    for point_id, recs in by_point.items():
        write_jsonl(root / "points" / f"{point_id}.jsonl", recs)
    return root


def _check(path: Path, busbw: float, repeats: int = 3) -> Path:
    """A check run of the default, as `collscope bench --out` or `collscope ingest` writes it."""
    write_jsonl(path, _records({}, busbw, repeats=repeats, sweep=None))
    return path


def test_a_check_run_is_a_configuration_of_its_own(tmp_path: Path) -> None:
    sweep, check = _sweep(tmp_path / "results"), _check(tmp_path / "check.jsonl", 8.0)
    frame = load_results([sweep, check])
    assert list(frame["input"].cat.categories) == [str(sweep), str(check)]
    result = analyze(frame)
    assert len(result.configs) == 3  # default of the sweep, Tree of the sweep, default of the check: 2 before
    defaults = result.configs[result.configs["config"] == "default"]
    assert sorted(defaults["input"]) == sorted([str(sweep), str(check)])
    by_input = {row["input"]: row["bw_gbps"] for row in defaults.to_dict(orient="records")}
    assert abs(by_input[str(sweep)] - 10.0) < 0.2 and abs(by_input[str(check)] - 8.0) < 0.2  # never averaged
    assert set(result.sizes.groupby(["config", "input"]).size()) == {len(SIZES)}
    assert max(result.sizes["n"]) == 3  # repeats of one input, never 6 pooled


def test_a_regression_between_sweep_and_check_shows_beyond_noise(tmp_path: Path) -> None:
    sweep, check = _sweep(tmp_path / "results"), _check(tmp_path / "check.jsonl", 8.0)
    result = analyze(load_results([sweep, check]))
    assert [(c.config, c.first, c.second, c.verdict) for c in result.sources] == [
        ("default", str(sweep), str(check), "differ")]
    compared = result.sources[0]
    assert compared.slower_sizes == tuple(SIZES) and compared.faster_sizes == ()
    assert compared.change is not None and abs(compared.change + 0.2) < 0.01
    out = CliRunner().invoke(main, ["analyze", str(sweep), str(check)])
    assert out.exit_code == 0, out.output
    assert "from 2 inputs, kept apart" in out.output
    assert (f"all_reduce default 4r/2n: {check} against {sweep}: differ beyond noise: {check} slower at 1K-1M "
            "(median busbw change -20% over 11 common size(s))") in out.output
    doc = json.loads(CliRunner().invoke(main, ["analyze", str(sweep), str(check), "--json"]).output)
    assert doc["inputs"] == [str(sweep), str(check)] and doc["sources"][0]["verdict"] == "differ"


def test_a_check_within_noise_says_so(tmp_path: Path) -> None:
    sweep, check = _sweep(tmp_path / "results"), _check(tmp_path / "check.jsonl", 10.02)
    (compared,) = analyze(load_results([sweep, check])).sources
    assert compared.verdict == "within noise" and compared.slower_sizes == compared.faster_sizes == ()
    assert "within noise at the 11 size(s) both measured with >= 3 repeats" in compared.detail


def test_a_one_pass_check_claims_nothing(tmp_path: Path) -> None:
    sweep, check = _sweep(tmp_path / "results"), _check(tmp_path / "check.jsonl", 5.0, repeats=1)
    (compared,) = analyze(load_results([sweep, check])).sources
    assert compared.verdict == "noise unknown"
    assert "no difference is claimed" in compared.detail and "-N 3" in compared.detail


def test_another_sweep_directory_is_kept_apart_too(tmp_path: Path) -> None:
    first, second = _sweep(tmp_path / "a"), _sweep(tmp_path / "b")
    result = analyze(load_results([first, second]))
    assert len(result.configs) == 4
    assert {(c.config, c.verdict) for c in result.sources} == {("default", "within noise"),
                                                              ("NCCL_ALGO=Tree", "within noise")}


def test_recommend_never_pools_two_inputs(tmp_path: Path) -> None:
    sweep, check = _sweep(tmp_path / "results"), _check(tmp_path / "check.jsonl", 8.0)
    out = CliRunner().invoke(main, ["recommend", str(sweep), str(check)])
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output
    assert f"all_reduce default 4r: {sweep}, {check}" in out.output and "collscope analyze A B" in out.output
    alone = CliRunner().invoke(main, ["recommend", str(sweep)])
    assert alone.exit_code == 0, alone.output


def test_one_input_analyses_as_before(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path / "results")
    result = analyze(load_results(sweep))
    assert result.sources == () and len(result.configs) == 2
    assert "inputs, kept apart" not in CliRunner().invoke(main, ["analyze", str(sweep)]).output
