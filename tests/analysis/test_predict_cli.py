"""``collscope predict`` and the ``predict`` library function."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from collscope.analysis.predict import load_topology, predict
from collscope.cli import main
from collscope.errors import ConfigError, ParseError
from collscope.topo.detect import load_captures
from collscope.topo.node import build_node
from collscope.topo.render import node_to_json
from collscope.topo.samples import sample_path

PRED_KEYS = {"model", "algo", "proto", "op", "size_bytes", "time_us", "busbw_gbps"}
CHOICE_KEYS = {"size_bytes", "algo", "proto", "time_us", "busbw_gbps", "expected_time_us", "expected_busbw_gbps",
               "held_to_bound", "floor_from_bytes", "ceiling_busbw_gbps", "near_ties", "published_accuracy"}


def _run(*args: str):
    return CliRunner().invoke(main, ["predict", *args])


def test_json_keys_exactly():
    result = _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1",
                  "--sizes", "1K,1M,1G", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc) == {"predictions", "nccl_choice", "params"}
    assert all(set(p) == PRED_KEYS for p in doc["predictions"])
    assert {p["model"] for p in doc["predictions"]} == {"alpha-beta", "nccl"}
    assert [c["size_bytes"] for c in doc["nccl_choice"]] == [1024, 1 << 20, 1 << 30]
    assert all(set(c) == CHOICE_KEYS for c in doc["nccl_choice"])
    assert doc["nccl_choice"][0]["algo"] == "Ring" and doc["nccl_choice"][-1]["algo"] == "NVLS"
    assert doc["params"]["gpu"] == "H100" and doc["params"]["source"]
    # 1 KiB: the published curves' own small sizes (64 B-128 KiB); one node is inside one NVLink domain
    small = doc["nccl_choice"][0]["published_accuracy"]
    assert (small["lo_bytes"], small["hi_bytes"], small["across_domains"]) == (64, 128 << 10, False)
    band = doc["nccl_choice"][-1]["published_accuracy"]
    assert (band["family"], band["across_domains"], band["lo_bytes"], band["hi_bytes"]) == ("nccl", False, 512 << 20,
                                                                                            None)


def test_library_function_returns_the_cli_document():
    doc = json.loads(_run("--gpu", "A100", "--op", "all_gather", "--nranks", "8", "--nnodes", "1",
                          "--sizes", "1M", "--json").output)
    assert predict("all_gather", gpu="A100", nranks=8, nnodes=1, sizes=[1 << 20]).to_dict() == doc


@pytest.mark.parametrize("how", ["sample dir", "topo show json", "matrix file"])
def test_topo_inputs(tmp_path, how):
    if how == "sample dir":
        args = ["--topo", str(sample_path())]
    elif how == "topo show json":
        node = build_node(load_captures([sample_path()]))
        path = tmp_path / "node 01; 'json'.json"
        path.write_text(json.dumps(node_to_json(node), default=str))
        args = ["--topo", str(path)]
    else:
        path = tmp_path / "topo.txt"
        path.write_text((sample_path() / "nvidia-smi-topo.txt").read_text())
        args = ["--topo", str(path), "--gpu", "H100"]
    if how == "matrix file":  # no NICs without ibstat: one node
        result = _run(*args, "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", "64G", "--json")
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)
        assert doc["params"]["bw_gbps"] == pytest.approx(18 * 25.0)  # NV18 x the NVLink4 table rate
        missing = _run(*args, "--op", "all_reduce", "--nranks", "16", "--nnodes", "2")
        assert missing.exit_code == 2 and "NIC rates" in missing.output
        return
    result = _run(*args, "--op", "all_reduce", "--nranks", "16", "--nnodes", "2", "--sizes", "64G", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["params"]["nvswitch"] is True
    # the ring bound min(18 x 25, 8 x 50) = 400 GB/s; at 64 GiB the 30 x 14 us of latency is < 0.2%
    assert doc["params"]["bw_gbps"] == pytest.approx(400.0)
    ring = next(p for p in doc["predictions"] if p["model"] == "alpha-beta" and p["algo"] == "ring")
    assert ring["busbw_gbps"] == pytest.approx(400.0, rel=0.002)
    assert doc["nccl_choice"][0]["algo"] == "NVLSTree"


def test_topo_json_round_trip_keeps_bandwidths(tmp_path):
    node = build_node(load_captures([sample_path()]))
    path = tmp_path / "node.json"
    path.write_text(json.dumps(node_to_json(node), default=str))
    loaded = load_topology([path])
    assert loaded.gpus == node.gpus and loaded.has_nvswitch
    assert loaded.bandwidth_matrix().equals(node.bandwidth_matrix())


def test_damaged_json_topology(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"graph": ')
    with pytest.raises(ParseError, match="bad.json:1"):
        load_topology([path])
    path.write_text('{"host": "x"}')
    with pytest.raises(ParseError, match="\"graph\" key"):
        load_topology([path])
    result = _run("--topo", str(path), "--op", "all_reduce", "--nranks", "8", "--nnodes", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_bad_op_is_one_line_exit_2():
    result = _run("--gpu", "H100", "--op", "allreduce", "--nranks", "8", "--nnodes", "1")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "unknown collective 'allreduce'" in lines[0] and "all_reduce" in lines[0]


def test_missing_params_exit_2_with_the_hint():
    result = _run("--op", "all_reduce", "--nranks", "8", "--nnodes", "1")
    assert result.exit_code == 2
    assert "--topo PATH" in result.output and "--gpu NAME" in result.output and "--bw-gbps" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_explicit_alpha_beta_without_gpu_has_no_nccl_choice():
    result = _run("--op", "all_reduce", "--nranks", "4", "--nnodes", "1",
                  "--alpha-us", "2", "--bw-gbps", "10", "--min-bytes", "1K",
                  "--max-bytes", "4K", "--factor", "2", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["nccl_choice"] == [] and {p["model"] for p in doc["predictions"]} == {"alpha-beta"}
    assert sorted({p["size_bytes"] for p in doc["predictions"]}) == [1024, 2048, 4096]
    assert any("NCCL's model skipped" in n for n in doc["params"]["notes"])


def test_text_output_has_tables_choice_and_sources():
    result = _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", "1M,1G")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "size 1M (1048576 B)" in out and "size 1G" in out
    assert "NCCL choice: NVLS/Simple" in out and "Ring/LL" in out and "rabenseifner" in out
    assert "sources:" in out and "hwLatencies" in out


def test_bad_sizes_and_version():
    assert _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", "1Q").exit_code == 2
    both = _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1",
                "--sizes", "1K", "--min-bytes", "1K")
    assert both.exit_code == 2 and "either --sizes" in both.output
    old = _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1",
               "--nccl-version", "2.19", "--json")
    assert old.exit_code == 0 and json.loads(old.output)["params"]["nccl_version"] == "2.19"
    with pytest.raises(ConfigError, match=r"neither a release \(2.27.3\) nor one of collscope's tables \(2.30, 2.19\)"):
        predict("all_reduce", gpu="H100", nranks=8, nnodes=1, version="2.x")
    bad = _run("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--nccl-version", "latest")
    assert bad.exit_code == 2 and "'latest' is neither a release" in bad.output


@pytest.mark.parametrize(("release", "tables", "pipeline"), [
    ("2.20.5", "2.19", False),  # the last release with 2.19.4's constants (model_version_for)
    ("2.21.5", "2.30", False),
    ("2.27.3+cuda12.9", "2.30", False),
    ("2.30.7", "2.30", False),
    ("2.32.6-1", "2.30", True),  # the pipeline-based cost model of NCCL 2.32 (release notes)
])
def test_a_release_picks_the_nearest_tables_and_says_so(release, tables, pipeline):
    result = predict("all_reduce", gpu="H100", nranks=8, nnodes=1, version=release, sizes=[1 << 30])
    assert result.nccl_version == tables
    said = [n for n in result.notes if n.startswith(f"NCCL {release}: collscope's model uses the tables")]
    assert len(said) == (0 if release.startswith(tables) else 1)
    assert any("pipeline-based cost model" in n for n in result.notes) == pipeline



def test_the_tables_a_release_maps_to_are_the_ones_used():
    """At 1 MiB on 8 H100 the 2.19.4 tables (NVLS NVLink latency 23 us, Hopper llMaxBws 87.7) pick NVLS and the
    2.30.7 tables Ring/LL: a 2.20.5 job gets the first."""
    def pick(version: str) -> str:
        (c,) = predict("all_reduce", gpu="H100", nranks=8, nnodes=1, version=version, sizes=[1 << 20]).nccl_choice
        return f"{c.algo}/{c.proto}"

    assert pick("2.20.5") == pick("2.19") == "NVLS/Simple" and pick("2.27.3") == pick("2.30") == "Ring/LL"


def test_help_has_an_example():
    result = _run("--help")
    assert result.exit_code == 0 and "Example" in result.output and "collscope predict --gpu H100" in result.output


@pytest.mark.parametrize(("release", "ll128"), [
    ("2.26.2", False),  # 2.25.1-2.26.6: sm 70, 80, 90, 100, 120 only (src/graph/tuning.cc), not B300's 103
    ("2.27.3", True),   # from 2.27.3 every sm >= 70
    ("2.30", True),
])
def test_a_release_that_leaves_ll128_off_on_the_gpu_is_modelled_without_it(release, ll128):
    """2 x 8 B300 all_gather at 1-64 MiB: NCCL 2.27+ picks Ring/LL128 in collscope's model; a 2.26 job runs without
    LL128 (its tuning.cc leaves it off on sm 103), and the prediction says so."""
    result = predict("all_gather", gpu="NVIDIA B300 SXM6 AC", nranks=16, nnodes=2, nic_gbit=800, version=release,
                     sizes=[1 << 20, 16 << 20, 64 << 20])
    assert any(c.proto == "LL128" for c in result.nccl_choice) == ll128
    said = [n for n in result.notes if "enables LL128 by default only on sm 70, 80, 90, 100, 120" in n]
    assert len(said) == (0 if ll128 else 1) and ("sm 103" in said[0] if said else True)
    forced = predict("all_gather", gpu="NVIDIA B300 SXM6 AC", nranks=16, nnodes=2, nic_gbit=800, version=release,
                     sizes=[16 << 20], protos=["LL128"])  # NCCL_PROTO=LL128 enables it on any release
    assert forced.nccl_choice[0].proto == "LL128"


def test_ll128_default_by_release_follows_nccl_sources():
    from collscope.analysis.nccl_model.constants import ll128_default_sms, ll128_off_note
    assert ll128_default_sms("2.20.5") == ll128_default_sms("2.24.3") == {70, 80, 90}
    assert ll128_default_sms("2.25.1") == ll128_default_sms("2.26.6") == {70, 80, 90, 100, 120}
    assert ll128_default_sms("2.27.3") is None and ll128_default_sms("2.30") is None
    assert ll128_off_note("2.23.4", 86) is not None and ll128_off_note("2.23.4", 90) is None
    assert ll128_off_note("2.20.5", 86) is None  # the 2.19 tables already leave it off there
    assert ll128_off_note("2.28.9", 121) is None and ll128_off_note("2.26.2", 60) is None  # < 70: never on
