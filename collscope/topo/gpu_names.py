"""How a GPU string names a row of collscope's GPU tables.

nvidia-smi, CUDA, nccl-tests and rocm-smi print long names ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB",
"AMD Instinct MI300X"); the tables (:mod:`collscope.topo.gpus`, :mod:`collscope.topo.unmodelled_gpus`) hold short
ones ("H100", "V100 PCIe", "MI300X"). One reading of a name serves both tables.
"""

from __future__ import annotations

import re

__all__ = ["PLACEHOLDER", "gpu_text", "name_matches"]

_QUALIFIERS = ("PCIE", "NVL", "SXM3")
"""Words that tell a form factor apart from its base name ("H100 PCIe" is not "H100")."""

PLACEHOLDER = re.compile(r"(NVIDIA\s+)?Graphics\s+Device", re.IGNORECASE)
"""The name nvidia-smi and CUDA give a GPU that the driver's name table does not list yet."""


def gpu_text(model: str) -> str:
    """``model`` upper-cased, each run of spaces and underscores one space: the text :func:`name_matches` reads."""
    return re.sub(r"[\s_]+", " ", model.upper())


def name_matches(name: str, text: str) -> bool:
    """``name`` ("H100", "H100 PCIe") in a :func:`gpu_text` string: the base as a word not followed by a digit
    ("B200" is not in "GB200"; "H100" is in "H100-SXM5"), a qualifier anywhere as a word ("A100 80GB PCIe")."""
    words = name.upper().split()
    qualifier = words.pop() if len(words) > 1 and words[-1] in _QUALIFIERS else None
    base = r"(?<![A-Z0-9])" + re.escape(" ".join(words)) + r"(?![0-9])"
    if not re.search(base, text):
        return False
    return qualifier is None or re.search(r"(?<![A-Z0-9])" + qualifier + r"(?![A-Z0-9])", text) is not None
