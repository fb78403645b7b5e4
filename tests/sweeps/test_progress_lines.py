"""Without a terminal (a Slurm .out file) a sweep prints one line per finished point with elapsed time and ETA."""

from __future__ import annotations

from collscope.sweeps.runner import PointOutcome, progress_line


def test_progress_line_has_count_status_elapsed_and_eta() -> None:
    line = progress_line(3, 21, "all-reduce-default-r0-abc", PointOutcome("all-reduce-default-r0-abc", "done"), 1.6,
                         4.8)
    assert line == "[3/21] point all-reduce-default-r0-abc: done in 1.6s; elapsed 5s, ETA 29s"


def test_failed_points_say_why_and_long_runs_read_in_minutes() -> None:
    failed = PointOutcome("p", "failed", "timeout", "point timed out after 600 s")
    line = progress_line(10, 40, "p", failed, 600.2, 3725.0)
    assert line == "[10/40] point p: FAILED timeout (point timed out after 600 s) in 600.2s; elapsed 1h02m, ETA 3h06m"
