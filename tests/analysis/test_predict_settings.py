"""``collscope predict --setting NAME=VALUE``: the job's NCCL variables read as analyze reads a configuration's
(collscope.analysis.model_settings), so that predict and analyze give one answer for one job."""

from __future__ import annotations

import json

from click.testing import CliRunner

from collscope.analysis.predict import predict
from collscope.cli import main
from collscope.topo.samples import sample_path

ONE_NODE = ("--gpu", "H100", "--op", "all_reduce", "--nranks", "8", "--nnodes", "1", "--sizes", "1G")


def _run(*args: str):
    return CliRunner().invoke(main, ["predict", *args])


def test_nvls_off_narrows_the_choice_as_analyze_does() -> None:
    plain = json.loads(_run(*ONE_NODE, "--json").output)["nccl_choice"][0]
    off = _run(*ONE_NODE, "--setting", "NCCL_NVLS_ENABLE=0", "--json")
    assert off.exit_code == 0, off.output
    choice = json.loads(off.output)["nccl_choice"][0]
    assert plain["algo"] == "NVLS" and choice["algo"] not in ("NVLS", "NVLSTree")
    assert choice["expected_busbw_gbps"] < 0.8 * plain["expected_busbw_gbps"]
    text = _run(*ONE_NODE, "--setting", "NCCL_NVLS_ENABLE=0").output
    assert "NCCL_NVLS_ENABLE=0: NCCL's choice restricted as the setting restricts NCCL" in text


def test_ib_hca_counts_the_nics_it_leaves() -> None:
    topo = str(sample_path())
    common = ("--topo", topo, "--gpu", "H100", "--op", "all_reduce", "--nranks", "16", "--nnodes", "2",
              "--sizes", "1G", "--json")
    every = json.loads(_run(*common).output)
    one = json.loads(_run(*common, "--setting", "NCCL_IB_HCA==mlx5_0").output)
    assert (every["params"]["nics_per_node"], one["params"]["nics_per_node"]) == (8, 1)
    assert one["nccl_choice"][0]["expected_busbw_gbps"] < 100 < every["nccl_choice"][0]["expected_busbw_gbps"]


def test_bounds_and_unmodelled_variables_are_said_and_nothing_is_guessed() -> None:
    result = predict("all_reduce", gpu="H100", nranks=8, nnodes=1, sizes=[1 << 30],
                     settings={"NCCL_MAX_CTAS": "8", "NCCL_BUFFSIZE": "1048576"})
    plain = predict("all_reduce", gpu="H100", nranks=8, nnodes=1, sizes=[1 << 30])
    assert result.nccl_choice == plain.nccl_choice  # the bound does not move NCCL's choice or its figure
    assert any("NCCL_MAX_CTAS=8 run NVLS on 8 channels where the model assumes NCCL's own 16: the expected "
               "measurements at 1G are for NCCL's own count" in n for n in result.notes)
    assert any(n.startswith("NCCL_BUFFSIZE=1048576 set, which the model does not take") for n in result.notes)
    a2a = predict("alltoall", gpu="H100", nranks=8, nnodes=1, sizes=[1 << 30], settings={"NCCL_MAX_CTAS": "2"})
    assert any("NCCL_MAX_CTAS=2 bound the channels of P2P" in n for n in a2a.notes)


def test_a_setting_that_is_malformed_unknown_or_leaves_nothing_is_one_line() -> None:
    for args, message in ((("--setting", "NCCL_ALGO"), "NAME=VALUE expected"),
                          (("--setting", "NCCL_ALGOO=Ring"), "did you mean NCCL_ALGO?"),
                          (("--setting", "NCCL_PROTO=Fast"), "NCCL_PROTO"),
                          (("--setting", "NCCL_ALGO=NVLS", "--setting", "NCCL_NVLS_ENABLE=0"),
                           "NCCL_ALGO=NVLS, NCCL_NVLS_ENABLE=0: no NCCL algorithm/protocol is enabled")):
        result = _run(*ONE_NODE, *args)
        assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output, result.output


def test_collnet_enable_is_left_at_the_default_with_the_reason_and_the_option_that_models_it() -> None:
    result = predict("all_reduce", gpu="H100", nranks=16, nnodes=2, nic_gbit=400, sizes=[1 << 30],
                     settings={"NCCL_COLLNET_ENABLE": "1", "NCCL_BUFFSIZE": "1048576"})
    assert ("NCCL_BUFFSIZE=1048576, NCCL_COLLNET_ENABLE=1 set, which the model does not take (it assumes NCCL's "
            "default for each; NCCL_COLLNET_ENABLE: CollNet (SHARP) runs only where a CollNet network plugin is "
            "loaded, which the input does not show; predict --collnet models the job with it)") in result.notes
    assert not any(c.algo.startswith("CollNet") for c in result.nccl_choice)
