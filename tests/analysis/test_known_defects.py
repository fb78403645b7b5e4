"""Acknowledged NCCL defects (collscope/analysis/nccl_model/known_defects.py): predict and analyze say so where
NCCL's tuning table, which the model is, overrates an algorithm on the job's geometry.

The fixture all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt is collscope's own: 32 ranks on 4 hosts of 8 B300,
busbw about 200 GB/s at the large sizes, the shape NVIDIA/nccl#2035 reports for NVLSTree on 4+ Blackwell nodes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from collscope.analysis.compare import analyze
from collscope.analysis.load import load_results
from collscope.analysis.model_types import LinkParams
from collscope.analysis.nccl_model.constants import ALGOS
from collscope.analysis.nccl_model.known_defects import KNOWN_DEFECTS, defect_notes
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.analysis.predict import predict
from collscope.units import format_size
from collscope.vocab.ops import OPS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt"
MIB = 1 << 20


def _b300(nranks: int, nnodes: int) -> LinkParams:
    return link_params(None, gpu="B300", nranks=nranks, nnodes=nnodes, nic_gbit=800)


def test_every_row_names_a_thread_a_known_algorithm_and_known_ops() -> None:
    for d in KNOWN_DEFECTS:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", d.ref), d.ref
        assert d.algo in ALGOS and d.ops and set(d.ops) <= set(OPS)
        assert d.measured and d.status and d.workaround.startswith("NCCL_")


def test_nvlstree_on_four_blackwell_domains_is_noted_with_the_sizes_it_hits() -> None:
    inputs = graph_inputs_from_topology(_b300(32, 4))
    notes = defect_notes(inputs, "all_reduce", [("NVLSTree", 16 * MIB), ("Ring", 1 << 30), ("NVLSTree", 8 * MIB)])
    assert len(notes) == 1
    assert "NVLSTree for all_reduce at 8M, 16M on 4 NVLink domains" in notes[0]
    assert "NVIDIA/nccl#2035" in notes[0] and "NCCL_ALGO=Ring" in notes[0]


def test_no_note_where_the_thread_saw_no_defect() -> None:
    two_nodes = graph_inputs_from_topology(_b300(16, 2))  # 2 nodes reached 800 GB/s in the thread
    hopper = graph_inputs_from_topology(link_params(None, gpu="H100", nranks=32, nnodes=4, nic_gbit=400))
    assert defect_notes(two_nodes, "all_reduce", [("NVLSTree", 16 * MIB)]) == []
    assert defect_notes(hopper, "all_reduce", [("NVLSTree", 16 * MIB)]) == []
    four = graph_inputs_from_topology(_b300(32, 4))
    assert defect_notes(four, "all_reduce", [("Ring", 16 * MIB)]) == []
    assert defect_notes(four, "all_gather", [("NVLSTree", 16 * MIB)]) == []


def test_predict_notes_it_where_nccls_choice_is_nvlstree() -> None:
    result = predict("all_reduce", gpu="B300", nranks=32, nnodes=4, nic_gbit=800, sizes=[16 * MIB, 1 << 30])
    chosen = {c.size_bytes: c.algo for c in result.nccl_choice}
    assert chosen[16 * MIB] == "NVLSTree" and chosen[1 << 30] != "NVLSTree"
    noted = [n for n in result.notes if "NVIDIA/nccl#2035" in n]
    assert len(noted) == 1 and "at 16M on 4 NVLink domains" in noted[0]
    two = predict("all_reduce", gpu="B300", nranks=16, nnodes=2, nic_gbit=800, sizes=[16 * MIB, 1 << 30])
    assert not [n for n in two.notes if "NVIDIA/nccl#2035" in n]


def test_analyze_notes_it_when_nvlstree_was_forced_on_four_b300_nodes() -> None:
    frame = load_results([FIXTURE])
    frame["config"] = pd.Categorical(["NCCL_ALGO=NVLSTree"] * len(frame))
    frame["NCCL_ALGO"] = "NVLSTree"
    result = analyze(frame, params=_b300)
    sizes = result.sizes
    assert set(sizes["model"]) == {"NVLSTree/Simple"}
    # low from 128 MiB; below, the published band across NVLink domains (8-64 MiB) is wide enough that these
    # figures sit inside analyze's margin, and the verdict follows the margin, not the size
    assert set(sizes.loc[sizes["size_bytes"] >= 128 * MIB, "verdict"]) == {"low"}
    below = sizes["busbw_gbps"] < sizes["model_busbw_gbps"] * (1 - sizes["margin"])
    assert list(sizes["verdict"] == "low") == list(below)
    noted = [n for n in result.notes if "NVIDIA/nccl#2035" in n]
    assert len(noted) == 1 and "at 8M, 32M, 128M, 512M, 2G, 8G on 4 NVLink domains of sm103" in noted[0]
    # unforced, NCCL's choice is never NVLSTree there; a size is judged against NVLSTree only as a near tie that the
    # measurement matches (inside the published band's margin), and the note names exactly those sizes
    unforced = analyze(load_results([FIXTURE]), params=_b300)
    judged = unforced.sizes[unforced.sizes["model"] == "NVLSTree/Simple"]
    assert all("its near tie NVLSTree/Simple" in src for src in judged["algo_source"])
    noted = [n for n in unforced.notes if "NVIDIA/nccl#2035" in n]
    sizes = ", ".join(format_size(s) for s in sorted(set(judged["size_bytes"])))
    assert (noted == []) if judged.empty else (len(noted) == 1 and f"at {sizes} on 4 NVLink domains" in noted[0])


def test_trace_puts_it_among_the_report_warnings_for_the_groups_it_hits() -> None:
    from collscope.cli.trace import _model

    cautions: list[str] = []
    model = _model(None, "B300", None, cautions, nic_gbit=800)
    assert model is not None
    model("all_reduce", 16, 2, [16 * MIB])
    assert cautions == []
    figures = model("all_reduce", 32, 4, [16 * MIB])
    assert figures[16 * MIB].busbw_gbps > 0
    assert len(cautions) == 1 and "NVIDIA/nccl#2035" in cautions[0]
    model("all_reduce", 32, 4, [16 * MIB])
    assert len(cautions) == 1  # once per text, however many calls ask
