"""Capture directories and files handed to `topo show --from`: damaged ones are errors or notes naming the
file, never a traceback, a hang or a silent choice."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from collscope.cli import main
from collscope.errors import ParseError
from collscope.topo.meta import CaptureMeta, read_meta
from collscope.topo.samples import sample_path
from tests.cli_timeout import invoke_with_timeout, one_error_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MATRIX = FIXTURES / "nvidia-smi" / "topo-tab-4gpu-nv18-4nic-legend-gpu-numa-id.txt"
OTHER_MATRIX = FIXTURES / "nvidia-smi" / "topo-tab-2gpu-nv2-no-affinity-no-legend.txt"


def _show(*args: str) -> Result:
    return CliRunner().invoke(main, ["topo", "show", *args])


@pytest.fixture()
def capture_dir(tmp_path: Path) -> Path:
    """A copy of the bundled sample node's capture directory (what `topo collect` writes)."""
    out = tmp_path / "node01"
    shutil.copytree(sample_path(), out)
    return out


def test_meta_json_with_a_wrong_type_names_file_field_and_value(capture_dir: Path) -> None:
    (capture_dir / "meta.json").write_text('{"host": "node01", "errors": 5}\n')
    line = one_error_line(_show("--from", str(capture_dir)))
    assert str(capture_dir / "meta.json") in line
    assert '"errors"' in line and "a list of text" in line and "5" in line


def test_meta_json_host_of_the_wrong_type_is_an_error_too(capture_dir: Path) -> None:
    (capture_dir / "meta.json").write_text('{"host": ["a", "b"]}')
    line = one_error_line(_show("--from", str(capture_dir)))
    assert '"host"' in line and "text" in line and '["a", "b"]' in line


def test_binary_meta_json_names_the_file_and_line(capture_dir: Path) -> None:
    (capture_dir / "meta.json").write_bytes(b'{"host":\n "n\xff\xfe"}\n')
    line = one_error_line(_show("--from", str(capture_dir)))
    assert f"{capture_dir / 'meta.json'}:2:" in line and "not UTF-8" in line


def test_meta_json_that_is_not_an_object_or_not_json(capture_dir: Path) -> None:
    (capture_dir / "meta.json").write_text("[1, 2]")
    assert "a JSON object" in one_error_line(_show("--from", str(capture_dir)))
    (capture_dir / "meta.json").write_text('{"host": "a",\n "errors": [}')
    line = one_error_line(_show("--from", str(capture_dir)))
    assert f"{capture_dir / 'meta.json'}:2:" in line


def test_meta_json_round_trips_and_keeps_hand_written_ones_working(tmp_path: Path) -> None:
    meta = CaptureMeta(host="n1", collscope_version="1", captured_at="t", tools={"ibstat.txt": {"missing": True}},
                       errors=("ibstat not found",), env={"NCCL_DEBUG": "INFO"}, files=("a.txt",))
    (tmp_path / "meta.json").write_text(json.dumps(meta.to_dict()))
    assert read_meta(tmp_path) == meta
    (tmp_path / "meta.json").write_text('{"host": "n2", "sample": true, "note": "a newer writer"}')
    assert read_meta(tmp_path) == CaptureMeta(host="n2")
    (tmp_path / "meta.json").unlink()
    assert read_meta(tmp_path) is None


def test_two_matrix_captures_are_an_error_naming_both(capture_dir: Path) -> None:
    shutil.copy(OTHER_MATRIX, capture_dir / "zz-second-topo.txt")
    line = one_error_line(_show("--from", str(capture_dir)))
    assert str(capture_dir / "nvidia-smi-topo.txt") in line and str(capture_dir / "zz-second-topo.txt") in line
    assert "nvidia-smi-topo" in line


def test_two_matrix_files_given_with_from_are_an_error_too() -> None:
    line = one_error_line(_show("--from", str(MATRIX), "--from", str(OTHER_MATRIX)))
    assert str(MATRIX) in line and str(OTHER_MATRIX) in line


def test_empty_files_and_dangling_symlinks_are_named(capture_dir: Path) -> None:
    (capture_dir / "ibdev2netdev.txt").write_text("")
    (capture_dir / "nvidia-smi-nvlink.txt").unlink()
    (capture_dir / "nvidia-smi-nvlink.txt").symlink_to(capture_dir / "gone.txt")
    os.mkfifo(capture_dir / "pipe.txt")
    result = _show("--from", str(capture_dir))
    assert result.exit_code == 0, result.output
    notes = [ln for ln in result.stderr.splitlines() if ln.startswith("note: ")]
    assert any(str(capture_dir / "ibdev2netdev.txt") in n and "empty" in n for n in notes), notes
    assert any(str(capture_dir / "nvidia-smi-nvlink.txt") in n and "missing target" in n for n in notes), notes
    assert any(str(capture_dir / "pipe.txt") in n and "FIFO" in n for n in notes), notes


def test_fifo_given_with_from_is_refused_without_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "topo.txt"
    os.mkfifo(fifo)
    line = one_error_line(invoke_with_timeout(["topo", "show", "--from", str(fifo)], fifo))
    assert str(fifo) in line and "FIFO" in line


def test_binary_capture_file_names_the_file_and_line(tmp_path: Path) -> None:
    damaged = tmp_path / "topo.txt"
    damaged.write_bytes(MATRIX.read_bytes().replace(b"GPU1", b"GPU\xff", 1))
    line = one_error_line(_show("--from", str(damaged)))
    assert f"{damaged}:" in line and "not UTF-8" in line


def test_topology_json_that_is_binary_is_named(tmp_path: Path) -> None:
    doc = tmp_path / "node.json"
    doc.write_bytes(b'{"graph":\n\xff}')
    result = CliRunner().invoke(main, ["predict", "--topo", str(doc), "--op", "all_reduce", "--nranks", "8",
                                       "--nnodes", "1"])
    assert f"{doc}:2:" in one_error_line(result)


def test_read_meta_raises_parse_error_with_the_field(tmp_path: Path) -> None:
    (tmp_path / "meta.json").write_text('{"env": {"NCCL_DEBUG": 1}}')
    with pytest.raises(ParseError, match=r'"env"'):
        read_meta(tmp_path)



def test_topo_cluster_shows_what_a_node_directory_skipped(tmp_path: Path) -> None:
    for host in ("node01", "node02"):
        shutil.copytree(sample_path(), tmp_path / host)
        (tmp_path / host / "meta.json").write_text(json.dumps({"host": host}))
    (tmp_path / "node02" / "ibdev2netdev.txt").write_text("")
    (tmp_path / "ibnetdiscover.txt").symlink_to(tmp_path / "gone.txt")
    result = CliRunner().invoke(main, ["topo", "cluster", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert f"node02: {tmp_path / 'node02' / 'ibdev2netdev.txt'}: an empty file, skipped" in warnings
    assert any(w.startswith(f"{tmp_path / 'ibnetdiscover.txt'}: a symlink to a missing target") for w in warnings)


def test_directory_whose_every_entry_is_skipped_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ibstat.txt").write_text("\n")
    (tmp_path / "topo.txt").symlink_to(tmp_path / "gone.txt")
    line = one_error_line(_show("--from", str(tmp_path)))
    assert str(tmp_path) in line and "only skipped entries" in line
