"""Locate: find the slow or broken node, link or rail of an allocation in about log2 N rounds of parallel tests.

A pure planner and judge drive a *runner* (``runner(spec, repeats) -> TestOutcome``): :func:`locate` runs every
node alone, a group test per rail, then rounds of halves and pairs against known-good nodes until every bad
test is explained. :class:`SrunRunner` runs the tests as Slurm job steps; :class:`SimFabric` simulates a
fabric (slow nodes or rails, dead and broken nodes) for tests and the bench. Node lists use Slurm's syntax
(:func:`parse_nodelist`, :func:`format_nodelist`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.locate.model import LocateConfig, LocateResult, Suspect, TestOutcome, TestResult, TestSpec
    from collscope.locate.nodelist import format_nodelist, parse_nodelist
    from collscope.locate.render import render_text
    from collscope.locate.search import locate
    from collscope.locate.simulate import SimFabric
    from collscope.locate.srun import SrunRunner
    from collscope.locate.steps import StepOptions

__all__ = [
    "LocateConfig",
    "LocateResult",
    "SimFabric",
    "SrunRunner",
    "StepOptions",
    "Suspect",
    "TestOutcome",
    "TestResult",
    "TestSpec",
    "format_nodelist",
    "locate",
    "parse_nodelist",
    "render_text",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.locate.model": ["LocateConfig", "LocateResult", "Suspect", "TestOutcome", "TestResult",
                                   "TestSpec"],
        "collscope.locate.nodelist": ["format_nodelist", "parse_nodelist"],
        "collscope.locate.render": ["render_text"],
        "collscope.locate.search": ["locate"],
        "collscope.locate.simulate": ["SimFabric"],
        "collscope.locate.srun": ["SrunRunner"],
        "collscope.locate.steps": ["StepOptions"],
    })
