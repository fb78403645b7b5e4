"""NCCL's choice at a size and what nccl-tests is expected to measure for it.

The choice is NCCL's: the (algorithm, protocol) of the smallest time in NCCL's model (:mod:`.model`). The expected
measurement is collscope's: NCCL's time plus :func:`.measured.measured_extra_us`, at least :func:`size_floor_us`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from collscope.analysis.model_types import Prediction
from collscope.analysis.nccl_model import measured
from collscope.analysis.nccl_model.model import (
    NcclChoice,
    NcclGraphInputs,
    nccl_bandwidth,
    nccl_predictions,
    nvls_graph_cap,
)
from collscope.errors import ConfigError
from collscope.units import format_size_span

__all__ = ["FLOOR_FACTORS", "NEAR_TIE", "size_floor_us", "nccl_choice", "nvls_ceiling_us", "nvls_ceiling_note",
           "NVLS_CEILING_PUBLISHED", "nvls_ceiling_predict_note"]

NEAR_TIE = 0.05
"""A lead in NCCL's model smaller than this (5% of the choice's time) is not one collscope calls: NCCL's versions move
the protocol and algorithm thresholds by that much. Between NCCL 2.19's and 2.30's tables collscope's model changes
its choice at 86 of the 767 distinct scorecard sizes (bench/scorecard/published.csv), and at 30 of those the other
version's pick is within 5% of the choice in 2.30's model (bench/near_tie_versions.py prints them); the sources ran
2.18 to 2.29. Derived from the tables, not fitted on published figures."""


FLOOR_FACTORS = (2, 4, 8, 16, 32, 64)
"""The multiples k of a size whose expected time / k floors its own (:func:`nccl_choice`). A message of k x S can be
sent as k calls of S, so a measurement at S cannot take less than 1/k of the one at k x S: busbw does not fall as
the size grows. NCCL's model plus the fitted terms can break that where its choice changes protocol: on 8 A100,
Ring/LL128 (no size ramp) at 16 MiB expects 169 GB/s and Ring/Simple (with its ramp) at 32 MiB 121 GB/s, where
Azure's published curve rises from 109 to 133 GB/s. Derived, not fitted; up to 64 x, past the sizes where NCCL's
model switches protocol."""


def _ranked(inputs: NcclGraphInputs, op: str, size_bytes: int, version: str, algos: Iterable[str] | None,
            protos: Iterable[str] | None) -> list[Prediction]:
    """The enabled (algorithm, protocol) pairs fastest first in NCCL's model; ties keep index order."""
    preds = nccl_predictions(inputs, op, [size_bytes], version=version, algos=algos, protos=protos)
    return sorted(preds, key=lambda p: p.time_us)


def _best(inputs: NcclGraphInputs, op: str, size_bytes: int, version: str, algos: Iterable[str] | None,
          protos: Iterable[str] | None) -> Prediction | None:
    ranked = _ranked(inputs, op, size_bytes, version, algos, protos)
    return ranked[0] if ranked else None


def _expected_us(inputs: NcclGraphInputs, op: str, best: Prediction, version: str) -> float:
    return best.time_us + measured.measured_extra_us(inputs, op, best.algo, best.proto or "", best.size_bytes,
                                                     version=version)


def size_floor_us(inputs: NcclGraphInputs, op: str, size_bytes: int, *, version: str = "2.30",
                  algos: Iterable[str] | None = None, protos: Iterable[str] | None = None) -> tuple[float, int]:
    """The floor of the expected time at ``size_bytes`` (:data:`FLOOR_FACTORS`): the largest expected time of NCCL's
    model's choice at k x the size, divided by k, and that larger size; (0.0, 0) when no larger size is modelled.
    ``algos``/``protos`` restrict the choices as in :func:`nccl_choice`."""
    algos = list(algos) if algos is not None else None
    protos = list(protos) if protos is not None else None
    floor, floor_from = 0.0, 0
    for k in FLOOR_FACTORS:
        larger = _best(inputs, op, k * int(size_bytes), version, algos, protos)
        if larger is not None and (share := _expected_us(inputs, op, larger, version) / k) > floor:
            floor, floor_from = share, k * int(size_bytes)
    return floor, floor_from


def nccl_choice(inputs: NcclGraphInputs, op: str, size_bytes: int, *, version: str = "2.30",
                algos: Iterable[str] | None = None, protos: Iterable[str] | None = None) -> NcclChoice:
    """The (algorithm, protocol) of the smallest time; ties keep the first in index order (nccl-facts 1.6).
    ``algos``/``protos`` restrict the candidates like NCCL_ALGO / NCCL_PROTO. The expected measurement is NCCL's
    time plus :func:`.measured.measured_extra_us`, at least :func:`size_floor_us`."""
    algos = list(algos) if algos is not None else None
    protos = list(protos) if protos is not None else None
    ranked = _ranked(inputs, op, int(size_bytes), version, algos, protos)
    if not ranked:
        raise ConfigError(f"no NCCL algorithm/protocol is enabled for {op} with these inputs")
    floor, larger = size_floor_us(inputs, op, size_bytes, version=version, algos=algos, protos=protos)
    best, *others = ranked
    ties = tuple(_choice(inputs, op, p, version, floor, larger) for p in others
                 if p.time_us <= best.time_us * (1 + NEAR_TIE))
    return replace(_choice(inputs, op, best, version, floor, larger), near_ties=ties)


