"""The model of the algorithm that ran, for one configuration x size, and the verdict of a measurement against it.

Which algorithm ran, per configuration and size (the first that applies; ``algo_source`` says which):

1. ``"NCCL log"``: NCCL's own choice for this size, from the point's debug log (``points/<id>.log`` TUNING
   lines) or the algorithm its settings check saw (``points/<id>.check.json``), :mod:`.logged_choices`;
2. ``"forced (NCCL_ALGO=...)"``: the configuration forces NCCL_ALGO (and/or NCCL_PROTO): NCCL's model picks
   among what the setting leaves enabled (one algorithm: that one);
3. ``"collscope's model of NCCL's choice"``: :func:`~.nccl_model.choice.nccl_choice` on the topology;
   alltoall (grouped point-to-point, outside NCCL's tuning model) :func:`~.nccl_model.p2p.p2p_choice`.

For NCCL that needs a GPU generation (``LinkParams.gpu``); the model is then NCCL's cost model of that
(algorithm, protocol) plus what nccl-tests measures beyond it (:func:`~.nccl_model.measured.measured_extra_us`: the
size ramp of Simple, the LL step latency, the network's per-call cost, NVLS's cost per rank of a large domain).
Without a GPU generation, and for Open MPI, the alpha-beta model of the configuration
(:func:`.efficiency.model_name`) is used and ``algo_source`` says so.

Verdict per size: ``suspicious`` when busbw is above the model by more than the model's error margin, or above
the algorithm's bound (:mod:`.bounds`) by more than ``link_tolerance``; ``low`` when below the model by more than
the margin; else ``normal``. The margins and why they are what they are: :class:`~.analyze_options.AnalyzeOptions`; for
NCCL's model they are widened, per size band and scope, to how far published healthy systems fall from it
(:mod:`.model_accuracy`: at 1-8 MiB across nodes 22% below to 37% above), so that ``low`` means lower than
published systems of that size and scope reach against the model, not one flat 15%.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from collscope.analysis.bounds import Bound, algorithm_bound, held_time_us, held_to_bound
from collscope.analysis.model_settings import model_settings
from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import ALPHA_BETA_MODELS, alpha_beta_time_us
from collscope.analysis.nccl_model.choice import nccl_choice, nvls_ceiling_us, size_floor_us
from collscope.analysis.nccl_model.measured import measured_extra_us
from collscope.analysis.nccl_model.model import NcclChoice, NcclGraphInputs, nccl_time_us
from collscope.analysis.nccl_model.nothing_left import ring_fallback
from collscope.analysis.nccl_model.p2p import p2p_choice
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.collectives.record import busbw_factor
from collscope.errors import ConfigError
from collscope.units import algbw_gbps
from collscope.vocab.nccl import ALGORITHMS, OP_FUNC

__all__ = ["Expected", "Verdict", "expected_busbw", "verdict", "matched_tie", "NcclInputsCache", "SOURCE_MODELLED",
           "SOURCE_LOGGED", "SOURCE_P2P"]

Verdict = Literal["normal", "low", "suspicious"]
SOURCE_MODELLED = "collscope's model of NCCL's choice"
SOURCE_LOGGED = "NCCL log"
SOURCE_P2P = ("collscope's model of NCCL's grouped point-to-point (nccl_model.p2p, its terms fitted on published "
              "alltoall results)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What a configuration should reach at one size."""

    model: str
    """``"NVLSTree/Simple"`` (NCCL's model of that pair) or an alpha-beta model name (``"ring"``)."""
    kind: Literal["nccl", "alpha-beta"]
    algo_source: str
    """How the algorithm that ran was known (module doc)."""
    busbw_gbps: float
    bound: Bound
    ceiling_gbps: float = 0.0
    """Above ``busbw_gbps``, NVLS's own rate where NCCL's graph holds its table lower inside one NVLink domain
    (:attr:`.nccl_model.model.NcclChoice.ceiling_busbw_gbps`): a measurement is ``suspicious`` only above this one's
    margin (:func:`.efficiency.add_expected`); 0 where ``busbw_gbps`` is the ceiling."""
    near_ties: tuple[Expected, ...] = ()
    """NCCL's model's near ties of a modelled choice (:data:`.nccl_model.choice.NEAR_TIE`): when the measurement is
    outside the margin of the choice but inside one of these, that pair is what ran as far as collscope can tell."""


