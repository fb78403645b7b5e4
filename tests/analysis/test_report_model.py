"""collscope report judges the measurements against the model of the job's geometry, as analyze does.

The report's "Against the model" section carries each job's geometry with its evidence, the efficiency verdicts
and the analysis' notes, from the same link parameters as ``collscope analyze`` (``job_params_source``): the GPU
the results name when no option gives one, ``--gpu``/``--topo``/``--alpha-us --bw-gbps`` otherwise. Host
collectives (Open MPI, gloo, no GPU named) are not judged against a GPU's links.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from collscope.analysis.compare import analyze
from collscope.analysis.compare_render import EFFICIENCY_HEADER, efficiency_rows
from collscope.analysis.formats import markdown_table
from collscope.analysis.load import load_results
from collscope.analysis.params_source import job_params_source
from collscope.cli import main
from collscope.topo.samples import sample_path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "analysis" / "fixtures"
B300 = FIXTURES / "all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt"
H200_2X8 = FIXTURES / "all_reduce_perf-h200-2x8-1G-9G-nccl-tests-256-numbers.txt"
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"


def _report(tmp_path: Path, *args: str) -> tuple[str, str]:
    out = tmp_path / "rep"
    result = CliRunner().invoke(main, ["report", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return (out / "report.md").read_text(), (out / "index.html").read_text()


def _model_part(md: str) -> str:
    m = re.search(r"^## Against the model\n(.*?)^## ", md, re.S | re.M)
    assert m, "the report has no 'Against the model' section"
    return m.group(1)


def test_a_gpu_result_is_judged_with_the_gpu_its_rank_lines_name_and_the_verdicts_are_analyzes(
        tmp_path: Path) -> None:
    md, page = _report(tmp_path, str(B300), "--nic-gbit", "800")
    part = _model_part(md)
    assert "GPU NVIDIA B300 SXM6 AC for 32 ranks on 4 node\\(s\\): named by the records" in part
    assert "nnodes: 4 \\(hosts of the rank lines: 4" in part  # the geometry with its evidence
    frame = load_results([B300])
    analysis = analyze(frame, params=job_params_source(frame, nic_gbit=800))
    rows = efficiency_rows(analysis)
    # about 200 GB/s on 4 x 8 B300 at 800G: low from 128 MiB on, where the published band is narrow (below, the band
    # across NVLink domains is wide enough that the verdicts follow the margin)
    assert rows and {r[-1] for r in rows} <= {"low", "normal"} and "low" in {r[-1] for r in rows}
    big = analysis.sizes[analysis.sizes["size_bytes"] >= 128 << 20]
    assert set(big["verdict"]) == {"low"}
    table = markdown_table(EFFICIENCY_HEADER, rows)
    assert "\n".join(table) in part  # the same rows as analyze's, not a second computation
    assert "<h2>Against the model</h2>" in page and "Tree/LL128" in page


def test_gpu_overrides_the_records_gpu(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, str(B300), "--nic-gbit", "800", "--gpu", "H100")
    part = _model_part(md)
    assert "named by the records" not in part
    assert "| all\\_reduce | default | 32r/4n |" in part


def test_two_nodes_without_nic_rates_say_what_supplies_them(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, str(H200_2X8))
    part = _model_part(md)
    assert "| verdict |" not in part  # no efficiency table
    assert "no efficiency for 16 ranks on 2 node\\(s\\): 2 nodes need the NIC rates: pass --nic-gbit R" in part
    md, _ = _report(tmp_path, str(H200_2X8), "--nic-gbit", "400")
    assert "| verdict |" in _model_part(md)


def test_host_mpi_results_are_not_judged_against_a_gpu_topology(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, str(EXAMPLE), "--topo", str(sample_path()))
    part = _model_part(md)
    assert "| verdict |" not in part
    assert ("no efficiency for 2 ranks on 1 node\\(s\\): its records \\(mpi\\) ran on the hosts' CPUs, no GPU named, "
            "and the link parameters are GPU H100's") in part
    md, _ = _report(tmp_path, str(EXAMPLE), "--topo", str(sample_path()), "--alpha-us", "3", "--bw-gbps", "5")
    part = _model_part(md)
    assert "| verdict |" in part and "ran on the hosts' CPUs" not in part


def test_without_any_link_parameters_the_report_says_which_options_supply_them(tmp_path: Path) -> None:
    md, _ = _report(tmp_path, str(EXAMPLE))
    part = _model_part(md)
    assert "efficiency not computed: no link parameters, and no GPU named by the results \\(pass --gpu NAME, " \
           "--topo PATH or --alpha-us A --bw-gbps B" in part
    assert "Geometry of 2 ranks on 1 node" in part
    # no NVLink domain applies to 2 Open MPI ranks on CPUs: the line says so instead of asking for --nvl-domain
    assert "- nvl\\_domain: does not apply \\(host collectives: mpi; no GPU named\\)" in part
    assert "--nvl-domain N" not in part


def test_analyze_refuses_the_gpu_links_for_host_records_too() -> None:
    result = CliRunner().invoke(main, ["analyze", str(EXAMPLE), "--topo", str(sample_path())])
    assert result.exit_code == 0, result.output
    assert "its records (mpi) ran on the hosts' CPUs" in result.output
    assert "suspicious" not in result.output  # 2 CPU ranks are not judged against 450 GB/s of NVLink
    assert "nvl_domain: does not apply (host collectives: mpi; no GPU named)" in result.output


def test_a_gpu_group_still_asks_for_its_nvlink_domain() -> None:
    result = CliRunner().invoke(main, ["analyze", str(B300), "--nic-gbit", "800", "--json"])
    assert result.exit_code == 0, result.output
    assert "host_backends" not in result.output
    text = CliRunner().invoke(main, ["analyze", str(B300), "--nic-gbit", "800"]).output
    assert "nvl_domain: unknown (no evidence in the input; pass --nvl-domain N)" in text
