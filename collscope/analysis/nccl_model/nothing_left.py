"""What NCCL does when the job's NCCL_ALGO / NCCL_PROTO leave a collective no (algorithm, protocol) it can run
(``NCCL_ALGO=NVLS`` on A100, which has no NVLS; ``NCCL_ALGO=Tree`` for all_gather), release by release, read from
src/graph/tuning.cc ``ncclTopoTuneModel`` and src/enqueue.cc ``getAlgoInfo`` at each tag:

- up to 2.18: a collective other than AllReduce keeps Ring whatever NCCL_ALGO says ("Never disable ring for
  non-allreduce operations", v2.18.5), with the protocols NCCL enables; an AllReduce left nothing stops the call
  ("Error : no algorithm/protocol available");
- 2.19 to 2.21: NCCL puts Ring back with every protocol ("at least set ring algo available": the Ring bandwidths are
  kept before the protocol masks, ``ringbdw``), LL128 included where its default rule or NCCL_PROTO leaves it off;
- 2.22 and 2.23: Ring back with the protocols NCCL enables (``ringbdw`` zeroed where ``pEnable`` is 0);
- from 2.24 (v2.24.3 on): no fallback: the call stops ("Error : no algorithm/protocol available for function ...").

A release collscope cannot read (a table name such as ``2.30`` counts as that release) is taken as its number says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from collscope.analysis.nccl_model.model import NcclGraphInputs
from collscope.vocab.nccl import release_major_minor

__all__ = ["RingFallback", "NCCL_NO_ALGORITHM_ERROR", "ring_fallback"]

NCCL_NO_ALGORITHM_ERROR = "Error : no algorithm/protocol available"
"""The words NCCL's getAlgoInfo stops the call with (src/enqueue.cc, 2.18.5 to 2.30.7)."""


@dataclass(frozen=True, slots=True)
class RingFallback:
    """Ring as NCCL runs it when the settings leave nothing: ``every_protocol`` where NCCL restores each protocol's
    Ring bandwidth whatever NCCL_PROTO and LL128's default rule say (2.19-2.21), else the protocols NCCL enables."""

    every_protocol: bool
    why: str

    def applied_to(self, inputs: NcclGraphInputs, protos: Iterable[str] | None
                   ) -> tuple[NcclGraphInputs, list[str] | None]:
        """(NCCL's graph inputs, the protocols Ring may use) as NCCL runs the fallback: every protocol, LL128 on
        whatever its default rule says (2.19-2.21), else the ``protos`` the job's settings allow."""
        if self.every_protocol:
            return replace(inputs, ll128_forced=True), None
        return inputs, None if protos is None else sorted(protos)


@dataclass(frozen=True, slots=True)
class _Rule:
    first: tuple[int, int]
    last: tuple[int, int]
    all_reduce_too: bool
    every_protocol: bool
    does: str
    read_at: str
    """The tags of src/graph/tuning.cc it was read at, and NCCL's comment there."""


_RULES = (
    _Rule((0, 0), (2, 18), False, False, "never disables Ring for a collective other than AllReduce",
          "v2.18.5: 'Never disable ring for non-allreduce operations'"),
    _Rule((2, 19), (2, 21), True, True, "puts Ring back, with every protocol, when the settings leave nothing",
          "v2.19.4 to v2.21.5: 'at least set ring algo available'"),
    _Rule((2, 22), (2, 23), True, False,
          "puts Ring back, with the protocols it enables, when the settings leave nothing",
          "v2.22.3 and v2.23.4: 'at least set ring algo available'"),
)
"""One row per range of releases with a fallback (module doc); the releases after the last stop the call."""


def ring_fallback(release: str, func: str) -> RingFallback | None:
    """What NCCL ``release`` runs when the job's settings leave the NCCL function ``func`` (``"AllReduce"``,
    ``"AllGather"``) nothing (module doc); None where NCCL stops the call instead."""
    parsed = release_major_minor(release)
    for rule in _RULES:
        if parsed is not None and rule.first <= parsed <= rule.last and (rule.all_reduce_too or func != "AllReduce"):
            return RingFallback(every_protocol=rule.every_protocol,
                                why=f"NCCL {release} {rule.does} (src/graph/tuning.cc, {rule.read_at})")
    return None
