"""Outputs people hand to ``--topo`` / ``topo show --from`` that are not topology captures, each with what to
capture instead: one row per kind, so that the error says what the file is rather than where its first line
failed a parser (an ``nvidia-smi topo -p2p`` matrix looks like ``topo -m`` until its first cell).

Shapes, as published: ``nvidia-smi topo -p2p r|w|n|a|p`` prints a GPU x GPU matrix of P2P capability (``OK``,
``NS``, ``CNS`` Chipset not supported, ``GNS``, ``TNS``, ``DR`` Disabled by regkey in newer drivers, ``U``), with or
without its ``Legend:`` and a ``P2P Connectivity Matrix`` title, tabs or spaces; hwloc's ``lstopo --of xml``
(``<topology version="2.0">`` with ``<object type="Machine">``, the ``hwloc2.dtd`` doctype), which cloud images ship
next to NCCL's own topology files (aws-ofi-nccl's test fixtures hold both kinds).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from collscope.sniff import first_accepting

__all__ = ["ForeignFormat", "FOREIGN_FORMATS", "foreign_format"]

_SNIFF_CHARS = 65536

_P2P_CELLS = frozenset({"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"})
"""The cells of ``nvidia-smi topo -p2p`` besides ``X`` (its legend)."""
_GPU_ROW = re.compile(r"^[ \t]*GPU\d+[ \t]+(\S.*)$", re.MULTILINE)
_GPU_NAME = re.compile(r"GPU\d+")
_P2P_LEGEND = "= Chipset not supported"


def _looks_like_p2p_matrix(text: str) -> bool:
    """GPU rows whose cells are all P2P capabilities (a one-GPU matrix, ``GPU0 X``: its legend)."""
    head = text[:_SNIFF_CHARS]
    cells = {cell for m in _GPU_ROW.finditer(head) for cell in m.group(1).split()
             if cell != "X" and not _GPU_NAME.fullmatch(cell)}  # the header row names the GPUs
    if cells:
        return cells <= _P2P_CELLS
    return _P2P_LEGEND in head


def _looks_like_hwloc_xml(text: str) -> bool:
    head = text[:4096]
    return "<topology" in head and ("hwloc" in head or '<object type="Machine"' in head)


@dataclass(frozen=True, slots=True)
class ForeignFormat:
    """An output that is not a topology capture: what it is, and what to capture instead."""

    what: str
    looks_like: Callable[[str], bool]
    instead: str


FOREIGN_FORMATS: tuple[ForeignFormat, ...] = (
    ForeignFormat("`nvidia-smi topo -p2p` output (which GPU pairs may use peer-to-peer, not how they connect)",
                  _looks_like_p2p_matrix,
                  "`nvidia-smi topo -m` for how the GPUs and NICs connect (collscope topo collect captures it)"),
    ForeignFormat("an hwloc topology (`lstopo --of xml`), which NCCL does not read",
                  _looks_like_hwloc_xml,
                  "NCCL's own topology: NCCL_TOPO_DUMP_FILE=<file> on any NCCL run writes it (or the captures of "
                  "collscope topo collect)"),
)


def foreign_format(text: str) -> ForeignFormat | None:
    """The row of :data:`FOREIGN_FORMATS` that ``text`` is, or None."""
    return first_accepting(FOREIGN_FORMATS, text)
