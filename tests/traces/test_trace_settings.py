"""trace models a job under its own NCCL variables, as analyze models a configuration and predict --setting does:
the ``set by environment`` lines of its --nccl-log files, or --setting (which wins); logs that disagree on a
variable leave it at NCCL's default, and say so."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from collscope.analysis.model_settings import merged_settings
from collscope.cli import main
from tests.traces import trace_fixtures as fx

BASE = ["--gpu", "H100", "--nnodes", "2", "--nic-gbit", "400", "--json"]
ONE_NIC = "NCCL_IB_HCA==mlx5_0: the model counts the 1 NIC(s) per node the setting leaves NCCL (1 x 50 GB/s)"


def _sixteen_ranks(root: Path) -> Path:
    traces = root / "traces"
    traces.mkdir()
    for rank in range(16):
        (traces / f"rank{rank}.json").write_text(json.dumps(fx.nccl_kernel_metadata(rank, world=16)))
    return traces


def _log(path: Path, host: str, hca: str) -> Path:
    """The head of one rank's NCCL_DEBUG=INFO log: the version line and an environment line."""
    path.write_text(f"{host}:1001:1001 [0] NCCL INFO NCCL version 2.24.3+cuda12.4\n"
                    f"{host}:1001:1001 [0] NCCL INFO NCCL_IB_HCA set by environment to {hca}\n")
    return path


def _run(*args: str) -> dict:
    result = CliRunner().invoke(main, ["trace", *args, *BASE])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _all_reduce_model(doc: dict) -> float:
    (row,) = [r for r in doc["summary"] if r["op"] == "all_reduce"]
    return float(row["model_busbw_gbps"])


def test_the_jobs_nic_list_from_setting_or_log_narrows_the_model(tmp_path: Path) -> None:
    traces = str(_sixteen_ranks(tmp_path))
    every_nic = _run(traces)
    assert not any("NCCL_IB_HCA" in w for w in every_nic["warnings"])
    given = _run(traces, "--setting", "NCCL_IB_HCA==mlx5_0")
    assert _all_reduce_model(given) < 0.7 * _all_reduce_model(every_nic)
    assert ONE_NIC in given["warnings"]
    logged = _run(traces, "--nccl-log", str(_log(tmp_path / "rank0.log", "gpu-a01", "=mlx5_0")))
    assert _all_reduce_model(logged) == _all_reduce_model(given) and ONE_NIC in logged["warnings"]


def test_logs_that_disagree_leave_the_variable_at_the_default_and_setting_wins(tmp_path: Path) -> None:
    traces = str(_sixteen_ranks(tmp_path))
    logs = [str(_log(tmp_path / "rank0.log", "gpu-a01", "=mlx5_0")),
            str(_log(tmp_path / "rank8.log", "gpu-a02", "=mlx5_0,mlx5_1"))]
    split = _run(traces, "--nccl-log", logs[0], "--nccl-log", logs[1])
    assert _all_reduce_model(split) == _all_reduce_model(_run(traces))
    assert any(w.startswith("the job's logs set NCCL_IB_HCA to different values ('=mlx5_0' in ") and
               "--setting NCCL_IB_HCA=VALUE" in w for w in split["warnings"])
    stated = _run(traces, "--nccl-log", logs[0], "--nccl-log", logs[1], "--setting", "NCCL_IB_HCA==mlx5_0")
    assert ONE_NIC in stated["warnings"] and not any("different values" in w for w in stated["warnings"])


def test_merged_settings_keeps_agreeing_values_and_names_each_disagreement() -> None:
    merged, notes = merged_settings([("a.log", {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}),
                                     ("b.log", {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"})])
    assert merged == {"NCCL_ALGO": "Ring"}
    assert notes == ["the job's logs set NCCL_PROTO to different values ('LL' in a.log; 'Simple' in b.log): the "
                     "model takes NCCL's default for it (--setting NCCL_PROTO=VALUE to state the job's)"]
    assert merged_settings([("a.log", {"NCCL_PROTO": "LL"})], {"NCCL_PROTO": "Simple"}) == (
        {"NCCL_PROTO": "Simple"}, [])
