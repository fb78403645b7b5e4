"""The per-rank benchmark harnesses: mpi4py (``harness.mpi``) and torch.distributed (``harness.torch``).

Names load on first use: ``import collscope.collectives.harness.mpi`` imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.collectives.harness.mpi import check_mpi_spec, import_mpi, run_mpi_bench
    from collscope.collectives.harness.torch import import_torch, run_torch_bench

__all__ = [
    "check_mpi_spec",
    "import_mpi",
    "import_torch",
    "run_mpi_bench",
    "run_torch_bench",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.collectives.harness.mpi": ["check_mpi_spec", "import_mpi", "run_mpi_bench"],
        "collscope.collectives.harness.torch": ["import_torch", "run_torch_bench"],
    })
