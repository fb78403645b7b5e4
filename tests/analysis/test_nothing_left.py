"""An NCCL_ALGO that leaves a collective nothing: NCCL's behaviour release by release
(collscope/analysis/nccl_model/nothing_left.py), in the library rule and in predict."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.nccl_model.nothing_left import NCCL_NO_ALGORITHM_ERROR, ring_fallback
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.errors import ConfigError
from tests.analysis.recommend_frames import write_all_reduce_points

A100_NODE = {"gpu": "A100-SXM4-80GB", "nranks": 8, "nnodes": 1}


@pytest.mark.parametrize(("release", "func", "every", "stops"), [
    ("2.18.5", "AllReduce", None, True),     # getAlgoInfo: "no algorithm/protocol available"
    ("2.18.5", "AllGather", False, False),   # "Never disable ring for non-allreduce operations"
    ("2.19.4", "AllReduce", True, False),    # ringbdw kept before the protocol masks
    ("2.20.5", "AllReduce", True, False),
    ("2.21.5", "AllReduce", True, False),
    ("2.22.3", "AllReduce", False, False),   # ringbdw zeroed where pEnable is 0
    ("2.23.4-1", "AllReduce", False, False),
    ("2.24.3", "AllReduce", None, True),     # the fallback is gone
    ("2.28.7+cuda13.0", "AllGather", None, True),
    ("2.30", "AllReduce", None, True),
    ("not a release", "AllReduce", None, True),
])
def test_the_fallback_follows_each_release(release: str, func: str, every: bool | None, stops: bool) -> None:
    found = ring_fallback(release, func)
    assert (found is None) == stops
    if found is not None:
        assert found.every_protocol is every
        assert release.split("-")[0].split("+")[0] in found.why and "src/graph/tuning.cc" in found.why


def test_nvls_on_a100_runs_ring_where_nccl_puts_it_back() -> None:
    plain = predict("all_reduce", **A100_NODE, sizes=[1 << 20, 16 << 20], version="2.20.5")
    forced = predict("all_reduce", **A100_NODE, sizes=[1 << 20, 16 << 20], version="2.20.5",
                     settings={"NCCL_ALGO": "NVLS"})
    assert [c.algo for c in forced.nccl_choice] == ["Ring", "Ring"]
    # NCCL's default there is Ring as well (no Tree at these sizes on one node), so the figures agree
    assert [(c.algo, c.proto, round(c.expected_busbw_gbps, 2)) for c in forced.nccl_choice] == \
        [(c.algo, c.proto, round(c.expected_busbw_gbps, 2)) for c in plain.nccl_choice]
    assert any("puts Ring back" in n and "2.20.5" in n for n in forced.setting_notes)


def test_every_protocol_comes_back_up_to_2_21_and_only_the_enabled_ones_after() -> None:
    settings = {"NCCL_ALGO": "NVLS", "NCCL_PROTO": "Simple"}
    early = predict("all_reduce", **A100_NODE, sizes=[1 << 20], version="2.20.5", settings=settings)
    late = predict("all_reduce", **A100_NODE, sizes=[1 << 20], version="2.23.4", settings=settings)
    assert (early.nccl_choice[0].algo, early.nccl_choice[0].proto) == ("Ring", "LL")
    assert (late.nccl_choice[0].algo, late.nccl_choice[0].proto) == ("Ring", "Simple")


@pytest.mark.parametrize("release", ["2.18.5", "2.24.3", "2.30"])
def test_where_nccl_stops_the_call_predict_says_so_in_nccls_words(release: str) -> None:
    with pytest.raises(ConfigError) as exc:
        predict("all_reduce", **A100_NODE, sizes=[1 << 20], version=release, settings={"NCCL_ALGO": "NVLS"})
    assert f"NCCL {release} stops such a call with '{NCCL_NO_ALGORITHM_ERROR}'" in str(exc.value)


def test_analyze_judges_a_run_by_what_its_release_runs(tmp_path: Path) -> None:
    """NCCL_ALGO=NVLS on 8 A100: a run of NCCL 2.20.5 ran Ring (judged against Ring's model), one of 2.24.3 could
    not have run (no model, no verdict), as predict says for those releases."""
    sizes = (1 << 20, 16 << 20, 1 << 30)
    early = write_all_reduce_points(tmp_path / "early", {"nvls-r0": ({"NCCL_ALGO": "NVLS"}, 200.0)}, nranks=8,
                                    nnodes=1, sizes=sizes, sweep_id="early", nccl_version="2.20.5")
    late = write_all_reduce_points(tmp_path / "late",
                                   {"nvls-simple-r0": ({"NCCL_ALGO": "NVLS", "NCCL_PROTO": "Simple"}, 200.0)},
                                   nranks=8, nnodes=1, sizes=sizes, sweep_id="late", nccl_version="2.24.3")
    result = analyze(load_results([early, late]),
                     params=lambda nranks, nnodes: link_params(None, gpu="A100-SXM4-80GB", nranks=nranks,
                                                               nnodes=nnodes))
    table = result.sizes.set_index(["config", "size_bytes"])
    ran = table.xs("NCCL_ALGO=NVLS")
    assert ran["model"].str.startswith("Ring/").all() and ran["verdict"].notna().all()
    assert ran["algo_source"].str.contains("NCCL 2.20.5 puts Ring back").all()
    expected = predict("all_reduce", **A100_NODE, sizes=list(sizes), version="2.20.5",
                       settings={"NCCL_ALGO": "NVLS"})
    assert list(ran["model"]) == [f"{c.algo}/{c.proto}" for c in expected.nccl_choice]
    stopped = table.xs("NCCL_ALGO=NVLS;NCCL_PROTO=Simple")
    assert stopped["verdict"].isna().all() and stopped["model_busbw_gbps"].isna().all()