def _from_choice(op: str, choice: NcclChoice, params: LinkParams, source: str) -> Expected:
    """The expected measurement of a modelled choice, with its near ties."""
    ties = tuple(Expected(model=f"{t.algo}/{t.proto}", kind="nccl",
                          algo_source=(f"{source}: its near tie {t.algo}/{t.proto} "
                                       f"({t.time_us / choice.time_us - 1:.1%} slower in NCCL's model than "
                                       f"{choice.algo}/{choice.proto}, closer than collscope calls), which the "
                                       "measurement matches"),
                          busbw_gbps=t.expected_busbw_gbps, bound=algorithm_bound(op, t.algo, params),
                          ceiling_gbps=t.ceiling_busbw_gbps)
                 for t in choice.near_ties)
    return Expected(model=f"{choice.algo}/{choice.proto}", kind="nccl", algo_source=source,
                    busbw_gbps=choice.expected_busbw_gbps, bound=algorithm_bound(op, choice.algo, params),
                    ceiling_gbps=choice.ceiling_busbw_gbps, near_ties=ties)


class NcclInputsCache:
    """NCCL's graph inputs per LinkParams, computed once; None where NCCL's model cannot run."""

    def __init__(self) -> None:
        self._cache: dict[int, NcclGraphInputs | None] = {}
        self.notes: list[str] = []

    def get(self, params: LinkParams) -> NcclGraphInputs | None:
        key = id(params)
        if key not in self._cache:
            inputs = None
            if params.gpu is not None:
                try:
                    inputs = graph_inputs_from_topology(params)
                except ConfigError as exc:
                    self.notes.append(f"NCCL's model not used for {params.nranks} ranks: {exc}")
            self._cache[key] = inputs
        return self._cache[key]


class _NothingToRun(Exception):
    """The configuration's settings leave NCCL's model no (algorithm, protocol) for the op (NCCL_ALGO=NVLS with
    NCCL_NVLS_ENABLE=0, NVLS on a GPU without it): no model, rather than another model's figure."""


def _nccl_expected(op: str, size: int, settings: Mapping[str, str], params: LinkParams, inputs: NcclGraphInputs,
                   logged: tuple[str, str] | None, release: str | None = None) -> Expected | None:
    read = model_settings(settings, op)
    algos, protos = read.algos, read.protos
    inputs = read.applied_to(inputs)
    if logged is not None:
        algo, proto = logged
        time = nccl_time_us(inputs, op, algo, proto, size) if proto else None
        if time is not None:
            time += measured_extra_us(inputs, op, algo, proto, size)
            time = max(time, size_floor_us(inputs, op, size, algos=algos, protos=protos)[0])
        if time is not None and time > 0:
            time, _ = held_time_us(op, algo, proto, size, time, params, inputs)
            busbw = algbw_gbps(size, time) * busbw_factor(op, params.nranks)
            ceiling = nvls_ceiling_us(inputs, op, algo, proto, size, time)
            return Expected(model=f"{algo}/{proto}", kind="nccl", algo_source=SOURCE_LOGGED, busbw_gbps=busbw,
                            bound=algorithm_bound(op, algo, params),
                            ceiling_gbps=algbw_gbps(size, ceiling) * busbw_factor(op, params.nranks)
                            if ceiling > 0 else 0.0)
        if not proto and algo in ALGORITHMS:  # the check file names the algorithm only
            try:
                choice = nccl_choice(inputs, op, size, algos=[algo],
                                     protos=sorted(protos) if protos is not None else None)
            except ConfigError:
                choice = None
            if choice is not None:
                choice = held_to_bound(op, choice, params, inputs)
                return _from_choice(op, choice, params, f"{SOURCE_LOGGED} (algorithm; protocol from the model)")
    forced = read.forced
    try:
        choice = nccl_choice(inputs, op, size, algos=sorted(algos) if algos is not None else None,
                             protos=sorted(protos) if protos is not None else None)
    except ConfigError:
        if not forced:
            return None
        fallback = ring_fallback(release, OP_FUNC[op]) if release else None
        if fallback is None:
            raise _NothingToRun(forced) from None
        ring_inputs, ring_protos = fallback.applied_to(inputs, protos)
        choice = nccl_choice(ring_inputs, op, size, algos=["Ring"], protos=ring_protos)
        return _from_choice(op, held_to_bound(op, choice, params, ring_inputs), params,
                            f"forced ({forced}); NCCL {release} puts Ring back (nccl_model/nothing_left.py)")
    source = f"forced ({forced})" if forced else SOURCE_MODELLED
    return _from_choice(op, held_to_bound(op, choice, params, inputs), params, source)


