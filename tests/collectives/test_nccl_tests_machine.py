"""Records say which machine measured them (GPU model from the device lines) and old-format failures are per size."""

from __future__ import annotations

from pathlib import Path

from collscope.collectives.nccl_tests.parse import parse_nccl_tests

FIXTURES = Path(__file__).parents[1] / "fixtures" / "nccl-tests"


def test_old_error_column_decides_ok_per_size() -> None:
    path = FIXTURES / "all_reduce_perf-old-error-column-oob-failed.txt"
    run = parse_nccl_tests(path.read_text(), source=path.name, op="all_reduce")
    bad = sorted({r.size_bytes for r in run.records if not r.ok})
    assert bad == [1048576, 4194304]  # the two sizes whose error column is 1e+00
    assert sum(r.ok for r in run.records) == 12  # 4e-07 and 6e-08 are rounding, not failures
    assert any("error column is >= 0.01" in w for w in run.warnings)


def test_records_carry_the_gpu_model_of_the_device_lines() -> None:
    path = FIXTURES / "all_reduce_perf-old-error-column-oob-failed.txt"
    run = parse_nccl_tests(path.read_text(), source=path.name, op="all_reduce")
    assert {r.gpu for r in run.records} == {"NVIDIA A100-SXM4-80GB"}
    mixed = path.read_text().replace("device  7 [0xbd] NVIDIA A100-SXM4-80GB", "device  7 [0xbd] NVIDIA A100-PCIE-40GB")
    run2 = parse_nccl_tests(mixed, source="mixed.txt", op="all_reduce")
    assert run2.records[0].gpu == "NVIDIA A100-SXM4-80GB + NVIDIA A100-PCIE-40GB"
    assert any("different GPU models" in w for w in run2.warnings)