def _choice(inputs: NcclGraphInputs, op: str, pred: Prediction, version: str, floor: float,
            larger: int) -> NcclChoice:
    """``pred`` as a choice, with its expected measurement: NCCL's time plus the measured terms, at least the floor."""
    expected, floor_from = _expected_us(inputs, op, pred, version), 0
    if floor > expected * (1 + 1e-9):
        expected, floor_from = floor, larger
    ceiling = nvls_ceiling_us(inputs, op, pred.algo, pred.proto or "", pred.size_bytes, expected, version=version)
    return NcclChoice(size_bytes=pred.size_bytes, algo=pred.algo, proto=pred.proto or "", time_us=pred.time_us,
                      busbw_gbps=pred.busbw_gbps, expected_time_us=expected,
                      expected_busbw_gbps=pred.busbw_gbps * pred.time_us / expected if expected > 0 else 0.0,
                      ceiling_busbw_gbps=pred.busbw_gbps * pred.time_us / ceiling if ceiling > 0 else 0.0,
                      floor_from_bytes=floor_from)


def nvls_ceiling_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, expected_us: float, *,
                    version: str = "2.30") -> float:
    """The expected time of NVLS at its own rate inside one NVLink domain where NCCL's graph holds its table lower
    (:func:`.model.nvls_graph_cap`): ``expected_us`` with the bandwidth term at the intra term's rate and NVLS's
    shortest step (:func:`.measured.nvls_step_us`) at that rate (where the step sets the pace, a faster rate gains
    nothing), the latency and the other measured terms as they are; 0.0 for the other algorithms and where the graph
    does not hold it."""
    if algo != "NVLS" or expected_us <= 0 or size_bytes <= 0:
        return 0.0
    factor = nvls_graph_cap(inputs, op, version=version)
    bw = nccl_bandwidth(inputs, op, algo, proto, version=version) if factor > 1.0 else 0.0
    if bw <= 0:
        return 0.0
    time = (expected_us - size_bytes / (1000 * bw) * (1 - 1 / factor)
            - measured.nvls_step_us(inputs, op, algo, proto, size_bytes, version=version)
            + measured.nvls_step_us(inputs, op, algo, proto, size_bytes, version=version, rate_factor=factor))
    return time if time > 0 else 0.0


NVLS_CEILING_PUBLISHED = ("published healthy 8-GPU sm100 systems measure 835-892 GB/s at 4-16 GiB (GCP A4 B200, OCI "
                          "B300, OCI GB300 and GB200 2 trays, GCP A4X GB200 2 trays: bench/scorecard/published.csv)")
"""What the ceiling (:func:`nvls_ceiling_us`) is held against; tests/analysis/test_nvls_ceiling.py checks it on the
published rows."""


_GRAPH_CAP = ("nChannels x bwInter (bwInter stops at the top of NCCL's speed array, 90 GB/s on sm100: "
              "src/graph/search.cc)")
_OWN_RATE = "NVLS's own rate inside one NVLink domain"
_INTRA_TERM = "bwIntra x nvlsEfficiency, src/graph/tuning.cc"


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"


def nvls_ceiling_note(what: str, kept: list[tuple[int, float, float]]) -> str:
    """analyze's note where measurements above NCCL's NVLS table stay ``normal`` under NVLS's own rate; ``kept``
    holds (size, expected busbw, ceiling busbw) per such measurement."""
    sizes, expected, ceiling = [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]
    return (f"{what} at {format_size_span(sizes)}: above the {_span(expected)} GB/s expected from NCCL's NVLS table, "
            f"which NCCL's graph holds at {_GRAPH_CAP}, and within the margin of {_OWN_RATE} ({_span(ceiling)} GB/s: "
            f"{_INTRA_TERM}): judged normal; "
            f"{NVLS_CEILING_PUBLISHED}")


def nvls_ceiling_predict_note(op: str, choices: Iterable[NcclChoice]) -> list[str]:
    """predict's note naming the sizes whose NVLS choice has a ceiling above its expected measurement."""
    held = [c for c in choices if c.ceiling_busbw_gbps > c.expected_busbw_gbps > 0]
    if not held:
        return []
    span = _span([c.ceiling_busbw_gbps for c in held])
    return [f"NVLS of {op} at {format_size_span(c.size_bytes for c in held)}: the expected measurement is NCCL's "
            f"NVLS table, held by NCCL's graph at {_GRAPH_CAP}; at {_OWN_RATE} ({_INTRA_TERM}) it is {span} GB/s, and "
            f"analyze calls a measurement suspicious only beyond that one's margin; {NVLS_CEILING_PUBLISHED}"]
