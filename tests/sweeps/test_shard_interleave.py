"""Shards of a sweep interleave configurations: each shard measures every configuration (issue 26, item 1).

A job array's shards run on different nodes; a shard that held whole configurations turned a comparison of
settings into a comparison of nodes. Shards split the plan by repeat instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ConfigError
from collscope.sweeps.plan import plan_sweep
from collscope.sweeps.presets import preset
from collscope.sweeps.runner import select_shard
from collscope.sweeps.spec import Point


def _configurations(points: tuple[Point, ...]) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(p.op, tuple(sorted(p.settings.items()))) for p in points}


@pytest.mark.parametrize(("name", "repeats", "shards"), [("mpi-algos", 3, 3), ("mpi-algos", 3, 2),
                                                         ("nccl-algo-proto", 4, 4), ("mpi-algos", 5, 3)])
def test_every_shard_measures_every_configuration(name: str, repeats: int, shards: int) -> None:
    plan = plan_sweep(preset(name, repeats=repeats))
    every = _configurations(plan.points)
    assert len(every) > shards  # more configurations than shards: an index modulo N put each on one shard
    parts = [select_shard(plan.points, (k, shards)) for k in range(shards)]
    for k, part in enumerate(parts):
        assert _configurations(part) == every, f"shard {k}/{shards} misses configurations"
        assert {p.repeat % shards for p in part} == {k}
        assert list(part) == [p for p in plan.points if p in part]  # plan order kept inside a shard
    ids = [p.point_id for part in parts for p in part]
    assert sorted(ids) == sorted(p.point_id for p in plan.points)  # every point once, no point twice


def test_more_shards_than_repeats_is_refused_with_the_way_out() -> None:
    plan = plan_sweep(preset("mpi-algos", repeats=3))
    with pytest.raises(ConfigError, match=r"--shard 0/4: .* 3 repeat\(s\); valid: at most 3 shard\(s\) "
                                          r"\(--array=0-2\), or --repeats 4 or more"):
        select_shard(plan.points, (0, 4))
    assert select_shard((), (0, 4)) == ()  # nothing planned: nothing to split, no claim


def test_sweep_run_shard_dry_run_lists_every_configuration(tmp_path: Path) -> None:
    base = ["sweep", "run", "--preset", "mpi-algos", "--launcher", "mpirun", "--nranks", "2", "--dry-run",
            "--out", str(tmp_path / "o")]
    whole = CliRunner().invoke(main, base)
    assert whole.exit_code == 0, whole.output
    labels = {line.split()[2].rsplit("-r", 1)[0] for line in whole.output.splitlines()
              if line.startswith("# point ")}
    assert len(labels) > 3
    for k in range(3):
        shard = CliRunner().invoke(main, [*base, "--shard", f"{k}/3"])
        assert shard.exit_code == 0, shard.output
        points = [line.split()[2] for line in shard.output.splitlines() if line.startswith("# point ")]
        assert {p.rsplit("-r", 1)[0] for p in points} == labels
        assert {p.rsplit("-r", 1)[1].split("-")[0] for p in points} == {str(k)}
    refused = CliRunner().invoke(main, [*base, "--shard", "0/4"])
    assert refused.exit_code == 2 and "--repeats 4 or more" in refused.output
    assert "Traceback" not in refused.output
