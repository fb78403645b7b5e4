"""Recommendations: the best configuration per message-size range where it beats the default beyond
noise, judged by the time it saves on a workload (``read_workload``), rendered as ``export`` lines
(``render_env``), JSON (``render_json``) or tuner-plugin CSV rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.analysis.recommend.core import recommend, render_json
    from collscope.analysis.recommend.env import render_env
    from collscope.analysis.recommend.logged import logged_algorithms
    from collscope.analysis.recommend.records import EnvChoice, GroupKey, Recommendation, RecommendOptions, SizeRange
    from collscope.analysis.recommend.tuner import TUNER_COLUMNS, TunerRule, render_tuner, tuner_rules
    from collscope.analysis.recommend.workload import Workload, WorkloadEntry, parse_workload, read_workload

__all__ = [
    "EnvChoice",
    "GroupKey",
    "RecommendOptions",
    "Recommendation",
    "SizeRange",
    "TUNER_COLUMNS",
    "TunerRule",
    "Workload",
    "WorkloadEntry",
    "logged_algorithms",
    "parse_workload",
    "read_workload",
    "recommend",
    "render_env",
    "render_json",
    "render_tuner",
    "tuner_rules",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.analysis.recommend.core": ["recommend", "render_json"],
        "collscope.analysis.recommend.env": ["render_env"],
        "collscope.analysis.recommend.records": [
            "EnvChoice",
            "GroupKey",
            "Recommendation",
            "RecommendOptions",
            "SizeRange",
        ],
        "collscope.analysis.recommend.tuner": ["TUNER_COLUMNS", "TunerRule", "render_tuner", "tuner_rules"],
        "collscope.analysis.recommend.logged": ["logged_algorithms"],
        "collscope.analysis.recommend.workload": ["Workload", "WorkloadEntry", "parse_workload", "read_workload"],
    })
