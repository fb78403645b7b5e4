"""The real runner: each test is ``repeats`` Slurm job steps (``srun -w NODES ...``), each bounded by a timeout.

:class:`SrunRunner` is a :data:`~collscope.locate.model.Runner`: called from one thread per test of a round, it
runs the test's steps one after the other through :func:`collscope.proc.run` (argv list, timeout, the whole
process group killed on timeout, and killed too if locate itself dies), reads rank 0's record (or parses
nccl-tests' table) and returns the busbw samples. A non-zero exit or a missing record is ``failed``; a step
that outlives ``timeout_s`` is ``timeout`` (srun, killed, cancels the step on every node). A step that fails is
run once more before it counts, since a launch can fail on its own on healthy nodes (Open MPI 5's MPI_Init can
crash with SIGSEGV in ob1 when a peer's first message arrives before MPI_COMM_WORLD is set up:
open-mpi/ompi#11438, #13559; seen here once in a 4-node step); the retry and the failed step's log are kept in
the outcome's ``detail`` and ``logs``. A second failure ends the test; a timeout ends it at once (a hang costs a
whole timeout and is evidence enough). A failure whose output says the launch itself cannot work (the allocation
forbids the step, the program is missing, PMIx: :func:`collscope.locate.launch.classify_launch`) carries that in
the outcome's ``launch``; when every test of a round says the same, locate stops and names no node.

Step files go to ``work_dir`` (made absolute: a step's ranks may start in another directory): ``<id>.jsonl``
(rank 0's record) and ``<id>.log`` (the step's output); the directory must be visible from every node (a shared
file system, not a node's /tmp). Each record carries the test's rail (``rail``: the interface or HCA its step
was pinned to, None for a test on every rail), whatever the ranks inherited.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from collscope import proc
from collscope.collectives.record import Measurement, Settings
from collscope.errors import CollscopeError
from collscope.files import absolute_path
from collscope.locate.launch import classify_launch
from collscope.locate.model import LaunchFailure, TestOutcome, TestSpec
from collscope.locate.steps import StepOptions, launch_env, rail_env, ranks_per_node, step_argv
from collscope.results.decode import read_jsonl
from collscope.results.logs import create_log
from collscope.vocab.configs import rail_of

__all__ = ["SrunRunner"]

_log = logging.getLogger(__name__)

_LAUNCH_FAILURE = ("Unable to create step", "Invalid node name", "not responding", "Required node not available",
                   "Node failure", "Job step creation", "DUE TO TIME LIMIT", "CANCELLED")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for needle in _LAUNCH_FAILURE:
        for line in reversed(lines):
            if needle in line:
                return line[-300:]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or [""])[-1][-300:]


@dataclass(kw_only=True)
class SrunRunner:
    options: StepOptions
    work_dir: Path
    timeout_s: float = 120.0
    """Kill bound of one step (startup, warm-up and the timed iterations)."""
    env: Mapping[str, str] | None = None
    """Environment of the steps (default: this process's); the rail's variables are added on top."""
    _ids: Any = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise CollscopeError(f"timeout {self.timeout_s!r} s is invalid; valid: seconds > 0")
        self.work_dir = absolute_path(self.work_dir, "locate's step directory")  # steps start on other nodes
        self.work_dir.mkdir(parents=True, exist_ok=True)

    def _next_id(self, spec: TestSpec) -> str:
        with self._lock:
            n = next(self._ids)
        rail = "all" if spec.rail is None else f"r{spec.rail}"
        return f"s{os.getpid()}-{n:04d}-{spec.kind}-{rail}"

    def _parse(self, spec: TestSpec, out: Path, log: str, rail: dict[str, str]) -> list[Measurement]:
        if self.options.row.records_from == "stdout":  # nccl-tests' table
            from collscope.collectives.nccl_tests import parse_nccl_tests

            return list(parse_nccl_tests(log, source="all_reduce_perf", op="all_reduce").records)
        # rank 0's --out, made by the step: a link planted under its name is refused, never read through
        return read_jsonl(out, follow_links=False) if os.path.lexists(out) else []

    def _step(self, spec: TestSpec, rail: dict[str, str]) -> tuple[Measurement | None, TestOutcome | None, float, str]:
        """One job step: (its all_reduce record, or the failure it ended in; seconds spent; its log path)."""
        step = self._next_id(spec)
        out = self.work_dir / f"{step}.jsonl"
        log = self.work_dir / f"{step}.log"
        with create_log(log) as step_log:  # O_EXCL | O_NOFOLLOW: a link planted under the name is moved aside
            if step_log.note:
                _log.warning("%s", step_log.note)
            result = proc.run(step_argv(spec, self.options, out), timeout_s=self.timeout_s, env=self.env,
                              extra_env={**launch_env(spec, self.options, self.env or os.environ), **rail},
                              output_path=step_log.output_path, kill_on_parent_death=True,
                              install_hint="run locate inside a Slurm allocation (sbatch slurm/locate.sh, salloc)")
        where = f" (step log {log})"
        if result.timed_out:
            return None, TestOutcome(failure="timeout", detail=f"no end within {self.timeout_s:g} s: "
                                     f"{_last_line(result.stdout)}{where}"), result.duration_s, str(log)
        try:
            got = self._parse(spec, out, result.stdout, rail)
        except CollscopeError as exc:
            return None, TestOutcome(failure="failed", detail=f"unreadable output: {exc}{where}"), \
                result.duration_s, str(log)
        mine = [r for r in got if r.op == "all_reduce"]
        if result.returncode != 0 or not mine or not all(r.ok for r in mine):
            why = f"exit code {result.returncode}" if result.returncode != 0 else "no record"
            if mine and not all(r.ok for r in mine):
                why = "wrong values"
            launch = None if mine else self._launch_failure(spec, result.stdout)
            return None, TestOutcome(failure="failed", detail=f"{why}: {_last_line(result.stdout)}{where}",
                                     launch=launch), result.duration_s, str(log)
        return max(mine, key=lambda r: r.size_bytes), None, result.duration_s, str(log)

    def _launch_failure(self, spec: TestSpec, text: str) -> LaunchFailure | None:
        program = self.options.nccl_tests_binary if self.options.row.program == "nccl-tests" else self.options.python
        return classify_launch(text, ranks_per_node=ranks_per_node(spec, self.options), test_kind=spec.kind,
                               environ=self.env or os.environ, program=program, srun_mpi=self.options.srun_mpi)

    def __call__(self, spec: TestSpec, repeats: int) -> TestOutcome:
        rail = rail_env(spec.rail, self.options)
        samples: list[float] = []
        times: list[float] = []
        records: list[Measurement] = []
        spent = 0.0
        logs: list[str] = []
        retried: list[str] = []
        for repeat in range(repeats):
            record, failure, seconds, log = self._step(spec, rail)
            spent += seconds
            logs.append(log)
            if failure is not None and failure.failure == "failed" and not retried:
                retried.append(f"repeat {repeat + 1} failed once and was run again: {failure.detail}")
                record, failure, seconds, log = self._step(spec, rail)
                spent += seconds
                logs.append(log)
            if failure is not None:
                return TestOutcome(failure=failure.failure, detail="; ".join([*retried, failure.detail]),
                                   duration_s=spent, logs=tuple(logs), launch=failure.launch)
            assert record is not None
            samples.append(record.busbw_gbps)
            times.append(record.time_us)
            settings = Settings({**record.settings, **rail})
            records.append(msgspec.structs.replace(record, repeat=repeat, settings=settings, source=log,
                                                   rail=rail_of(rail)))  # the test's rail; None: every rail
        return TestOutcome(busbw_gbps=tuple(samples), time_us=tuple(times), duration_s=spent,
                           records=tuple(records), logs=tuple(logs), detail="; ".join(retried))
