"""load_results through the Parquet cache of a results directory's points: the same frame, kept up to date.

The cache only saves decoding: every test compares the frame read through it with the frame decoded from the JSONL
point files alone (the source of truth), after the directory changed in each way a sweep or a user changes it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from collscope.analysis import load as load_module
from collscope.analysis import points_cache
from collscope.analysis.load import load_results
from collscope.results.points import DamagedPointsError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "mpi-algos-2rank"
CACHE = Path(points_cache.CACHE_DIR) / points_cache.CACHE_FILE


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A real 2-rank Open MPI sweep's results directory, cached whatever its size."""
    root = tmp_path / "results"
    shutil.copytree(EXAMPLE, root)
    monkeypatch.setattr(load_module, "CACHE_MIN_RECORDS", 0)
    return root


def _from_jsonl(root: Path, monkeypatch: pytest.MonkeyPatch) -> pd.DataFrame:
    """The frame decoded from the point files alone: no cache read, none written."""
    with monkeypatch.context() as m:
        m.setattr(load_module, "read_cache", lambda _root: None)
        m.setattr(load_module, "CACHE_MIN_RECORDS", 10**12)
        return load_results(root)


def _same(cached: pd.DataFrame, decoded: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(cached, decoded)
    for key in ("failures", "node_tests"):
        assert cached.attrs[key] == decoded.attrs[key]
    assert repr(cached.attrs["geometry"]) == repr(decoded.attrs["geometry"])


def _note(frame: pd.DataFrame) -> str:
    return next(iter(frame.attrs["points_cache"].values()))


def _point_files(root: Path) -> list[Path]:
    return sorted((root / "points").glob("*.jsonl"))


def test_second_load_reads_the_cache_and_gives_the_same_frame(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_results(results)
    assert (results / CACHE).is_file()
    assert "cache written" in _note(first)
    second = load_results(results)
    assert _note(second) == f"{len(_point_files(results))} point files from the cache"
    _same(second, _from_jsonl(results, monkeypatch))
    _same(first, second)


def test_a_rewritten_point_file_is_decoded_again(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_results(results)
    target = _point_files(results)[3]
    lines = target.read_text().splitlines()
    doc = json.loads(lines[0])
    doc["busbw_gbps"] = 12345.5
    target.write_text("\n".join([json.dumps(doc), *lines[1:]]) + "\n")
    os.utime(target, ns=(1, 1))  # whatever its time: the size or the time changed, and so did the inode's
    frame = load_results(results)
    assert "1 decoded" in _note(frame)
    assert (frame["busbw_gbps"] == 12345.5).sum() == 1
    _same(frame, _from_jsonl(results, monkeypatch))
    assert "from the cache" in _note(load_results(results))


def test_new_and_vanished_points_follow_the_directory(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_results(results)
    files = _point_files(results)
    removed = files[0]
    removed.rename(results / "removed.jsonl.bak")
    frame = load_results(results)
    assert removed.stem not in set(frame["point_id"].astype(str))
    _same(frame, _from_jsonl(results, monkeypatch))
    (results / "removed.jsonl.bak").rename(removed)
    frame = load_results(results)
    assert removed.stem in set(frame["point_id"].astype(str))
    _same(frame, _from_jsonl(results, monkeypatch))


def test_a_point_damaged_after_caching_still_stops_the_load(results: Path) -> None:
    load_results(results)
    target = _point_files(results)[2]
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])  # cut mid-line, as a killed writer leaves it
    with pytest.raises(DamagedPointsError) as info:
        load_results(results)
    assert target.name in str(info.value)


def test_a_point_replaced_by_a_link_is_refused_as_without_cache(results: Path, tmp_path: Path) -> None:
    load_results(results)
    target = _point_files(results)[1]
    outside = tmp_path / "elsewhere.jsonl"
    shutil.copy(target, outside)
    target.unlink()
    target.symlink_to(outside)
    with pytest.raises(DamagedPointsError):
        load_results(results)


def test_a_changed_check_verdict_is_read_again(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = _point_files(results)[5]
    check = target.with_name(target.stem + ".check.json")
    check.write_text(json.dumps({"applied": True, "effects": {}}))
    first = load_results(results)
    assert first.loc[first["point_id"] == target.stem, "applied"].eq(True).all()
    check.write_text(json.dumps({"applied": False, "effects": {}, "note": "rewritten"}))
    frame = load_results(results)
    assert frame.loc[frame["point_id"] == target.stem, "applied"].eq(False).all()
    _same(frame, _from_jsonl(results, monkeypatch))


@pytest.mark.parametrize("damage", ["garbage", "empty", "other_version"])
def test_a_cache_that_cannot_be_trusted_is_rebuilt(results: Path, monkeypatch: pytest.MonkeyPatch,
                                                   damage: str) -> None:
    load_results(results)
    path = results / CACHE
    if damage == "garbage":
        path.write_bytes(b"PAR1 this is not a parquet file PAR1")
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        monkeypatch.setattr(points_cache, "_VERSION", "0:older")
    frame = load_results(results)
    assert "0 point files from the cache" in _note(frame) and "cache written" in _note(frame)
    _same(frame, _from_jsonl(results, monkeypatch))


def test_a_cache_that_cannot_be_written_is_said_and_the_load_works(results: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (results / points_cache.CACHE_DIR).write_text("a file where the cache directory would be")
    frame = load_results(results)
    assert "not a directory" in _note(frame)
    _same(frame, _from_jsonl(results, monkeypatch))


def test_a_changed_plan_reuses_nothing(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_results(results)
    sweep = results / "sweep.json"
    sweep.write_text(sweep.read_text() + "\n")
    frame = load_results(results)
    assert "0 point files from the cache" in _note(frame)
    _same(frame, _from_jsonl(results, monkeypatch))


def test_small_directories_get_no_cache(tmp_path: Path) -> None:
    root = tmp_path / "results"
    shutil.copytree(EXAMPLE, root)
    load_results(root)  # a few hundred records: decoding them costs less than a cache file
    assert not (root / points_cache.CACHE_DIR).exists()


def test_a_mixed_load_pools_cached_and_decoded_inputs(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_results(results)
    jsonl = _point_files(results)[0]
    both = load_results([jsonl, results])
    with monkeypatch.context() as m:
        m.setattr(load_module, "read_cache", lambda _root: None)
        m.setattr(load_module, "CACHE_MIN_RECORDS", 10**12)
        reference = load_results([jsonl, results])
    _same(both, reference)
