"""Records of different machines never pool as repeats of one configuration (issue 11, finding 4)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from collscope.analysis import machines as machines_module
from collscope.analysis.load import load_results
from collscope.analysis.machines import machine_labels, machine_of
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
    assert len(frame) == 2 * len(load_results([RUN]))
    assert not any("machines" in note for note in frame.attrs["notes"])


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


def _labels_row_by_row(frame: pd.DataFrame) -> list[str]:
    """The rule, one record at a time: a sweep's records name the union of its hosts."""
    rows = [tuple(None if pd.isna(v) else v for v in row)
            for row in frame[["cluster", "hosts", "gpu", "nccl_version", "sweep_id"]].itertuples(index=False)]
    union: dict[str, set[str]] = {}
    for _, hosts, _, _, sweep in rows:
        if sweep is not None and hosts:
            union.setdefault(sweep, set()).update(hosts.split(","))
    return [machine_of(cluster, ",".join(sorted(union[sweep])) if sweep in union else hosts, gpu, version)
            for cluster, hosts, gpu, version, sweep in rows]


@pytest.mark.parametrize("key_limit", [2**62, 5], ids=["one key", "renumbered"])
def test_machine_labels_follow_the_rule_of_each_record(key_limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machines_module, "_KEY_LIMIT", key_limit)  # 5: the combined key is renumbered on the way
    cat = pd.Categorical
    frame = pd.DataFrame({
        "cluster": cat([None, None, None, "eos", "eos", None, None, None]),
        "hosts": cat(["n2", "n1", "n1,n3", "a1", "a2", None, "n9", None]),
        "gpu": cat(["H100", "H100", "H100", "H200", "H200", "H100", None, None]),
        "nccl_version": cat(["2.27.5", "2.27.5", "2.27.5", "2.28.3", "2.28.3", None, "2.27.5", None]),
        "sweep_id": cat(["s1", "s1", "s1", "s2", "s2", "s3", None, None]),
    })
    labels = machine_labels(frame)
    assert list(labels) == _labels_row_by_row(frame)
    assert list(labels)[:3] == ["hosts n1,n2,n3, H100, NCCL 2.27.5"] * 3  # one sweep: the union of its nodes
    assert list(labels)[3] == "cluster eos, H200, NCCL 2.28.3" and list(labels)[7] == "unnamed hosts"
    assert list(labels.categories) == list(dict.fromkeys(labels))  # named in the records' order
