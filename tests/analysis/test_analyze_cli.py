"""``collscope analyze`` in process: text, --json, --csv, link parameters, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner
from conftest import FIXTURES, SIZES, Planted

from collscope.cli import main


def _run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(main, ["analyze", *args])


def test_text_summary_of_a_real_sweep(mpi_results: Path) -> None:
    result = _run(str(mpi_results))
    assert result.exit_code == 0, result.output
    out = result.output
    for heading in ("records, 9 configuration(s)", "Fits:", "alpha us", "n1/2", "Crossovers", "Anomalies",
                    "efficiency not computed"):
        assert heading in out
    assert "OMPI_MCA_coll_tuned_allreduce_algorithm=4" in out and "Traceback" not in out


def test_json_of_planted_results_exits_1_on_failures(planted: Planted) -> None:
    result = _run(str(planted.root), "--json")
    assert result.exit_code == 1  # wrong values, a setting not applied, a failed point
    doc = json.loads(result.stdout)
    kinds = {a["kind"] for a in doc["anomalies"]}
    assert kinds == {"dip", "non_monotone", "spread", "wrong_values", "not_applied", "failure"}
    assert len(doc["sizes"]) == 4 * len(SIZES) and len(doc["configs"]) == 4


def test_csv_rows_with_efficiency(planted: Planted) -> None:
    result = _run(str(planted.root), "--csv", "--alpha-us", "2", "--bw-gbps", "150")
    frame = pd.read_csv(io.StringIO(result.stdout))
    assert len(frame) == 4 * len(SIZES)
    assert {"config", "size_bytes", "busbw_gbps", "efficiency", "model_busbw_gbps", "spread_range"} <= set(frame)
    assert frame.loc[frame["n"] > 0, "efficiency"].notna().all()
    assert set(frame["config"]) >= {planted.ll}  # ';' inside a value survives the CSV


def test_gpu_gives_link_parameters() -> None:
    one_node = FIXTURES / "nccl-tests" / "all_reduce_perf-pre2.13-error-column-no-root.txt"
    result = _run(str(one_node), "--gpu", "H100", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["params"]["4x1"]["gpu"] == "H100"
    assert all(r["efficiency"] is not None and r["efficiency"] > 0 for r in doc["sizes"])
    # two nodes without NIC captures: no efficiency, a note saying what to pass; out-of-bounds values exit 1
    two_nodes = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-oob-failed.txt"
    result = _run(str(two_nodes), "--gpu", "H100", "--json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and not doc["params"] and any("NIC" in n for n in doc["notes"])


def test_the_gpu_the_rank_lines_name_gives_link_parameters_with_a_note() -> None:
    b300 = Path(__file__).resolve().parent / "fixtures" / "all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt"
    result = _run(str(b300), "--nic-gbit", "800", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["params"]["32x4"]["gpu"] == "B300"
    assert all(r["efficiency"] is not None and r["efficiency"] > 0 for r in doc["sizes"])
    named = [n for n in doc["notes"] if n.startswith("GPU NVIDIA B300 SXM6 AC for 32 ranks on 4 node(s)")]
    assert len(named) == 1 and "named by the records" in named[0] and "--gpu NAME overrides" in named[0]
    # --gpu wins, and then nothing is said of the records' GPU
    doc = json.loads(_run(str(b300), "--nic-gbit", "800", "--gpu", "B200", "--json").stdout)
    assert doc["params"]["32x4"]["gpu"] == "B200" and not [n for n in doc["notes"] if "named by" in n]
    # a GPU the table knows but does not model: no efficiency, and the reason
    mi300x = FIXTURES / "nccl-tests" / "published" / "all_reduce_perf-rccl-tests-version-header-1x8-mi300x.txt"
    doc = json.loads(_run(str(mi300x), "--json").stdout)
    assert not doc["params"] and all(r["efficiency"] is None for r in doc["sizes"])
    assert any("AMD Instinct MI300X" in n and "known but not modelled" in n for n in doc["notes"])


def test_a_gpu_name_the_table_does_not_know_names_the_option(tmp_path: Path) -> None:
    """Pre-release GB200 nodes print 'NVIDIA Graphics Device' in the rank lines (CoreWeave's published runs)."""
    b300 = Path(__file__).resolve().parent / "fixtures" / "all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt"
    renamed = tmp_path / "all_reduce_perf-graphics-device.txt"
    renamed.write_text(b300.read_text().replace("NVIDIA B300 SXM6 AC", "NVIDIA Graphics Device"))
    doc = json.loads(_run(str(renamed), "--nic-gbit", "800", "--json").stdout)
    assert not doc["params"] and all(r["efficiency"] is None for r in doc["sizes"])
    (note,) = [n for n in doc["notes"] if "GPU 'NVIDIA Graphics Device' is the placeholder" in n]
    assert "named by the records" in note and "--gpu NAME" in note
    doc = json.loads(_run(str(renamed), "--nic-gbit", "800", "--gpu", "B300", "--json").stdout)
    assert doc["params"]["32x4"]["gpu"] == "B300"


def test_records_naming_several_gpus_are_not_modelled_as_one() -> None:
    from collscope.analysis.job_geometry import records_gpu

    frame = pd.DataFrame({"nranks": [8, 8, 8], "nnodes": [1, 1, 2], "gpu": ["NVIDIA H100", "NVIDIA H200", None],
                          "input": ["a.txt", "b.txt", "c.txt"]})
    name, why = records_gpu(frame, 8, 1)
    assert name is None and "2 GPUs (NVIDIA H100, NVIDIA H200)" in why and "--gpu NAME" in why
    assert records_gpu(frame, 8, 2) == (None, "the records do not name their GPU")
    assert records_gpu(frame.iloc[:1], 8, 1) == ("NVIDIA H100", "named by the records (a.txt); --gpu NAME overrides")


def test_bad_input_is_one_line_exit_2(tmp_path: Path, planted: Planted) -> None:
    for args in ([str(tmp_path / "missing")], [str(tmp_path)], [str(planted.root), "--json", "--csv"],
                 [str(planted.root), "--alpha-us", "3"]):
        result = _run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"engine": "mpi"}\n')
    result = _run(str(bad))
    assert result.exit_code == 2 and f"{bad}:1" in result.stderr


