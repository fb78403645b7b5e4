"""Records of different machines never pool as repeats of one configuration (issue 11, finding 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.load import load_results
from collscope.cli import main
from collscope.errors import ConfigError

RUN = Path(__file__).parents[1] / "fixtures" / "nccl-tests" / "all_reduce_perf-v2.19.6-1x2-8to64B-nccl-info-ring.txt"


def _other_cluster(tmp_path: Path, name: str = "other.txt", gpu: str = "NVIDIA H100 80GB HBM3") -> Path:
    text = RUN.read_text().replace("gpu-a01", "h200-b17").replace("NVIDIA H100 80GB HBM3", gpu)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_two_clusters_measuring_the_same_configuration_are_refused(tmp_path: Path) -> None:
    other = _other_cluster(tmp_path, gpu="NVIDIA H200")
    with pytest.raises(ConfigError, match="2 different machines") as info:
        load_results([RUN, other])
    message = str(info.value)
    assert "hosts gpu-a01, NVIDIA H100 80GB HBM3" in message and "hosts h200-b17, NVIDIA H200" in message
    result = CliRunner().invoke(main, ["analyze", str(RUN), str(other)])
    assert result.exit_code == 2 and "never pools them" in result.output and "Traceback" not in result.output


def test_one_machine_in_two_files_still_pools(tmp_path: Path) -> None:
    copy = tmp_path / "again.txt"
    copy.write_text(RUN.read_text())
    frame = load_results([RUN, copy])
    assert len(frame) == 2 * len(load_results([RUN])) and "notes" not in frame.attrs


def test_records_carry_gpu_and_the_machine_is_said_when_kept_apart(tmp_path: Path) -> None:
    other = _other_cluster(tmp_path).read_text().replace("all_reduce_perf", "all_gather_perf")
    path = tmp_path / "gather.txt"
    path.write_text(other)
    frame = load_results([RUN, path], op=None)
    assert set(frame["gpu"]) == {"NVIDIA H100 80GB HBM3"}
    assert "kept apart" in frame.attrs["notes"][0]


def test_analyze_says_when_machines_were_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "gather.txt"
    path.write_text(_other_cluster(tmp_path).read_text().replace("all_reduce_perf", "all_gather_perf"))
    result = CliRunner().invoke(main, ["analyze", str(RUN), str(path)])
    assert result.exit_code == 0, result.output
    assert "records from 2 machines, kept apart" in result.output
