"""Performance defects of NCCL that NVIDIA has acknowledged, where the tuning model (:mod:`.model`) is wrong.

:mod:`.model` is NCCL's own tuning table: it predicts what NCCL *believes* an algorithm delivers, and NCCL picks
by it. Where NVIDIA has acknowledged that an algorithm runs far below that belief on some geometry, a prediction or
an efficiency verdict that leans on it must say so, with the thread, what was measured, and the variable that
avoids it. One row per defect in :data:`KNOWN_DEFECTS`; :func:`defect_notes` is what ``predict``, ``analyze`` and
``trace`` print.

Only defects with a maintainer's acknowledgement and published figures are rows: a user's report alone is not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from collscope.analysis.nccl_model.model import NcclGraphInputs
from collscope.units import format_size

__all__ = ["KnownDefect", "KNOWN_DEFECTS", "defect_applies", "defect_notes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownDefect:
    """One acknowledged defect: the geometry it hits, what was measured, and the way around it."""

    ref: str
    """The thread, owner/repo#number."""
    algo: str
    """NCCL's algorithm (as :mod:`.model` names it) that runs below its model."""
    ops: tuple[str, ...]
    """collscope op names it was measured on."""
    min_sm: int
    """Lowest compute capability (x10) it was reported on."""
    min_domains: int
    """Fewest NVLink domains (NCCL's nodes) in the communicator it was reported on."""
    measured: str
    """What the thread measured, with the NCCL version."""
    status: str
    """What NVIDIA said and what the fix was, if any."""
    workaround: str
    """The setting that avoided it in the thread."""


KNOWN_DEFECTS: tuple[KnownDefect, ...] = (
    KnownDefect(
        ref="NVIDIA/nccl#2035",
        algo="NVLSTree", ops=("all_reduce",), min_sm=100, min_domains=3,
        measured=("16 nodes of 8 B300 on NCCL 2.29.7: NVLSTree 800 GB/s busbw on 2 nodes but about 200 GB/s on 4, "
                  "8 and 16, where Ring gives 760"),
        status=("NVIDIA called it a known issue; NCCL 2.30.3 adds Blackwell NVLSTree channel and chunk tuning "
                "(src/transport/nvls.cc ncclNvlsTreeSm100Tuning), after which the reporter measured 380 GB/s on "
                "4 nodes with 2.30.4"),
        workaround="NCCL_ALGO=Ring (760 GB/s in the thread)",
    ),
)
"""The defects collscope knows; adding one is one row."""


def defect_applies(defect: KnownDefect, inputs: NcclGraphInputs, op: str, algo: str) -> bool:
    """Whether ``defect`` hits ``algo`` running ``op`` on the geometry of ``inputs``."""
    return (algo == defect.algo and op in defect.ops and inputs.sm >= defect.min_sm
            and inputs.nnodes >= defect.min_domains)


def defect_notes(inputs: NcclGraphInputs, op: str, choices: Iterable[tuple[str, int]]) -> list[str]:
    """One note per known defect that hits an (algorithm, size in bytes) of ``choices`` for ``op`` on this
    geometry, naming the sizes it hits, in table order."""
    pairs = list(choices)
    notes = []
    for d in KNOWN_DEFECTS:
        sizes = sorted({size for algo, size in pairs if defect_applies(d, inputs, op, algo)})
        if sizes:
            notes.append(f"{d.algo} for {op} at {', '.join(format_size(s) for s in sizes)} on {inputs.nnodes} "
                         f"NVLink domains of sm{inputs.sm} GPUs meets a known NCCL defect, {d.ref}: {d.measured}. "
                         f"{d.status}. The model is NCCL's tuning table, which does not know it: expect less than "
                         f"it says there; {d.workaround} avoided it")
    return notes
