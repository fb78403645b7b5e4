"""A node that stops answering mid-point: srun aborts the step and gives up waiting for its tasks, often before
slurmstepd's CANCELLED line reaches the log. The point's configuration is not at fault, so a resume measures it
again (seen on the simulated cluster with `local-cluster.sh kill` under a canary: 4 of 15 runs left the point
failed for good and the verdict one block short)."""

from __future__ import annotations

from collscope.sweeps.attempt import resumed_failure
from collscope.sweeps.diagnose import launch_diagnosis

SRUN_GAVE_UP = """\
srun: Job step aborted: Waiting up to 32 seconds for job step to finish.
srun: error: Timed out waiting for job step to complete
"""


def test_a_step_srun_gave_up_on_is_a_node_lost_and_resumed() -> None:
    words = launch_diagnosis(SRUN_GAVE_UP)
    assert words == "a node is not answering: srun timed out waiting for the step's tasks to end"
    assert resumed_failure("exit code", f"exit code 14 ({words})")
    assert resumed_failure("timeout", f"timeout after 60 s (srun could not start the step (x); {words})")


def test_a_failure_of_the_configuration_is_not_resumed() -> None:
    assert not resumed_failure("exit code", "exit code 1 (node1: task 0: exited with exit code 1)")
