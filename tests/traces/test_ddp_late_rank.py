"""A real 2-rank DDP training (gloo, CPU) with one rank made late on purpose, and what ``collscope trace`` says.

``ddp_job.py --late-rank 1 --late-ms 500``: in every step rank 1 sleeps 500 ms just before its all_gather, so
rank 0 waits about that long inside the call. The report must name rank 1 first in ``late_ranks``, put the
others' summed wait within 20% of 500 ms x the active steps, and split every all_gather into a short transfer
and rank 0's wait of about 500 ms (``ddp_job.check_late_rank_report``). Without the delay no rank is waited for
anywhere near that long (the same job as ``test_ddp_gloo.py``, which runs it without the option).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from tests.traces.ddp_job import check_late_rank_report

pytest.importorskip("torch")
HERE = Path(__file__).resolve().parent
LATE_RANK, LATE_MS = 1, 500.0


@pytest.fixture(scope="module")
def late_job(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp-late")
    env = {**os.environ, "PYTHONPATH": str(HERE.parents[1])}
    subprocess.run([sys.executable, str(HERE / "ddp_job.py"), str(out), "--late-rank", str(LATE_RANK),
                    "--late-ms", str(LATE_MS)], check=True, env=env, timeout=180, capture_output=True)
    return out / "traces", json.loads((out / "expected.json").read_text())


def test_the_planted_delay_is_recorded(late_job):
    _, expected = late_job
    assert (expected["late_rank"], expected["late_ms"]) == (LATE_RANK, LATE_MS)


def test_the_late_rank_is_named_and_the_wait_matches_the_delay(late_job):
    traces, expected = late_job
    res = CliRunner().invoke(main, ["trace", str(traces), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    check_late_rank_report(doc, expected)
    planted_us = LATE_MS * 1000
    top = doc["late_ranks"][0]
    print(f"planted {planted_us:.0f} us x {expected['active_steps']} steps on rank {LATE_RANK}; found "
          f"others_waited_us {top['others_waited_us']:.0f}, per all_gather late_by_us "
          f"{[round(c['late_by_us']) for c in doc['collectives'] if c['op'] == 'all_gather' and c['rank'] == 0]}")
    others = [r for r in doc["late_ranks"] if r["rank"] != LATE_RANK]
    assert all(r["others_waited_us"] < 0.2 * planted_us * expected["active_steps"] for r in others), others


def test_the_checks_fail_on_a_report_that_blames_another_rank_or_no_one(late_job):
    """The checks are not vacuous: the same report read as if rank 0 were the planted one, or with the waits
    taken out (what a report that sees no waiting would give), fails them."""
    traces, expected = late_job
    doc = json.loads(CliRunner().invoke(main, ["trace", str(traces), "--json"]).output)
    with pytest.raises(AssertionError):
        check_late_rank_report(doc, {**expected, "late_rank": 1 - LATE_RANK})
    for row in doc["late_ranks"]:
        row["others_waited_us"] = 0.0
    with pytest.raises(AssertionError):
        check_late_rank_report(doc, expected)