def _alpha_beta_expected(op: str, size: int, name: str, params: LinkParams, source: str) -> Expected:
    if name == "best":
        algo = min(ALPHA_BETA_MODELS[op], key=lambda a: alpha_beta_time_us(op, a, params, size))
    else:
        algo = name
    time = alpha_beta_time_us(op, algo, params, size)
    busbw = algbw_gbps(size, time) * busbw_factor(op, params.nranks) if time > 0 else float("nan")
    return Expected(model=name, kind="alpha-beta", algo_source=source, busbw_gbps=busbw,
                    bound=algorithm_bound(op, algo, params))


def expected_busbw(op: str, backend: str, size: int, settings: Mapping[str, str], params: LinkParams,
                   ab_model: str | None, inputs: NcclGraphInputs | None,
                   logged: tuple[str, str] | None = None, release: str | None = None) -> Expected | None:
    """The model of the algorithm that ran for one configuration x size (module doc); None without a model.
    ``release``: the NCCL release the configuration's records name, which decides what NCCL runs when its
    NCCL_ALGO/NCCL_PROTO leave the op nothing (:func:`.nccl_model.nothing_left.ring_fallback`)."""
    if size <= 0:
        return None
    on_nccl = backend == "nccl"
    if on_nccl and op in OP_FUNC and inputs is not None:
        try:
            found = _nccl_expected(op, size, settings, params, inputs, logged, release)
        except _NothingToRun:
            return None
        if found is not None:
            return found
    p2p = (p2p_choice(params, op, size, model_settings(settings, op).p2p)
           if on_nccl and params.gpu is not None else None)
    if p2p is not None:
        pattern = next(iter(ALPHA_BETA_MODELS[op]))  # its exchange: alltoall pairwise, gather linear, sendrecv shift
        return Expected(model=f"{p2p.algo}/{p2p.proto}", kind="nccl", algo_source=SOURCE_P2P,
                        busbw_gbps=p2p.expected_busbw_gbps, bound=algorithm_bound(op, pattern, params))
    if ab_model is None:
        return None
    if on_nccl:
        source = ("alpha-beta (no GPU generation for NCCL's model)" if op in OP_FUNC
                  else "alpha-beta (NCCL runs it as grouped point-to-point: no NCCL tuning model)")
    elif ab_model == "best":
        source = "alpha-beta, fastest at this size (Open MPI picks per size)"
    else:
        source = "alpha-beta of the configured algorithm"
    return _alpha_beta_expected(op, size, ab_model, params, source)


def verdict(busbw_gbps: float, expected: Expected, *, margin: float, link_tolerance: float,
            margin_above: float | None = None) -> Verdict:
    """normal / low / suspicious (module doc); ``margin`` below the model, ``margin_above`` above it (None: the
    same)."""
    eff = busbw_gbps / expected.busbw_gbps
    above = margin if margin_above is None else margin_above
    if eff > 1 + above or busbw_gbps > expected.bound.busbw_gbps * (1 + link_tolerance):
        return "suspicious"
    return "low" if eff < 1 - margin else "normal"


def matched_tie(busbw_gbps: float, expected: Expected, *, margin: float, link_tolerance: float,
                margin_above: float | None = None) -> Expected:
    """``expected``, or the near tie (:attr:`Expected.near_ties`) the measurement is normal against when it is not
    normal against ``expected`` (of several, the one closest to it); measurements that are no number stay with
    ``expected``."""
    if not expected.near_ties or not math.isfinite(busbw_gbps) or not expected.busbw_gbps > 0:
        return expected
    def judged(e: Expected) -> Verdict:
        return verdict(busbw_gbps, e, margin=margin, link_tolerance=link_tolerance, margin_above=margin_above)
    if judged(expected) == "normal":
        return expected
    normal = [t for t in expected.near_ties if t.busbw_gbps > 0 and judged(t) == "normal"]
    return min(normal, key=lambda t: abs(math.log(busbw_gbps / t.busbw_gbps)), default=expected)
