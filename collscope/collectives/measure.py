"""What every measurement of a size ladder fixes, whoever asks for it: the sizes, the iterations, the element
type and whether values are checked (:class:`MeasureSpec`).

One harness run (:class:`~collscope.collectives.spec.BenchSpec`) and a whole sweep
(:class:`~collscope.sweeps.spec.SweepSpec`) both extend it, so each of these fields has one definition, one
default, one docstring and one check.

Sizes follow nccl-tests: ``size = min_bytes; size <= max_bytes; size *= factor`` (``-b``, ``-e``, ``-f``).
A multiplicative ladder cannot start at 0 (0 x factor stays 0; nccl-tests would repeat size 0 forever), and a
0-byte collective moves nothing, so ``min_bytes`` must be > 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from collscope.errors import ConfigError
from collscope.vocab.ops import ELEM_BYTES

__all__ = ["MeasureSpec", "Dtype", "DTYPES", "ELEM_SIZE"]

Dtype = Literal["float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8"]
"""Element types by collscope's names (the nccl-tests launcher maps them to nccl-tests' ``-d`` names)."""
DTYPES: tuple[str, ...] = get_args(Dtype)
ELEM_SIZE: dict[str, int] = {name: ELEM_BYTES[name] for name in DTYPES}
"""Bytes per element of each :data:`Dtype` (:data:`collscope.vocab.ops.ELEM_BYTES`, the one table of types)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureSpec:
    """The measurement fields shared by a harness run and a sweep; subclasses call :meth:`check_measure`."""

    min_bytes: int = 8
    """Smallest size of the ladder (nccl-tests ``-b``), total bytes as in nccl-tests' "size" column; > 0."""
    max_bytes: int = 1 << 20
    """Largest size of the ladder (nccl-tests ``-e``); >= ``min_bytes``."""
    factor: float = 2.0
    """Multiply the size by this between steps (nccl-tests ``-f``); > 1."""
    iters: int = 20
    """Iterations timed as one batch per size (nccl-tests ``-n``); >= 1."""
    warmup: int = 5
    """Untimed iterations before each size's batch (every size gets its own warm-up); >= 0."""
    dtype: Dtype = "float32"
    """Element type. The MPI harness has no float16/bfloat16 reductions."""
    check: bool = True
    """After timing each size, run it once more on rank-dependent values and count wrong elements exactly;
    in a sweep a point with wrong values is recorded as a failure."""

    def __post_init__(self) -> None:
        self.check_measure()

    def check_measure(self) -> None:
        """ConfigError naming the field, the bad value and the valid ones."""
        if not 0 < self.min_bytes <= self.max_bytes:
            raise ConfigError(f"sizes must satisfy 0 < min_bytes <= max_bytes, got min_bytes={self.min_bytes} "
                              f"and max_bytes={self.max_bytes}")
        if not self.factor > 1:
            raise ConfigError(f"factor must be > 1, got {self.factor}")
        if self.iters < 1:
            raise ConfigError(f"iters must be >= 1, got {self.iters}")
        if self.warmup < 0:
            raise ConfigError(f"warmup must be >= 0, got {self.warmup}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"unknown dtype {self.dtype!r}; valid: {', '.join(DTYPES)}")
        if not isinstance(self.check, bool):
            raise ConfigError(f"check must be true or false, got {self.check!r}")
