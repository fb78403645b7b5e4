"""The job's geometry in analyze, predict and the models (issue 23 item 3): read with its evidence, overridable
with the same options everywhere, and never "one node" when nobody said so."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.analysis.job_geometry import model_nvl_domain
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import alpha_beta_time_us, ring_bound_busbw_gbps
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.cli import main
from collscope.collectives.record import Measurement, write_jsonl
from collscope.errors import ConfigError
from collscope.geometry import GeometryEvidence

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NODES_UNKNOWN = FIXTURES / "analysis" / "all_reduce_perf-device-list-removed-16r-nodes-unknown.txt"
"""Our own 16-rank all_reduce_perf output whose author removed the device list, as tables are pasted into
issues (nccl-tests#160 shows only numbers of a 4-node run): ranks by busbw/algbw, nodes unknown."""
MNNVL = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-gb200-2x4-mnnvl-info-one-nvlink-domain.txt"
TWO_RACKS = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-gb300-2racks-128r-32trays.txt"
"""2 GB200 trays x 4 GPUs whose NCCL INFO lines say MNNVL 1 with localRanks 8: one NVLink domain."""


def _analyze(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["analyze", *args])
    return result.exit_code, result.output


def test_unknown_nodes_are_said_and_not_modelled_as_one_node() -> None:
    code, text = _analyze(str(NODES_UNKNOWN), "--gpu", "H100")
    assert code == 0, text
    assert "nranks: 16 (busbw/algbw" in text
    assert "nnodes: unknown (no evidence in the input; pass --nnodes N)" in text
    assert "no efficiency for 16 ranks: the records do not say how many nodes they ran on" in text
    code, out = _analyze(str(NODES_UNKNOWN), "--gpu", "H100", "--json")
    doc = json.loads(out)
    assert doc["params"] == {}  # nothing modelled: before, 16 ranks were modelled on one node
    assert all(row["efficiency"] is None for row in doc["sizes"])
    assert doc["geometry"]["nnodes"] == {"value": None, "evidence": []}
    assert doc["geometry"]["nranks"]["value"] == 16
    assert doc["geometry"]["nranks"]["evidence"][0].startswith("busbw/algbw = 1.87")


def test_analyze_nnodes_override_reaches_the_models_with_its_evidence() -> None:
    code, out = _analyze(str(NODES_UNKNOWN), "--nnodes", "2", "--alpha-us", "5", "--bw-gbps", "40", "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["geometry"]["nnodes"] == {"value": 2, "evidence": ["--nnodes 2 (as passed)"], "overridden": True}
    assert doc["geometry"]["ranks_per_node"]["value"] == 8
    assert [g["group"] for g in doc["geometries"]] == ["16 ranks on 2 nodes"]
    assert list(doc["params"]) == ["16x2"] and doc["params"]["16x2"]["ppn"] == 8
    assert all(row["nnodes"] == 2 and row["efficiency"] is not None for row in doc["sizes"])
    code, text = _analyze(str(NODES_UNKNOWN), "--nnodes", "2", "--alpha-us", "5", "--bw-gbps", "40")
    assert "Geometry of 16 ranks on 2 nodes" in text and "nnodes: 2 (--nnodes 2 (as passed))" in text


def test_an_override_that_disagrees_with_the_input_wins_with_a_note() -> None:
    code, out = _analyze(str(MNNVL), "--nnodes", "4", "--json")
    assert code == 0, out
    geometry = json.loads(out)["geometry"]
    assert geometry["nnodes"]["value"] == 4 and geometry["nnodes"]["overridden"]
    assert any(n.startswith("nnodes: --nnodes 4 (as passed) overrides 'hosts of the rank lines: 2")
               for n in geometry["notes"])


def test_the_nvlink_domain_of_the_input_reaches_the_models() -> None:
    """MNNVL 1 with localRanks 8 on 2 trays: every rank on one NVLink fabric, so no NIC rate is needed and the
    ring bound is NVLink's (before: '2 nodes need the NIC rates', no efficiency)."""
    code, out = _analyze(str(MNNVL), "--gpu", "GB200", "--json")
    assert code == 0, out
    doc = json.loads(out)
    params = doc["params"]["8x2"]
    assert (params["nvl_domain"], params["domain_ranks"], params["ndomains"], params["ppn"]) == (8, 8, 1, 4)
    assert all(row["efficiency"] is not None for row in doc["sizes"] if row["size_bytes"] > 0)
    assert not any("NIC rates" in n for n in doc["notes"])
    ev = GeometryEvidence()
    ev.at_least("nvl_domain", 8, "localRanks 8 with MNNVL 1")
    assert model_nvl_domain(ev.resolve(), 8) == 8 and model_nvl_domain(ev.resolve(), 16) is None


def _records(path: Path, nranks: int, nnodes: int | None, hosts: tuple[str, ...]) -> Path:
    write_jsonl(path, [Measurement(engine="nccl-tests", backend="nccl", op="all_reduce", size_bytes=size,
                                   count=size // 4, dtype="float", redop="sum", root=None, in_place=False,
                                   nranks=nranks, nnodes=nnodes, time_us=10.0 + size / 1e4, algbw_gbps=1.0,
                                   busbw_gbps=1.5, ok=True, iters=20, warmup=5, repeat=0, hosts=hosts)
                       for size in (1 << 20, 1 << 24)])
    return path


def test_records_without_nnodes_stay_unknown_with_their_hosts_as_a_bound(tmp_path: Path) -> None:
    path = _records(tmp_path / "r.jsonl", 16, None, ("gpu-a07", "gpu-a09"))
    frame = load_results(path)
    (group,) = frame.attrs["geometry"]
    nnodes = group.geometry.nnodes
    assert (group.nnodes, nnodes.value, nnodes.low) == (None, None, 2)
    assert nnodes.evidence == (f"hosts named by the records of {path}: 2 (the records do not give nnodes)",)
    assert frame["nnodes"].isna().all()
    fixed = load_results(path, nnodes=2)
    assert (fixed["nnodes"] == 2).all() and fixed.attrs["geometry"][0].geometry.nnodes.value == 2
    fewer = load_results(path, nnodes=1).attrs["geometry"][0].geometry  # the user wins, and is told
    assert fewer.nnodes.value == 1 and fewer.notes == (
        f"nnodes: --nnodes 1 (as passed) overrides 'hosts named by the records of {path}: 2 (the records do not "
        "give nnodes)'",)


def test_overrides_describe_one_job(tmp_path: Path) -> None:
    a = _records(tmp_path / "a.jsonl", 8, 1, ("gpu-b01",))
    b = _records(tmp_path / "b.jsonl", 16, 2, ("gpu-b01", "gpu-b02"))
    assert {(g.nranks, g.nnodes) for g in load_results([a, b]).attrs["geometry"]} == {(8, 1), (16, 2)}
    with pytest.raises(ConfigError, match=r"--nnodes 2 describes one job, but the inputs hold 2 rank counts \(8, 16\)"):
        load_results([a, b], nnodes=2)


def test_predict_states_the_nodes_or_refuses() -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "16"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "pass --nnodes N" in lines[0] and "--nnodes 1 for one node" in lines[0]
    with pytest.raises(ConfigError, match="needs the number of nodes"):
        predict("all_reduce", gpu="H100", nranks=16, nnodes=None)
    ok = runner.invoke(main, ["predict", "--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1",
                              "--sizes", "1M"])
    assert ok.exit_code == 0 and ok.output.startswith("8 ranks on 1 node(s) (8 per node)")


def test_predict_nvl_domain_spans_nodes() -> None:
    runner = CliRunner()
    base = ["predict", "--gpu", "GB200", "--op", "all_reduce", "--nranks", "72", "--nnodes", "18", "--sizes", "1G",
            "--json"]
    without = runner.invoke(main, base)
    assert without.exit_code == 2 and "18 nodes need the NIC rates" in without.output
    rack = runner.invoke(main, [*base, "--nvl-domain", "72"])
    assert rack.exit_code == 0, rack.output
    params = json.loads(rack.output)["params"]
    assert (params["domain_ranks"], params["ndomains"], params["ppn"]) == (72, 1, 4)
    assert params["ring_bound_busbw_gbps"] == params["intra_bw_gbps"]


def test_nvlink_domain_in_the_models() -> None:
    one_rack = link_params(None, gpu="GB200", nranks=72, nnodes=18, nvl_domain=72)
    node = link_params(None, gpu="GB200", nranks=72, nnodes=1)  # the same fabric, as if one node
    assert one_rack.ndomains == 1 and ring_bound_busbw_gbps(one_rack) == one_rack.intra_gbps
    for algo in ("ring", "double_binary_tree", "recursive_doubling"):
        assert math.isclose(alpha_beta_time_us("all_reduce", algo, one_rack, 1 << 30),
                            alpha_beta_time_us("all_reduce", algo, node, 1 << 30))
    # two racks of 18 trays: the ring crosses the NICs between domains, each domain has 18 nodes' NICs
    two = LinkParams(nranks=144, nnodes=36, nvl_domain=72, alpha_us=3.0, alpha_inter_us=14.0, bw_gbps=100.0,
                     intra_bw_gbps=900.0, inter_bw_gbps=50.0)
    assert (two.domain_ranks, two.ndomains, two.ppn) == (72, 2, 4)
    assert ring_bound_busbw_gbps(two) == 900.0  # min(900, 50 GB/s x 18 nodes)
    assert ring_bound_busbw_gbps(LinkParams(nranks=144, nnodes=36, alpha_us=3.0, bw_gbps=50.0, intra_bw_gbps=900.0,
                                            inter_bw_gbps=50.0)) == 50.0
    with pytest.raises(ConfigError, match="domains of whole nodes"):
        LinkParams(nranks=16, nnodes=4, nvl_domain=6, alpha_us=1.0, bw_gbps=10.0)
    with pytest.raises(TypeError):
        link_params(None, gpu="H100", nranks=8)  # type: ignore[call-arg]  # no default number of nodes


def test_a_parser_override_is_said_once_and_its_notes_kept() -> None:
    """--nranks reaches the nccl-tests parser and the job's geometry: one '(as passed)', and the parser's note of
    the clue it overrode stays (the 72-rank NVL72 output that keeps only its last rank line)."""
    nvl72 = FIXTURES / "nccl-tests" / "all_reduce_perf-v2.19.6-gb200-nvl72-72r-last-rank-line-only.txt"
    code, out = _analyze(str(nvl72), "--nranks", "72", "--json")
    assert code == 0, out
    nranks = json.loads(out)["geometry"]["nranks"]
    assert nranks["value"] == 72 and nranks["evidence"][0] == "--nranks 72 (as passed)"
    assert sum("(as passed)" in e for e in nranks["evidence"]) == 1
    assert "Rank 71 is the highest rank line" in nranks["evidence"][1]
    code, out = _analyze(str(nvl72), "--nranks", "80", "--json")
    notes = json.loads(out)["geometry"]["notes"]
    assert any(n.startswith("nranks: --nranks 80 (as passed) overrides 'Rank 71 is the highest rank line'")
               for n in notes), notes


def test_nccl_log_model_never_takes_one_node_for_unknown() -> None:
    """A log excerpt with one rank's Init COMPLETE line of 8 (no nNodes, one host seen): nodes unknown, so no
    model (before: modelled as one node)."""
    from collscope.analysis.log_model import choices_against_model
    from collscope.collectives.nccl_log.parse import parse_nccl_log

    log = parse_nccl_log("gpu-c12:8803:8860 [3] NCCL INFO comm 0x7f3c50001f00 rank 3 nranks 8 cudaDev 3 nvmlDev 3 "
                         "busId 3a000 commId 0x9e1f4c2a7b3d5e60 - Init COMPLETE\n")
    assert (log.nranks, log.nnodes) == (8, None)
    with pytest.raises(ConfigError, match="does not say how many nodes the communicator spans"):
        choices_against_model(log, gpu="H100")


def test_a_two_rack_nvl72_run_is_judged_against_a_two_rack_model() -> None:
    """128 GB300 ranks on 32 trays of two NVL72 racks (issue 24: judged 'low' at 77-81% of a one-node NVLS model
    before): two NVLink domains of 64 ranks joined by the trays' NICs, NVLSTree as NCCL runs it across domains."""
    code, out = _analyze(str(TWO_RACKS), "--gpu", "GB300", "--nvl-domain", "72", "--json")
    assert code == 0, out
    doc = json.loads(out)
    params = doc["params"]["128x32"]
    assert (params["nranks"], params["nnodes"], params["ppn"]) == (128, 32, 4)
    assert (params["domain_ranks"], params["ndomains"]) == (64, 2)
    assert params["nics_per_node"] and params["nic_gbps"]  # the GB300 tray's compute NICs from the system table
    rows = [r for r in doc["sizes"] if not r["in_place"]]
    assert {r["model"] for r in rows} == {"NVLSTree/Simple"}
    one_node = predict("all_reduce", gpu="GB300", nranks=128, nnodes=1, sizes=[1 << 34]).nccl_choice[0]
    sixteen = next(r for r in rows if r["size_bytes"] == 1 << 34)
    assert one_node.algo == "NVLS" and sixteen["model_busbw_gbps"] < one_node.expected_busbw_gbps
    assert 0.75 < sixteen["efficiency"] < 0.9  # 731 GB/s published-like figure against the 2-rack model
