"""How many GPUs each node of the allocation has, with the evidence it was read from (pure).

``--gpus-per-node G`` overrides everything. Without it the allocation's own environment says it (sbatch(1),
srun(1), Slurm's ``gres_common.c``), on the node that runs locate:

- ``SLURM_GPUS_ON_NODE``: the number of GPUs allocated to the batch step on this node (``8``);
- ``SLURM_GPUS_PER_NODE``: the ``--gpus-per-node=[type:]N`` request, set only when it was given (``h100:8``;
  several types are comma-separated and add up);
- ``SLURM_JOB_GPUS``: the global ids of the job's GPUs on this node (``0,1,2,3,4,5,6,7``);
- ``SLURM_GRES``: srun's ``--gres`` (``gpu:8``, ``gpu:h100:8``, ``gres/gpu:8``; ``none``: no GPU), which every
  step locate starts inherits.

Sources that disagree are an error naming both (the option settles it). None of them set: the count is unknown
(``value`` None), never guessed: locate then keeps the host engines (:mod:`collscope.locate.engines`) and sweeps
leave srun's GPU options out (:func:`collscope.sweeps.environment.launch_options`). The count is the launching
node's; both assume every node of the allocation has as many. The one home of this fact for every command.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from collscope.errors import ConfigError

__all__ = ["GpuCount", "gpus_per_node", "GPU_VARIABLES"]

GPU_VARIABLES = ("SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE", "SLURM_JOB_GPUS", "SLURM_GRES")
"""The allocation's variables read, in the order their evidence is shown."""


@dataclass(frozen=True, slots=True)
class GpuCount:
    """GPUs per node, or ``None`` when nothing says; ``evidence`` says where the value came from."""

    value: int | None
    evidence: str

    def describe(self) -> str:
        """``8 GPUs per node (SLURM_GPUS_ON_NODE=8)`` / ``GPUs per node unknown (...)``."""
        if self.value is None:
            return f"GPUs per node unknown ({self.evidence})"
        return f"{self.value} GPU{'' if self.value == 1 else 's'} per node ({self.evidence})"

    def to_dict(self) -> dict[str, int | str | None]:
        return {"value": self.value, "evidence": self.evidence}


_COUNT = re.compile(r"\d+")
_GPU_REQUEST = re.compile(r"(?:[^:,]+:)?(\d+)")  # [type:]N


def _bad(name: str, value: str, valid: str) -> ConfigError:
    return ConfigError(f"{name}={value!r} is not a GPU count Slurm writes; valid: {valid} (or give "
                       "--gpus-per-node G, which overrides the allocation's variables)")


def _count(name: str, value: str) -> int | None:
    """What one variable says about the GPUs per node (``None``: nothing, as a ``--gres`` of other kinds)."""
    text = value.strip()
    if name == "SLURM_GPUS_ON_NODE":
        if not _COUNT.fullmatch(text):
            raise _bad(name, value, "a whole number such as 8")
        return int(text)
    if name == "SLURM_GPUS_PER_NODE":
        requests = [_GPU_REQUEST.fullmatch(item.strip()) for item in text.split(",")]
        if not all(requests):
            raise _bad(name, value, "[type:]N, comma-separated per type, such as 8 or h100:8")
        return sum(int(m.group(1)) for m in requests if m is not None)
    if name == "SLURM_JOB_GPUS":
        ids: set[int] = set()
        for item in text.split(","):
            lo, dash, hi = item.strip().partition("-")
            if not _COUNT.fullmatch(lo) or (dash and not _COUNT.fullmatch(hi)) or (dash and int(hi) < int(lo)):
                raise _bad(name, value, "GPU ids separated by commas, such as 0,1,2,3")
            ids.update(range(int(lo), int(hi if dash else lo) + 1))
        return len(ids)
    if text.lower() == "none":
        return 0
    found = [n for n in (_gres_gpus(item) for item in text.split(",")) if n is not None]
    return sum(found) if found else None


def _gres_gpus(item: str) -> int | None:
    """GPUs of one ``--gres`` entry: ``gpu`` (1), ``gpu:N``, ``gpu:TYPE``, ``gpu:TYPE:N``, ``gres/gpu:N``; None
    for another kind (``nic:1``)."""
    name, *rest = item.strip().removeprefix("gres/").removeprefix("gres:").split(":")
    if name != "gpu":
        return None
    if rest and _COUNT.fullmatch(rest[-1]) and len(rest) <= 2:
        return int(rest[-1])
    return 1 if len(rest) <= 1 else None


def gpus_per_node(option: int | None, environ: Mapping[str, str]) -> GpuCount:
    """GPUs per node: ``option`` (``--gpus-per-node``) if given, else the allocation's variables (module docstring).

    Raises ConfigError when a variable is not in Slurm's format or two of them disagree.
    """
    if option is not None:
        if option < 0:
            raise ConfigError(f"--gpus-per-node {option} is invalid; valid: 0 (test the host network) or the "
                              "GPU count of a node")
        return GpuCount(option, f"--gpus-per-node {option}, given")
    said: list[tuple[str, str, int]] = []
    for name in GPU_VARIABLES:
        value = environ.get(name, "")
        count = _count(name, value) if value.strip() else None
        if count is not None:
            said.append((name, value, count))
    if not said:
        return GpuCount(None, f"none of {', '.join(GPU_VARIABLES)} is set")
    counts = {count for _, _, count in said}
    if len(counts) > 1:
        first, other = said[0], next(s for s in said if s[2] != said[0][2])
        raise ConfigError(f"the allocation disagrees on GPUs per node: {first[0]}={first[1]} says {first[2]}, "
                          f"{other[0]}={other[1]} says {other[2]}; give --gpus-per-node G")
    return GpuCount(counts.pop(), ", ".join(f"{name}={value}" for name, value, _ in said))
