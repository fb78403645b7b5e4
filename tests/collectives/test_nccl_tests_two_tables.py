"""Two tables pasted in one post, each under a label (``2.19.3:`` then ``2.20.3``) and without a run header
(NVIDIA/nccl#1222's shape; the fixture is our own numbers): two runs, never one run holding every size twice
(which would pool two NCCL versions as repeats of one measurement)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collscope.collectives.nccl_tests.parse import parse_nccl_tests
from collscope.collectives.nccl_tests.runs import parse_nccl_tests_runs
from collscope.errors import ParseError

POST = Path(__file__).resolve().parents[1] / "fixtures" / "canary_results" / "two-tables-one-post.txt"


def test_each_table_is_a_run_of_its_own() -> None:
    runs = parse_nccl_tests_runs(POST.read_text(), source=POST.name, op="all_reduce", nranks=16)
    assert len(runs) == 2
    for run in runs:
        sizes = [r.size_bytes for r in run.records if not r.in_place]
        assert sizes == sorted(set(sizes)) and len(sizes) == 5  # 1G..16G once each
    first, second = (sorted(r.busbw_gbps for r in run.records if not r.in_place) for run in runs)
    assert max(second) < min(first)  # the second table (2.20.3) is the slower one, kept apart
    assert runs[1].warnings[0].startswith("run 2 of 2 in this input")


def test_one_run_per_call_says_a_second_run_starts() -> None:
    with pytest.raises(ParseError, match="a second run starts here"):
        parse_nccl_tests(POST.read_text(), POST.name, "all_reduce", nranks=16)
