"""The Geometry record: clues intersect, two that cannot both hold are an error naming both, an override wins
with a note, nranks = nnodes x ranks_per_node derives the third, and what nothing says stays unknown."""

from __future__ import annotations

import pytest

from collscope.errors import ParseError
from collscope.geometry import GeometryEvidence


def test_clues_intersect_and_the_third_of_nranks_nnodes_ranks_per_node_is_derived():
    ev = GeometryEvidence("run.txt")
    ev.at_least("nranks", 72, "Rank 71 is the highest rank line")
    ev.between("nranks", 71, 72, "busbw/algbw = 1.9722 -> 71..72")
    ev.exact("nnodes", 18, "hosts of the rank lines: 18")
    geometry = ev.resolve()
    assert geometry.value("nranks") == 72
    assert geometry.nranks.evidence == ("Rank 71 is the highest rank line", "busbw/algbw = 1.9722 -> 71..72")
    assert geometry.value("ranks_per_node") == 4
    assert geometry.ranks_per_node.evidence == ("72 ranks / 18 nodes",)
    assert geometry.to_json()["nnodes"] == {"value": 18, "evidence": ["hosts of the rank lines: 18"]}


def test_what_no_clue_pins_stays_unknown_with_its_range_and_the_option_that_supplies_it():
    ev = GeometryEvidence("run.txt")
    ev.between("nranks", 60, 80, "busbw/algbw allows 60..80")
    geometry = ev.resolve()
    assert geometry.value("nranks") is None and geometry.value("nnodes") is None
    lines = geometry.lines()
    assert "nranks: unknown (60..80 allowed) (busbw/algbw allows 60..80; pass --nranks N)" in lines
    assert "nnodes: unknown (no evidence in the input; pass --nnodes N)" in lines
    assert geometry.to_json()["nranks"] == {"value": None, "evidence": ["busbw/algbw allows 60..80"], "low": 60,
                                            "high": 80}


def test_clues_that_disagree_are_an_error_naming_both_unless_overridden():
    ev = GeometryEvidence("run.txt")
    ev.exact("nranks", 72, "Rank 71 is the highest rank line")
    ev.exact("nranks", 8, "nranks 8 in NCCL's Init COMPLETE lines")
    with pytest.raises(ParseError) as caught:
        ev.resolve()
    message = str(caught.value)
    assert "run.txt" in message and "Rank 71 is the highest rank line" in message and "Init COMPLETE" in message
    assert "--nranks" in message
    geometry = ev.resolve({"nranks": 8})
    assert geometry.value("nranks") == 8 and geometry.nranks.overridden
    assert geometry.nranks.evidence[0] == "--nranks 8 (as passed)"
    assert geometry.notes == ("nranks: --nranks 8 (as passed) overrides 'Rank 71 is the highest rank line'",)


def test_nodes_times_ranks_per_node_must_be_the_ranks():
    ev = GeometryEvidence("run.txt")
    ev.exact("nranks", 16, "16 rank lines")
    ev.exact("nnodes", 2, "hosts of the rank lines: 2")
    ev.exact("ranks_per_node", 4, "localRanks 4 in NCCL INFO")
    with pytest.raises(ParseError, match="nranks = nnodes x ranks_per_node"):
        ev.resolve()


def test_a_derived_value_outside_the_fields_own_bounds_is_an_error():
    ev = GeometryEvidence("run.txt")
    ev.exact("nranks", 16, "16 rank lines")
    ev.exact("nnodes", 2, "2 hosts")
    ev.at_least("ranks_per_node", 9, "device 8 on host a")
    with pytest.raises(ParseError, match="16 ranks / 2 nodes = 8"):
        ev.resolve()
