"""The results layer: typed status of a results directory, the public API, and who may import it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import collscope.results as results_api
from collscope.collectives.record import Measurement
from collscope.errors import ParseError
from collscope.results import ResultsDir, SweepStatus, decode_records, read_jsonl
from collscope.sweeps.meta import SweepMeta
from collscope.sweeps.runner import SettingsCheck
from collscope.topo import capture

REPO = Path(__file__).resolve().parents[2]


def _rec(size: int) -> Measurement:
    return Measurement.from_timing(op="all_reduce", size_bytes=size, nranks=2, time_us=3.0, engine="mpi",
                                   backend="mpi", count=size // 4, dtype="float32", redop="sum", root=None,
                                   in_place=False, nnodes=1)


def test_status_is_a_typed_record_with_todays_json(tmp_path: Path) -> None:
    results = ResultsDir(tmp_path / "out dir")
    plan = {"points": [{"point_id": p} for p in ("a", "b", "c", "d")], "skipped": [{"op": "x"}]}
    results.prepare("sweep-1", {"name": "s"}, plan, {})
    results.finish_point("a", [_rec(8), _rec(64)])
    results.record_failure("b", "timeout", "timeout after 5 s")
    results.finish_point("c", [_rec(8)])
    results.record_failure("c", "wrong values", "wrong values at 1 size(s): 8")
    status = results.status()
    assert isinstance(status, SweepStatus)
    assert (status.points, status.done, status.failed, status.pending, status.skipped) == (4, 1, 2, 1, 1)
    assert status.failure_reasons == {"timeout": 1, "wrong values": 1}
    assert [f.point_id for f in status.failures] == ["b", "c"]
    doc = status.to_dict()
    assert list(doc) == ["sweep_id", "points", "done", "failed", "pending", "damaged", "skipped", "failure_reasons",
                         "failures", "damaged_points", "unreadable", "unreadable_points"]
    assert doc["failures"][0] == {"point_id": "b", "reason": "timeout", "detail": "timeout after 5 s"}
    assert json.loads(json.dumps(doc)) == doc
    assert results.read_point("a") == [_rec(8), _rec(64)]


def test_decode_records_names_the_source(tmp_path: Path) -> None:
    good = json.dumps(_rec(8).to_dict()).encode()
    assert decode_records(good + b"\n" + good + b"\n", "mem") == [_rec(8), _rec(8)]
    with pytest.raises(ParseError, match=r"^mem:2: .*ok"):
        decode_records(good + b"\n" + good.replace(b'"ok": true', b'"ok": "true"') + b"\n", "mem")
    with pytest.raises(ParseError, match="ends mid-line"):
        decode_records(good, "mem")
    assert read_jsonl(_write(tmp_path / "e.jsonl", b"")) == []


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_settings_check_json_variants() -> None:
    assert SettingsCheck(applied=None, note="why").to_dict() == {"applied": None, "effects": {}, "note": "why"}
    effects = {"NCCL_ALGO": {"forced": "Tree", "used": ["Ring"], "applied": False, "outside": []}}
    assert SettingsCheck(applied=False, effects=effects, unchecked=("NCCL_PROTO",)).to_dict() == {
        "applied": False, "effects": effects, "unchecked": ["NCCL_PROTO"]}


def test_sweep_meta_and_capture_meta_json() -> None:
    meta = SweepMeta(versions={"collscope": "1"}, hosts=("n1", "n2"), slurm_job_id="7", topology_hash=None)
    assert meta.to_dict() == {"versions": {"collscope": "1"}, "hosts": ["n1", "n2"], "slurm_job_id": "7",
                              "topology_hash": None}


def test_collect_to_dir_returns_what_meta_json_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw_meta = {"host": "node 1", "collscope_version": "0", "captured_at": "t", "tools": {"ibstat.txt": {}},
                "errors": ["ibstat not found"], "env": {"NCCL_DEBUG": "INFO"}}
    monkeypatch.setattr(capture, "capture_raw", lambda timeout_s: ({"b.txt": "B", "a.txt": "A"}, dict(raw_meta)))
    saved = capture.collect_to_dir(tmp_path / "cap", 1.0)
    assert isinstance(saved, capture.CaptureMeta) and saved.files == ("a.txt", "b.txt")
    assert json.loads((tmp_path / "cap" / "meta.json").read_text()) == {**raw_meta, "files": ["a.txt", "b.txt"]}
    assert saved.to_dict() == {**raw_meta, "files": ["a.txt", "b.txt"]}


def test_public_api_is_named() -> None:
    assert set(results_api.__all__) >= {"ResultsDir", "SweepStatus", "read_jsonl", "decode_records"}
    for name in results_api.__all__:
        assert getattr(results_api, name) is not None


def _imports(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (REPO / "collscope" / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        found[str(path.relative_to(REPO))] = names
    return found


@pytest.mark.parametrize("package, forbidden", [
    ("collectives", "collscope.results"), ("results", "collscope.sweeps"), ("results", "collscope.analysis"),
    ("results", "collscope.cli"), ("analysis", "collscope.sweeps"), ("results", "click"),
])
def test_layers_point_down(package: str, forbidden: str) -> None:
    bad = {f: sorted(m for m in mods if m == forbidden or m.startswith(forbidden + "."))
           for f, mods in _imports(package).items()}
    assert not {f: m for f, m in bad.items() if m}
