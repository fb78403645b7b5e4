"""A comparison of configurations is a comparison of settings only on the same hosts (issue 26, item 1).

Results whose configurations ran on different nodes (the shards of an older sweep each held whole
configurations; a job array puts its shards on different nodes) must say so on every comparison, and recommend
must refuse them, naming the configurations and their hosts.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl

SIZES = [1 << i for i in range(10, 21)]  # 1 KiB .. 1 MiB
TREE = {"NCCL_ALGO": "Tree"}
RING = {"NCCL_ALGO": "Ring"}
FAST = ("node1", "node2")
SLOW = ("node3", "node4")


def _records(settings: dict[str, str], hosts: Iterable[tuple[str, ...]], busbw: float | Callable[[int], float], *,
             repeats: int = 3,
             sweep: str = "sw-hosts") -> list[Measurement]:
    """``repeats`` records per size at ``busbw`` GB/s (+-0.5%), repeat r on ``hosts[r % len(hosts)]``."""
    places = list(hosts)
    label = "-".join(f"{k}{v}" for k, v in settings.items()) or "default"
    out = []
    for r in range(repeats):
        for size in SIZES:
            bw = (busbw(size) if callable(busbw) else busbw) * (1 + 0.005 * (r - 1))
            out.append(Measurement(
                engine="mpi", backend="mpi", op="all_reduce", size_bytes=size, count=size // 4, dtype="float",
                redop="sum", root=None, in_place=False, nranks=4, nnodes=2, time_us=size / (bw * 1e3), algbw_gbps=bw,
                busbw_gbps=bw * 1.5, ok=True, iters=20, warmup=5, repeat=r, settings=dict(settings),
                point_id=f"all-reduce-{label}-r{r}", sweep_id=sweep, hosts=places[r % len(places)],
                source="collscope bench --engine mpi"))
    return out


def _sweep(root: Path, *configs: list[Measurement]) -> Path:
    """A results directory holding ``configs`` (one points file per point id)."""
    (root / "points").mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({"sweep_id": "sw-hosts"}))
    by_point: dict[str, list[Measurement]] = {}
    for rec in (r for c in configs for r in c):
        by_point.setdefault(str(rec.point_id), []).append(rec)
    for point_id, recs in by_point.items():
        write_jsonl(root / "points" / f"{point_id}.jsonl", recs)
    return root


@pytest.fixture
def by_configuration(tmp_path: Path) -> Path:
    """An older sharded sweep: default and Ring on node1-2, Tree on the slow node3-4 (20x slower)."""
    return _sweep(tmp_path / "old shards", _records({}, [FAST], 10.0), _records(RING, [FAST], 10.2),
                  _records(TREE, [SLOW], 0.5))


@pytest.fixture
def interleaved(tmp_path: Path) -> Path:
    """Shards by repeat: every configuration has repeats on both node pairs; Ring really is 30% faster."""
    return _sweep(tmp_path / "interleaved", _records({}, [FAST, SLOW, FAST], 10.0),
                  _records(RING, [FAST, SLOW, FAST], 13.0), _records(TREE, [FAST, SLOW, FAST], 10.1))


def test_analyze_says_a_comparison_across_hosts_is_a_node_difference(by_configuration: Path) -> None:
    result = analyze(load_results(by_configuration))
    sentences = [h.sentence() for h in result.host_differences]
    assert sentences == ["NCCL_ALGO=Tree measured on node3,node4, default on node1,node2: a node difference, "
                         "not a setting difference"]
    doc = json.loads(result.to_json())
    assert [(h["config"], h["hosts"], h["baseline"], h["baseline_hosts"]) for h in doc["host_differences"]] == [
        ("NCCL_ALGO=Tree", ["node3", "node4"], "default", ["node1", "node2"])]
    text = CliRunner().invoke(main, ["analyze", str(by_configuration)])
    assert text.exit_code == 0, text.output
    assert "node difference, not a setting difference" in text.output
    assert "all_reduce 4r/2n: NCCL_ALGO=Tree measured on node3,node4, default on node1,node2" in text.output


def test_a_crossover_between_configurations_on_different_hosts_says_so(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", _records({}, [FAST], 10.0),
                  _records(TREE, [SLOW], lambda size: 5.0 if size < 64 * 1024 else 14.0))
    result = analyze(load_results(root))
    assert len(result.crossovers) == 1
    crossover = result.crossovers[0]
    assert crossover.to_config == "NCCL_ALGO=Tree" and crossover.hosts_differ is not None
    assert "measured on node3,node4, default on node1,node2" in crossover.hosts_differ
    text = CliRunner().invoke(main, ["analyze", str(root)]).output
    assert "not a setting comparison: NCCL_ALGO=Tree measured on node3,node4" in text


def test_recommend_refuses_a_node_difference_naming_configurations_and_hosts(by_configuration: Path) -> None:
    result = CliRunner().invoke(main, ["recommend", str(by_configuration)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert "NCCL_ALGO=Tree measured on node3,node4, default on node1,node2" in result.output
    assert "NCCL_ALGO=Ring" not in result.output  # Ring ran on the default's hosts: not named
    assert "export" not in result.output


def test_interleaved_shards_compare_settings(interleaved: Path) -> None:
    result = analyze(load_results(interleaved))
    assert result.host_differences == ()
    assert all(c.hosts_differ is None for c in result.crossovers)
    rec = CliRunner().invoke(main, ["recommend", str(interleaved)])
    assert rec.exit_code == 0, rec.output
    assert "NCCL_ALGO=Ring" in rec.output


def test_records_without_hosts_are_neither_same_nor_different(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", _records({}, [()], 10.0), _records(TREE, [SLOW], 10.0))
    assert analyze(load_results(root)).host_differences == ()


@pytest.mark.parametrize(("bincount_limit", "key_limit"), [(1 << 22, 2**62), (1, 2**62), (1, 2)],
                         ids=["bincount", "sorted", "groupby"])
def test_hosts_per_configuration_follow_the_records_one_by_one(bincount_limit: int, key_limit: int,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from collscope.analysis import placement

    monkeypatch.setattr(placement, "_BINCOUNT_LIMIT", bincount_limit)
    monkeypatch.setattr(placement, "_KEY_LIMIT", key_limit)
    cat = pd.Categorical
    frame = pd.DataFrame({
        "backend": cat(["mpi"] * 7), "op": cat(["all_reduce"] * 6 + ["all_gather"]),
        "nranks": [4, 4, 4, 4, 4, 4, 4], "nnodes": pd.array([2, 2, 2, 2, None, 2, 2], dtype="Int64"),
        "in_place": [False] * 7, "input": cat(["a"] * 7),
        "config": cat(["default", "default", "T", "T", "T", "R", "default"]),
        "hosts": cat(["n1,n2", "n3,n4", "n1,n2", "n1,n2", "n9", None, "n5"]),
    })
    found = placement.config_hosts(frame)
    assert found.hosts == {
        ("mpi", "all_reduce", 4, 2, False, "a"): {"default": frozenset({"n1", "n2", "n3", "n4"}),
                                                  "T": frozenset({"n1", "n2"})},
        ("mpi", "all_reduce", 4, None, False, "a"): {"T": frozenset({"n9"})},
        ("mpi", "all_gather", 4, 2, False, "a"): {"default": frozenset({"n5"})}}
    assert found.records[(("mpi", "all_reduce", 4, 2, False, "a"), "T")] == 2
    (mismatch,) = placement.host_mismatches(frame, found=found)
    assert mismatch.sentence() == ("T measured on n1,n2, default on n1,n2,n3,n4: a node difference, not a "
                                   "setting difference")


def test_the_report_says_a_comparison_across_hosts_is_a_node_difference(by_configuration: Path,
                                                                           tmp_path: Path) -> None:
    """The HTML report compares configurations too (curves, heatmap against the default): it carries the same
    warning as analyze, above the recommendation it does not give."""
    from collscope.analysis.report import write_report

    index = write_report([by_configuration], tmp_path / "report")
    page, md = index.read_text(), (tmp_path / "report" / "report.md").read_text()
    for text in (page, md.replace("\\_", "_")):
        assert "a node difference, not a setting difference" in text
        assert "node3,node4" in text
    assert page.index("a node difference") < page.index("<h2>Recommendation</h2>")
