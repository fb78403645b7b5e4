"""A node-failure message names the node that failed, never the node that reported it (issue 26 item 5).

slurmstepd prints ``*** STEP 21.1 ON node1 CANCELLED ... DUE TO NODE FAILURE ***`` on the nodes that are still up,
so the node after ``ON`` is a survivor; srun's ``Node failure on node2`` and ``sinfo`` name the node that failed.
The texts below are in the shape srun and slurmstepd printed them on the simulated cluster when node2 was killed
(tests/multinode/test_faults.py), with host names of their own.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from collscope.results.store import ResultsDir
from collscope.sweeps.attempt import record_cancelled, resumed_failure
from collscope.sweeps.diagnose import launch_diagnosis
from collscope.sweeps.termination import SweepTerminated, parse_nodes_down, slurm_nodes_down
from tests.fakes import Answer, FakeTools

STEP_CANCELLED = ("slurmstepd-cn07: error: *** STEP 412.3 ON cn07 CANCELLED AT 2026-12-02T06:41:09 DUE TO NODE "
                  "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
SRUN_LOST_CN08 = f"""\
[cn07][[51022,0],0][btl_tcp_frag.c:127:mca_btl_tcp_frag_send] peer: cn08 writev failed: Connection reset (104)
srun: error: Node failure on cn08
{STEP_CANCELLED}
srun: Job step aborted: Waiting up to 7 seconds for job step to finish.
srun: error: cn07: task 0: Exited with exit code 14
"""


def test_the_failed_node_comes_first_and_the_reporter_is_not_blamed() -> None:
    words = launch_diagnosis(SRUN_LOST_CN08)
    assert words is not None
    assert words.startswith("node failure on cn08; "), words
    assert "Slurm cancelled step 412.3 because cn08 failed (slurmstepd on cn07, which stayed up" in words, words
    assert "on cn07 due to node failure" not in words, words
    assert words.index("cn08") < words.index("cn07")


def test_a_cancellation_alone_says_another_node_failed() -> None:
    """A sweep stopped by SIGTERM often has only the stepd's line: it must not read as cn07's failure."""
    words = launch_diagnosis(STEP_CANCELLED + "\n")
    assert words == ("Slurm cancelled step 412.3 because another node of the step failed (slurmstepd on cn07, which "
                     "stayed up, reported the cancellation; `sinfo -R` names the node Slurm set down)")
    job = launch_diagnosis("slurmstepd: error: *** JOB 412 ON cn07 CANCELLED AT 2026-12-02T06:41:09 DUE TO NODE "
                           "FAILURE ***\n")
    assert job is not None and job.startswith("Slurm cancelled job 412 because another node of the job failed"), job


def test_other_cancellations_keep_their_cause() -> None:
    words = launch_diagnosis("slurmstepd: error: *** STEP 412.3 ON cn07 CANCELLED AT 2026-12-02T06:41:09 DUE TO TIME "
                             "LIMIT ***\n")
    assert words == "Slurm cancelled step 412.3 on cn07 due to time limit"


def test_new_words_are_still_a_node_lost_under_the_point() -> None:
    """A resume measures such a point again without --retry-failed (the NODE_LOST words)."""
    for text in (SRUN_LOST_CN08, STEP_CANCELLED):
        assert resumed_failure("exit code", f"exit code 143 ({launch_diagnosis(text)})")


def test_sinfo_lines_down_with_their_reason() -> None:
    # sinfo -h -N -o '%N|%T|%E' lists a node once per partition; 'none' is Slurm's empty reason
    text = "cn07|allocated|none\ncn08|down*|Not responding\ncn10|idle|none\ncn08|down*|Not responding\n" \
           "cn09|drained|Kill task failed\n"
    assert parse_nodes_down(text) == ["cn08 down* (Not responding)", "cn09 drained (Kill task failed)"]


@pytest.fixture
def sinfo_cn08_down(fake_tools: FakeTools, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tools.add("sinfo", {"-h -N -n * -o %N|%T|%E": Answer(
        stdout="cn07|allocated|none\ncn08|down*|Not responding\n")})
    monkeypatch.setenv("SLURM_JOB_NODELIST", "cn[07-08]")


@pytest.mark.usefixtures("sinfo_cn08_down")
def test_slurm_names_the_node_it_set_down() -> None:
    assert slurm_nodes_down() == "cn08 down* (Not responding)"


@pytest.mark.usefixtures("sinfo_cn08_down")
def test_a_point_cancelled_by_a_node_failure_names_the_failed_node_first(tmp_path: Path) -> None:
    results = ResultsDir(tmp_path / "res")
    results.prepare("s-1", {"name": "s"}, {"points": []}, {})
    exc = SweepTerminated("the sweep was stopped by SIGTERM")
    previous = signal.getsignal(signal.SIGTERM)
    try:
        record_cancelled(results, "p-1", exc, STEP_CANCELLED + "\n", "srun", 3.0)
    finally:
        signal.signal(signal.SIGTERM, previous)
    detail = results.failures()["p-1"].detail or ""
    assert "Slurm reports down: cn08 down* (Not responding)" in detail, detail
    assert detail.index("cn08") < detail.index("cn07"), detail
    assert "on cn07 due to node failure" not in detail, detail


def test_a_step_refused_by_a_job_already_ending_is_measured_again_on_resume() -> None:
    """After node2 died, the canary's next point asked job 80 for a step while Slurm was cancelling it: that point
    says nothing about its configuration, so a resume measures it again (as for the point the node died under);
    srun's other refusals stay failures of the point."""
    ending = "srun: error: Unable to create step for job 80: Job/step already completing or completed\n"
    words = launch_diagnosis(ending)
    assert words == ("the job was ending: srun could not start the step (Unable to create step for job 80: "
                     "Job/step already completing or completed)")
    assert resumed_failure("exit code", f"exit code 1 ({words})")
    other = launch_diagnosis("srun: error: Unable to create step for job 18: Duplicate job id\n")
    assert other is not None and not resumed_failure("exit code", f"exit code 1 ({other})")