def test_help_has_an_example() -> None:
    result = _run("--help")
    assert result.exit_code == 0 and "Example" in result.output and "collscope analyze" in result.output


def test_an_nvl72_run_without_its_nvlink_domain_says_what_was_assumed() -> None:
    nvl72 = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt"
    doc = json.loads(_run(str(nvl72), "--nnodes", "18", "--nic-gbit", "400", "--json").stdout)
    assert any("each of the 18 nodes is modelled as its own NVLink domain" in n for n in doc["notes"])
    assert {r["verdict"] for r in doc["sizes"]} == {"suspicious"}  # 840 GB/s cannot cross 4 x 400G per tray
    doc = json.loads(_run(str(nvl72), "--nnodes", "18", "--nvl-domain", "72", "--json").stdout)
    assert not [n for n in doc["notes"] if "modelled as its own NVLink domain" in n]
    # from 2 GiB the flat 835-886 GB/s of this fixture is normal for one 72-GPU domain; its 512 MiB-1 GiB points
    # sit above the model, whose published yardstick there (CoreWeave's rack: 586-681 GB/s) ramps more slowly
    assert {r["verdict"] for r in doc["sizes"] if r["size_bytes"] >= 2 << 30} == {"normal"}
    assert not [a for a in doc["anomalies"] if a["kind"] == "above_link_limit"]


def test_records_of_nccl_2_32_are_said_to_follow_a_model_collscope_does_not_reproduce(tmp_path: Path) -> None:
    nvl72 = Path(__file__).resolve().parents[1] / "fixtures" / "nccl-tests" / (
        "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt")
    text = nvl72.read_text()
    assert "nccl-library=22703" in text
    newer = tmp_path / "all_reduce_perf-nccl-2.32.6.txt"
    newer.write_text(text.replace("nccl-headers=22703 nccl-library=22703", "nccl-headers=23206 nccl-library=23206"))
    older = tmp_path / "all_reduce_perf-nccl-2.18.5.txt"
    older.write_text(text.replace("nccl-headers=22703 nccl-library=22703", "nccl-headers=21805 nccl-library=21805"))
    geometry = ("--nnodes", "18", "--nvl-domain", "72", "--json")
    for path, pipeline, own_tables in ((nvl72, False, False), (newer, True, False), (older, False, True)):
        doc = json.loads(_run(str(path), *geometry).stdout)
        assert any(r["efficiency"] is not None for r in doc["sizes"])
        assert any("pipeline-based cost model" in n for n in doc["notes"]) == pipeline
        assert any("collscope predict --nccl-version 2.18.5" in n for n in doc["notes"]) == own_tables
