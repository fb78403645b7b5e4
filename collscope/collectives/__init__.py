"""Collectives: the Measurement record, message sizes, rank discovery, the benchmark spec; harnesses
(``collectives.harness``), nccl-tests (``collectives.nccl_tests``) and NCCL debug logs (``collectives.nccl_log``).

Names load on first use, so the per-rank ``collscope bench`` path imports only what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.collectives.nccl_log.parse import parse_nccl_log, read_nccl_log
    from collscope.collectives.nccl_tests.parse import parse_nccl_tests
    from collscope.collectives.ranks import RankInfo, expand_nodelist, rank_info
    from collscope.collectives.record import OPS, Measurement, append_jsonl, busbw_factor, write_jsonl
    from collscope.collectives.sizes import call_count, size_ladder, size_list
    from collscope.collectives.spec import BENCH_DTYPES, BENCH_OPS, BenchSpec

__all__ = [
    "BENCH_DTYPES",
    "BENCH_OPS",
    "BenchSpec",
    "Measurement",
    "OPS",
    "RankInfo",
    "append_jsonl",
    "busbw_factor",
    "call_count",
    "expand_nodelist",
    "parse_nccl_log",
    "parse_nccl_tests",
    "rank_info",
    "read_nccl_log",
    "size_ladder",
    "size_list",
    "write_jsonl",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.collectives.nccl_log.parse": ["parse_nccl_log", "read_nccl_log"],
        "collscope.collectives.nccl_tests.parse": ["parse_nccl_tests"],
        "collscope.collectives.ranks": ["RankInfo", "expand_nodelist", "rank_info"],
        "collscope.collectives.record": [
            "OPS",
            "Measurement",
            "append_jsonl",
            "busbw_factor",
                    "write_jsonl",
        ],
        "collscope.collectives.sizes": ["call_count", "size_ladder", "size_list"],
        "collscope.collectives.spec": ["BENCH_DTYPES", "BENCH_OPS", "BenchSpec"],
    })
