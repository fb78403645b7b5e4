"""Efficiency: a measurement against the model of the algorithm that ran, and that algorithm's own bound.

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
Without a GPU generation, and for Open MPI, the alpha-beta model of the configuration (:func:`.compare.model_name`)
is used and ``algo_source`` says so.

A run's own per-call cost: when a curve measured 3 or more sizes from 64 B to 64 KiB and its fastest call there took
longer than NCCL's model expects at that size, its larger sizes expect the model's time plus that difference
(:func:`run_costs_us`; one process driving all GPUs with ``-g N``, a net plugin's own work: SURF Snellius' H100 node
under ``-g 4`` takes 17-19 us per call from 64 B to 64 KiB where the model gives 10), said in the notes. The cost
excuses a slower call only: the ``suspicious`` threshold stays the model's without it.

Verdict per size: ``suspicious`` when busbw is above the model by more than the model's error margin, or above
the algorithm's bound (:mod:`.bounds`) by more than ``link_tolerance``; ``low`` when below the model by more than
the margin; else ``normal``. The margins and why they are what they are: :class:`~.analyze_options.AnalyzeOptions`; for
NCCL's model they are widened, per size band and scope, to how far published healthy systems fall from it
(:mod:`.model_accuracy`: at 1-8 MiB across nodes 22% below to 37% above), so that ``low`` means lower than
published systems of that size and scope reach against the model, not one flat 15%.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd

from collscope.analysis.bounds import Bound, algorithm_bound, held_time_us, held_to_bound
from collscope.analysis.fit import CONFIG_KEYS
from collscope.analysis.model_accuracy import published_accuracy
from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import ALPHA_BETA_MODELS, alpha_beta_time_us
from collscope.analysis.nccl_model.choice import nccl_choice, size_floor_us
from collscope.analysis.nccl_model.known_defects import defect_notes
from collscope.analysis.nccl_model.measured import measured_extra_us, nvls_rank_notes
from collscope.analysis.nccl_model.model import NcclChoice, NcclGraphInputs, nccl_time_us
from collscope.analysis.nccl_model.p2p import p2p_choice
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.ompi_models import model_for_setting
from collscope.collectives.record import busbw_factor
from collscope.errors import ConfigError
from collscope.units import algbw_gbps, format_size
from collscope.vocab.nccl import ALGORITHMS, OP_FUNC, PROTOCOLS, enabled, parse_selection

__all__ = ["Expected", "Verdict", "Margins", "expected_busbw", "verdict", "NcclInputsCache", "add_expected",
           "model_name", "params_for", "ParamsSource", "Logged", "NO_MODEL_HINT"]

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
                          busbw_gbps=t.expected_busbw_gbps, bound=algorithm_bound(op, t.algo, params))
                 for t in choice.near_ties)
    return Expected(model=f"{choice.algo}/{choice.proto}", kind="nccl", algo_source=source,
                    busbw_gbps=choice.expected_busbw_gbps, bound=algorithm_bound(op, choice.algo, params),
                    near_ties=ties)


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


def _selection(settings: Mapping[str, str], var: str, vocabulary: tuple[str, ...],
               func: str) -> tuple[frozenset[str] | None, str]:
    value = settings.get(var)
    if not value:
        return None, ""
    try:
        return enabled(parse_selection(value, vocabulary, var), func, vocabulary), f"{var}={value}"
    except ConfigError:
        return None, ""


def _nccl_expected(op: str, size: int, settings: Mapping[str, str], params: LinkParams, inputs: NcclGraphInputs,
                   logged: tuple[str, str] | None) -> Expected | None:
    func = OP_FUNC[op]
    algos, algo_text = _selection(settings, "NCCL_ALGO", ALGORITHMS, func)
    protos, proto_text = _selection(settings, "NCCL_PROTO", PROTOCOLS, func)
    if logged is not None:
        algo, proto = logged
        time = nccl_time_us(inputs, op, algo, proto, size) if proto else None
        if time is not None:
            time += measured_extra_us(inputs, op, algo, proto, size)
            time = max(time, size_floor_us(inputs, op, size, algos=algos, protos=protos)[0])
        if time is not None and time > 0:
            time, _ = held_time_us(op, algo, proto, size, time, params, inputs)
            busbw = algbw_gbps(size, time) * busbw_factor(op, params.nranks)
            return Expected(model=f"{algo}/{proto}", kind="nccl", algo_source=SOURCE_LOGGED, busbw_gbps=busbw,
                            bound=algorithm_bound(op, algo, params))
        if not proto and algo in ALGORITHMS:  # the check file names the algorithm only
            try:
                choice = nccl_choice(inputs, op, size, algos=[algo],
                                     protos=sorted(protos) if protos is not None else None)
            except ConfigError:
                choice = None
            if choice is not None:
                choice = held_to_bound(op, choice, params, inputs)
                return _from_choice(op, choice, params, f"{SOURCE_LOGGED} (algorithm; protocol from the model)")
    forced = ", ".join(t for t in (algo_text, proto_text) if t)
    try:
        choice = nccl_choice(inputs, op, size, algos=sorted(algos) if algos is not None else None,
                             protos=sorted(protos) if protos is not None else None)
    except ConfigError:
        return None
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
                   logged: tuple[str, str] | None = None) -> Expected | None:
    """The model of the algorithm that ran for one configuration x size (module doc); None without a model."""
    if size <= 0:
        return None
    on_nccl = backend == "nccl"
    if on_nccl and op in OP_FUNC and inputs is not None:
        found = _nccl_expected(op, size, settings, params, inputs, logged)
        if found is not None:
            return found
    p2p = p2p_choice(params, op, size) if on_nccl and params.gpu is not None else None
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


RUN_FLOOR_MIN_BYTES = 64
RUN_FLOOR_MAX_BYTES = 64 * 1024
"""The sizes whose fastest call gives a run's own per-call cost (:func:`run_costs_us`): from 64 B (below, nccl-tests
prints 0-byte and few-element rows that some ops skip) to 64 KiB, where published curves are still flat (SURF
Snellius' H100 node, one process driving 4 GPUs: 16.7-18.9 us from 64 B to 64 KiB; its 2 nodes: 16-18 us)."""
RUN_FLOOR_MIN_SIZES = 3
"""Sizes in that range a curve needs before its fastest one is taken as its floor (one size could be an outlier of
a warm-up; the fastest of three or more is no longer one call's accident)."""


def _curve_key(row: Mapping[Any, Any]) -> tuple[str, ...]:
    return tuple(str(row.get(k)) for k in CONFIG_KEYS)


@dataclass(frozen=True, slots=True)
class RunCost:
    """A curve's own per-call cost beyond the model (:func:`run_costs_us`)."""

    floor_us: float
    """Its fastest median time at :data:`RUN_FLOOR_MIN_BYTES`-:data:`RUN_FLOOR_MAX_BYTES`."""
    floor_size: int
    """The size of that call."""
    extra_us: float
    """``floor_us`` less the model's expected time at ``floor_size`` (> 0)."""


def run_costs_us(records: list[dict[Any, Any]], expected: Mapping[int, Expected]) -> dict[tuple[str, ...], RunCost]:
    """Per curve (:data:`~.fit.CONFIG_KEYS`: configuration, op, ranks, nodes, in-place, input) that measured
    :data:`RUN_FLOOR_MIN_SIZES` sizes or more from :data:`RUN_FLOOR_MIN_BYTES` to :data:`RUN_FLOOR_MAX_BYTES`: its
    fastest call there, and how much longer it took than NCCL's model expects at that size (``expected``: the
    expected measurement per record index), when it did. Every call of the run pays that cost (a launch, a plugin's
    own work), so a larger size's expected time is the model's plus it (:func:`with_run_cost`)."""
    best: dict[tuple[str, ...], tuple[float, int, int]] = {}
    count: dict[tuple[str, ...], int] = {}
    for i, row in enumerate(records):
        size, time = int(row["size_bytes"]), float(row.get("time_us", math.nan))
        if not RUN_FLOOR_MIN_BYTES <= size <= RUN_FLOOR_MAX_BYTES or not math.isfinite(time) or time <= 0:
            continue
        key = _curve_key(row)
        count[key] = count.get(key, 0) + 1
        if key not in best or time < best[key][0]:
            best[key] = (time, size, i)
    out: dict[tuple[str, ...], RunCost] = {}
    for key, (time, size, i) in best.items():
        exp = expected.get(i)
        if count[key] < RUN_FLOOR_MIN_SIZES or exp is None or exp.kind != "nccl" or not exp.busbw_gbps > 0:
            continue
        row = records[i]
        model_us = busbw_factor(str(row["op"]), int(row["nranks"])) * size / (exp.busbw_gbps * 1e3)
        if time > model_us:
            out[key] = RunCost(floor_us=time, floor_size=size, extra_us=time - model_us)
    return out


def with_run_cost(expected: Expected, op: str, nranks: int, size_bytes: int, extra_us: float) -> Expected:
    """``expected`` (and its near ties) ``extra_us`` slower per call."""
    f = busbw_factor(op, nranks)

    def slower(busbw: float) -> float:
        return f * size_bytes / (f * size_bytes / busbw + extra_us * 1e3) if busbw > 0 else busbw

    ties = tuple(replace(t, busbw_gbps=slower(t.busbw_gbps)) for t in expected.near_ties)
    return replace(expected, busbw_gbps=slower(expected.busbw_gbps), near_ties=ties,
                   algo_source=f"{expected.algo_source}; plus the run's own per-call cost")


# ---- per configuration x size rows ---------------------------------------------------------------------------
NO_MODEL_HINT = "pass --gpu NAME, --topo PATH or --alpha-us A --bw-gbps B"
"""What supplies link parameters when neither the options nor the records do (every command that models a job)."""

ParamsSource = LinkParams | Callable[[int, int], LinkParams | None] | None
Logged = Mapping[tuple[str, str, int], tuple[str, str]]
"""(config, op, size_bytes) -> (algorithm, protocol) NCCL logged for that size."""


def model_name(op: str, backend: str, settings: Mapping[str, str]) -> str | None:
    """The alpha-beta model a configuration is compared with when NCCL's model is not used: the forced Open MPI
    algorithm; for NCCL the ring (the double binary tree for ``NCCL_ALGO=Tree`` all_reduce); for an Open MPI
    default ``"best"``, the fastest model at each size."""
    models = ALPHA_BETA_MODELS.get(op)
    if models is None:
        return None
    forced = model_for_setting(op, settings)
    if forced is not None:
        return forced
    algo = settings.get("NCCL_ALGO", "").strip().lower()
    if algo == "tree" and "double_binary_tree" in models:
        return "double_binary_tree"
    if backend == "mpi":
        return "best"
    return "ring" if "ring" in models else "best"


NNODES_UNKNOWN = ("no efficiency for {nranks} ranks: the records do not say how many nodes they ran on, and the "
                  "models depend on it (pass --nnodes N)")
"""The note of a group whose nodes are unknown: never modelled as one node."""


def params_for(source: ParamsSource, nranks: int, nnodes: int | None, notes: list[str]) -> LinkParams | None:
    """The LinkParams of one (nranks, nnodes) group from ``analyze``'s ``params``; None with a note.

    Unknown ``nnodes`` (None or NA) is never taken for one node: no parameters, and a note naming ``--nnodes``."""
    if source is None:
        return None
    if nnodes is None or pd.isna(nnodes):
        notes.append(NNODES_UNKNOWN.format(nranks=nranks))
        return None
    nodes = int(nnodes)
    if isinstance(source, LinkParams):
        if source.nranks == nranks and source.nnodes == nodes:
            return source
        notes.append(f"no efficiency for {nranks} ranks on {nodes} node(s): the link parameters are for "
                     f"{source.nranks} ranks on {source.nnodes} node(s)")
        return None
    try:
        params = source(nranks, nodes)
    except ConfigError as exc:
        notes.append(f"no efficiency for {nranks} ranks on {nodes} node(s): {exc}")
        return None
    if params is not None:
        notes.extend(c for c in params.caveats if c not in notes)
    return params


@dataclass(frozen=True, slots=True, kw_only=True)
class Margins:
    """The error margins of the verdict (fractions); :class:`~.analyze_options.AnalyzeOptions` says why."""

    nccl: float
    alpha_beta: float
    link: float
    published: bool = False
    """Widen ``nccl`` per size band and scope to how far published systems fall from the model
    (:meth:`~.model_accuracy.BandAccuracy.margins`), never narrow it."""

    def for_nccl(self, op: str, size_bytes: int, params: LinkParams) -> tuple[float, float]:
        """(below, above) the model of NCCL's choice at ``size_bytes`` on ``params``."""
        band = published_accuracy(op, across_domains=params.ndomains > 1, size_bytes=size_bytes) \
            if self.published else None
        widened = band.margins if band is not None else None
        if widened is None:
            return self.nccl, self.nccl
        return max(self.nccl, widened[0]), max(self.nccl, widened[1])


def add_expected(sizes: pd.DataFrame, settings: Mapping[str, Mapping[str, str]], source: ParamsSource,
                 margins: Margins, notes: list[str], used: dict[str, Any], logged: Logged | None = None) -> None:
    """Fill, in place, per sizes row: ``model``, ``model_kind``, ``algo_source``, ``model_busbw_gbps``,
    ``efficiency``, ``bound_algo``, ``bound_busbw_gbps``, ``bound_limited_by``, ``margin`` (below the model),
    ``margin_above`` and ``verdict``."""
    n = len(sizes)
    cols: dict[str, list[Any]] = {k: [None] * n for k in ("model", "model_kind", "algo_source", "bound_algo",
                                                          "bound_limited_by", "verdict")}
    nums = {k: np.full(n, np.nan) for k in ("model_busbw_gbps", "bound_busbw_gbps", "margin", "margin_above")}
    cache: dict[tuple[int, Any], LinkParams | None] = {}
    nccl = NcclInputsCache()
    modelled: dict[tuple[int, str], tuple[NcclGraphInputs, list[tuple[str, int]]]] = {}
    records = sizes.to_dict(orient="records")
    found: list[tuple[int, Expected, LinkParams, NcclGraphInputs | None]] = []
    for i, row in enumerate(records):
        op, nranks, size, config = str(row["op"]), int(row["nranks"]), int(row["size_bytes"]), str(row["config"])
        backend, conf = str(row["backend"]), settings.get(config, {})
        ab_name = model_name(op, backend, conf)
        cols["model"][i] = ab_name
        key = (nranks, row["nnodes"])
        if key not in cache:
            cache[key] = params_for(source, nranks, row["nnodes"], notes) if nranks >= 2 else None
            if cache[key] is not None:
                used[f"{nranks}x{cache[key].nnodes}"] = cache[key].to_dict()  # type: ignore[union-attr]
        params = cache[key]
        if params is None:
            continue
        inputs = nccl.get(params) if backend == "nccl" else None
        exp = expected_busbw(op, backend, size, conf, params, ab_name, inputs,
                             (logged or {}).get((config, op, size)))
        if exp is not None:
            found.append((i, exp, params, inputs))
    costs = run_costs_us(records, {i: exp for i, exp, _, _ in found})
    raised: dict[tuple[str, str, float, float, int], list[int]] = {}  # (curve, op, cost, floor, at) -> sizes
    for i, exp, params, inputs in found:
        row = records[i]
        op, nranks, size = str(row["op"]), int(row["nranks"]), int(row["size_bytes"])
        cost = costs.get(_curve_key(row))
        unpriced = exp.busbw_gbps
        if cost is not None and exp.kind == "nccl" and size > RUN_FLOOR_MAX_BYTES:
            exp = with_run_cost(exp, op, nranks, size, cost.extra_us)
            label = f"{row['config']}{' in-place' if row.get('in_place') is True else ''}"
            raised.setdefault((label, op, cost.extra_us, cost.floor_us, cost.floor_size), []).append(size)
        busbw = float(row["busbw_gbps"])
        margin, above = margins.for_nccl(op, size, params) if exp.kind == "nccl" else (margins.alpha_beta,) * 2
        if exp.busbw_gbps < unpriced:  # the cost excuses a slower call; only the model without it makes one suspicious
            above = unpriced * (1 + above) / exp.busbw_gbps - 1
        exp = matched_tie(busbw, exp, margin=margin, link_tolerance=margins.link, margin_above=above)
        if inputs is not None and exp.kind == "nccl":
            modelled.setdefault((id(inputs), op), (inputs, []))[1].append((exp.model.split("/")[0], size))
        cols["model"][i], cols["model_kind"][i], cols["algo_source"][i] = exp.model, exp.kind, exp.algo_source
        cols["bound_algo"][i], cols["bound_limited_by"][i] = exp.bound.algo, exp.bound.limited_by
        nums["model_busbw_gbps"][i], nums["bound_busbw_gbps"][i] = exp.busbw_gbps, exp.bound.busbw_gbps
        nums["margin"][i], nums["margin_above"][i] = margin, above
        if math.isfinite(busbw) and math.isfinite(exp.busbw_gbps) and exp.busbw_gbps > 0:
            cols["verdict"][i] = verdict(busbw, exp, margin=margin, link_tolerance=margins.link, margin_above=above)
    for k, v in cols.items():
        sizes[k] = v
    for k, a in nums.items():
        sizes[k] = a
    sizes["efficiency"] = sizes["busbw_gbps"] / sizes["model_busbw_gbps"]
    notes.extend(nccl.notes)
    for (label, op, extra_us, floor_us, at), held in raised.items():
        shown = format_size(min(held)) + (f"-{format_size(max(held))}" if len(held) > 1 else "")
        notes.append(f"{op} {label}: this run's fastest call of sizes {format_size(RUN_FLOOR_MIN_BYTES)}-"
                     f"{format_size(RUN_FLOOR_MAX_BYTES)} takes {floor_us:.1f} us (size {format_size(at)}), "
                     f"{extra_us:.1f} us more than the model's time there: a per-call cost of this setup the model "
                     "does not price (one process driving all GPUs, -g N; a net plugin's own cost), added to the "
                     f"expected time at {shown}")
    for (_, op), (inputs, choices) in modelled.items():
        notes.extend(n for n in defect_notes(inputs, op, choices) + nvls_rank_notes(inputs, op, choices)
                     if n not in notes)
    if source is None:
        notes.append(f"efficiency not computed: no link parameters, and no GPU named by the results ({NO_MODEL_HINT}; "
                     "in Python, analyze(df, params=LinkParams(...)))")
