"""A configuration's tuning variables that the model does not take (NCCL_BUFFSIZE, NCCL_NTHREADS, ...) are named
in analyze's notes: its verdicts are against NCCL's defaults for them. The ones it takes are not named."""

from __future__ import annotations

from pathlib import Path

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_settings import MODELLED_SETTINGS
from collscope.analysis.model_types import LinkParams
from collscope.analysis.params import link_params
from collscope.vocab.channel_limits import CHANNEL_LIMIT_NAMES
from collscope.vocab.env_roles import env_role
from collscope.vocab.knobs import KNOBS
from tests.analysis.test_channel_limits import _sweep


def _h100(nranks: int, nnodes: int) -> LinkParams:
    return link_params(None, gpu="H100", nranks=nranks, nnodes=nnodes)


def test_the_settings_the_model_takes_are_knobs_a_sweep_can_set() -> None:
    assert set(CHANNEL_LIMIT_NAMES) < MODELLED_SETTINGS <= set(KNOBS)
    assert env_role("NCCL_BUFFSIZE") == "tuning" and "NCCL_BUFFSIZE" not in MODELLED_SETTINGS


def test_a_setting_the_model_does_not_take_is_named(tmp_path: Path) -> None:
    root = _sweep(tmp_path / "r", {
        "default-r0": ({}, 470.0),
        "buff-r0": ({"NCCL_BUFFSIZE": "1048576", "NCCL_ALGO": "Ring"}, 300.0),
        "ctas-r0": ({"NCCL_MAX_CTAS": "64", "NCCL_PROTO": "Simple"}, 470.0),
    })
    notes = analyze(load_results([root]), params=_h100).notes
    named = [n for n in notes if "which the model does not take" in n]
    assert named == ["NCCL_ALGO=Ring;NCCL_BUFFSIZE=1048576: NCCL_BUFFSIZE=1048576 set, which the model does not "
                     "take (it assumes NCCL's default for each): its verdicts are against the defaults"]
