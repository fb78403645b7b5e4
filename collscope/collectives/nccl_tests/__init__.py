"""nccl-tests: build the command line, run the binary, parse its text or ``-J`` JSON output (and rccl-tests'
``-Z json|csv`` results files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.collectives.nccl_tests.json import parse_nccl_tests_json
    from collscope.collectives.nccl_tests.parse import looks_like_nccl_tests, parse_nccl_tests
    from collscope.collectives.nccl_tests.rccl_results import parse_rccl_tests_results
    from collscope.collectives.nccl_tests.records import NcclTestsRun
    from collscope.collectives.nccl_tests.run import (
        NcclTestsSpec,
        find_nccl_tests_binary,
        nccl_tests_argv,
        run_nccl_tests,
    )

__all__ = [
    "NcclTestsRun",
    "NcclTestsSpec",
    "find_nccl_tests_binary",
    "looks_like_nccl_tests",
    "nccl_tests_argv",
    "parse_nccl_tests",
    "parse_nccl_tests_json",
    "parse_rccl_tests_results",
    "run_nccl_tests",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.collectives.nccl_tests.json": ["parse_nccl_tests_json"],
        "collscope.collectives.nccl_tests.parse": ["looks_like_nccl_tests", "parse_nccl_tests"],
        "collscope.collectives.nccl_tests.rccl_results": ["parse_rccl_tests_results"],
        "collscope.collectives.nccl_tests.records": ["NcclTestsRun"],
        "collscope.collectives.nccl_tests.run": [
            "NcclTestsSpec",
            "find_nccl_tests_binary",
            "nccl_tests_argv",
            "run_nccl_tests",
        ],
    })
