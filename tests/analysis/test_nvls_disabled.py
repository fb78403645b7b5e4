"""A configuration with NCCL_NVLS_ENABLE=0 has no NVLS or NVLSTree (src/transport/nvls.cc leaves nvlsSupport 0):
analyze models NCCL's choice among the rest, as it does for NCCL_ALGO; before, 8 H100 with NVLS off read 'low'
against NVLS's 470 GB/s."""

from __future__ import annotations

from pathlib import Path

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams
from collscope.analysis.params import link_params
from tests.analysis.test_channel_limits import _sweep


def _h100(nranks: int, nnodes: int) -> LinkParams:
    return link_params(None, gpu="H100", nranks=nranks, nnodes=nnodes)


def test_nvls_off_is_judged_against_the_algorithms_left(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", {
        "default-r0": ({}, 470.0),
        "nvls-off-r0": ({"NCCL_NVLS_ENABLE": "0"}, 360.0),
        "nvls-forced-off-r0": ({"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "NVLS"}, 360.0),
    })
    sizes = analyze(load_results([root]), params=_h100).sizes.set_index(["config", "size_bytes"])
    off = sizes.xs("NCCL_NVLS_ENABLE=0")
    assert not off["model"].str.startswith("NVLS").any()
    assert set(off["algo_source"]) == {"forced (NCCL_NVLS_ENABLE=0)"}
    assert off.loc[1 << 30, "verdict"] == off.loc[4 << 30, "verdict"] == "normal"
    assert sizes.xs("default").loc[1 << 30, "model"] == "NVLS/Simple"
    # NVLS forced where it is disabled: NCCL has nothing to run, so no model and no verdict
    impossible = sizes.xs("NCCL_ALGO=NVLS;NCCL_NVLS_ENABLE=0")
    assert impossible["verdict"].isna().all() and impossible["model_busbw_gbps"].isna().all()
