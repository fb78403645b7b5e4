"""Efficiency: per configuration x size of a results frame, the measurement against the model of the algorithm that
ran and that algorithm's own bound, with its verdict (:func:`add_expected`).

The model of one configuration x size and the verdict against it: :mod:`.expected`. A run that measured small
sizes and pays more per call there than NCCL's model says has that cost added to its larger sizes: :mod:`.run_cost`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.expected import Expected, NcclInputsCache, expected_busbw, matched_tie, verdict
from collscope.analysis.model_accuracy import published_accuracy
from collscope.analysis.model_settings import (
    ModelSettings,
    ll128_forced_text,
    model_settings,
    nics_left_text,
    unmodelled_text,
)
from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.models import ALPHA_BETA_MODELS
from collscope.analysis.nccl_model.channel_limits import BoundChannels, bound_channels, channel_bound_note
from collscope.analysis.nccl_model.choice import nvls_ceiling_note
from collscope.analysis.nccl_model.known_defects import defect_notes
from collscope.analysis.nccl_model.measured import fitted_term_notes
from collscope.analysis.nccl_model.model import NcclGraphInputs, ll128_default_off
from collscope.analysis.nccl_model.p2p import P2P_ALGO, P2P_LL_MODEL, p2p_channel_notes, p2p_ll_note
from collscope.analysis.nccl_model.p2p_rules import p2p_tuning_notes
from collscope.analysis.ompi_models import model_for_setting
from collscope.analysis.run_cost import (
    RUN_FLOOR_MAX_BYTES,
    RUN_FLOOR_MIN_BYTES,
    curve_key,
    run_costs_us,
    time_busbw_gbps,
    with_run_cost,
)
from collscope.errors import ConfigError
from collscope.units import format_size, format_size_span

__all__ = ["Margins", "add_expected", "model_name", "params_for", "ParamsSource", "Logged", "NO_MODEL_HINT",
           "measured_busbw"]


# ---- per configuration x size rows ---------------------------------------------------------------------------
NO_MODEL_HINT = "pass --gpu NAME, --topo PATH or --alpha-us A --bw-gbps B"
"""What supplies link parameters when neither the options nor the records do (every command that models a job)."""

ParamsSource = LinkParams | Callable[..., LinkParams | None] | None
"""One LinkParams, or a function ``(nranks, nnodes)`` -> LinkParams | None that may also take ``net=`` (a
configuration's :class:`~.model_types.NetSettings`, :func:`.params_source.job_params_source` does)."""
Logged = Mapping[tuple[str, str, int], tuple[str, str]]
"""(config, op, size_bytes) -> (algorithm, protocol) NCCL logged for that size."""


PRINTED_BUSBW_ROUNDING = 0.005
"""Half the last digit of the busbw nccl-tests prints (two decimals, src/common.cu's ``%6.2f``)."""
TIME_RELATIVE_ROUNDING = 0.001
"""What the printed time's rounding (four significant digits or more) moves the busbw it gives, at most."""


def measured_busbw(op: str, nranks: int, size_bytes: int, time_us: float, busbw_gbps: float) -> float:
    """The busbw a measurement's time gives, where it is the printed busbw to the print's rounding; else the
    printed busbw. nccl-tests prints busbw with two decimals, so a 64-byte all_reduce that takes 17 us prints 0.00
    (an efficiency of 0%) and most sizes to 64 KiB print one or two significant digits, while the time keeps four:
    the time is the finer measure of the same call. A time that does not give the printed busbw (a busbw made by
    another formula, a time that is not the call's) leaves the printed one."""
    if not (math.isfinite(time_us) and time_us > 0 and size_bytes > 0 and nranks >= 1 and math.isfinite(busbw_gbps)):
        return busbw_gbps
    derived = time_busbw_gbps(op, nranks, size_bytes, time_us)
    close = abs(derived - busbw_gbps) <= PRINTED_BUSBW_ROUNDING + TIME_RELATIVE_ROUNDING * busbw_gbps
    return derived if close else busbw_gbps


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


def params_for(source: ParamsSource, nranks: int, nnodes: int | None, notes: list[str], *,
               net: NetSettings | None = None) -> LinkParams | None:
    """The LinkParams of one (nranks, nnodes) group from ``analyze``'s ``params``; None with a note.

    Unknown ``nnodes`` (None or NA) is never taken for one node: no parameters, and a note naming ``--nnodes``.
    ``net``: a configuration's NCCL_IB_HCA (fewer NICs across nodes: the parameters count only those; a source
    that cannot take it gives none, with a note), NCCL_NET_GDR_LEVEL and NCCL_PXN_DISABLE (the crossing the
    parameters' capture gives under them; a source that cannot take them gives NCCL's default crossing, said)."""
    if source is None:
        return None
    if nnodes is None or pd.isna(nnodes):
        notes.append(NNODES_UNKNOWN.format(nranks=nranks))
        return None
    nodes = int(nnodes)
    if net is not None and net.is_set and nodes > 1:
        what = f"{nranks} ranks on {nodes} node(s) with {net.text()}"
        taker = (None if isinstance(source, LinkParams) or "net" not in inspect.signature(source).parameters
                 else source)
        if taker is None and net.ib_hca:
            notes.append(f"no efficiency for {what}: the link parameters count every NIC, and the setting leaves "
                         "NCCL fewer (analyze's --topo, --gpu or --nic-gbit give parameters per configuration)")
            return None
        if taker is not None:
            try:
                params = taker(nranks, nodes, net=net)
            except ConfigError as exc:
                notes.append(f"no efficiency for {what}: {exc}")
                return None
            if params is not None:
                notes.extend(c for c in _labelled(params.caveats, taker, nranks, nodes, net, what) if c not in notes)
                if params.ndomains > 1 and net.ib_hca:
                    notes.append(f"{what}: {nics_left_text(params)}")
            return params
        notes.append(f"{what}: the link parameters were given whole, so the model takes NCCL's default crossing "
                     f"for {net.crossing_text()}")
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


def _labelled(caveats: Iterable[str], source: Callable[..., LinkParams | None], nranks: int, nodes: int,
              net: NetSettings, what: str) -> list[str]:
    """``caveats`` of parameters built with ``net``, those the default parameters lack labelled ``what: ...`` (a
    configuration's notes name it) unless they already start with the variables they come from."""
    try:
        default = source(nranks, nodes)
    except ConfigError:
        default = None
    base = set(default.caveats) if default is not None else set()
    own = tuple(t for t in (net.crossing_text(), f"NCCL_IB_HCA={net.ib_hca}" if net.ib_hca else "") if t)
    return [c if c in base or c.startswith(own) else f"{what}: {c}" for c in caveats]


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
        return self.for_scope(op, size_bytes, across_domains=params.ndomains > 1)

    def for_scope(self, op: str, size_bytes: int, *, across_domains: bool) -> tuple[float, float]:
        """(below, above) the model of NCCL's choice at ``size_bytes``, inside one NVLink domain or across."""
        band = published_accuracy(op, across_domains=across_domains, size_bytes=size_bytes) \
            if self.published else None
        widened = band.margins if band is not None else None
        if widened is None:
            return self.nccl, self.nccl
        return max(self.nccl, widened[0]), max(self.nccl, widened[1])


def add_expected(sizes: pd.DataFrame, settings: Mapping[str, Mapping[str, str]], source: ParamsSource,
                 margins: Margins, notes: list[str], used: dict[str, Any], logged: Logged | None = None,
                 releases: Mapping[str, str] | None = None) -> None:
    """Fill, in place, per sizes row: ``model``, ``model_kind``, ``algo_source``, ``model_busbw_gbps``,
    ``efficiency``, ``bound_algo``, ``bound_busbw_gbps``, ``bound_limited_by``, ``margin`` (below the model),
    ``margin_above`` and ``verdict``."""
    n = len(sizes)
    cols: dict[str, list[Any]] = {k: [None] * n for k in ("model", "model_kind", "algo_source", "bound_algo",
                                                          "bound_limited_by", "verdict")}
    nums = {k: np.full(n, np.nan) for k in ("model_busbw_gbps", "bound_busbw_gbps", "margin", "margin_above",
                                            "measured_busbw_gbps")}
    cache: dict[tuple[int, Any, NetSettings], LinkParams | None] = {}
    nccl = NcclInputsCache()
    modelled: dict[tuple[int, int | None, str], tuple[NcclGraphInputs, list[tuple[str, int]]]] = {}
    records = sizes.to_dict(orient="records")
    found: list[tuple[int, Expected, LinkParams, NcclGraphInputs | None, ModelSettings]] = []
    defaults: dict[str, ModelSettings] = {}  # config -> its settings, for those the model takes at NCCL's default
    for i, row in enumerate(records):
        op, nranks, size, config = str(row["op"]), int(row["nranks"]), int(row["size_bytes"]), str(row["config"])
        backend, conf = str(row["backend"]), settings.get(config, {})
        ab_name = model_name(op, backend, conf)
        cols["model"][i] = ab_name
        read = model_settings(conf, op)
        key = (nranks, row["nnodes"], read.net)
        if key not in cache:
            cache[key] = params_for(source, nranks, row["nnodes"], notes, net=read.net) if nranks >= 2 else None
            if cache[key] is not None:
                label = f"{nranks}x{cache[key].nnodes}"  # type: ignore[union-attr]
                label += f" {read.net.text()}" if read.net.is_set and cache[key].nnodes > 1 else ""  # type: ignore[union-attr]
                used[label] = cache[key].to_dict()  # type: ignore[union-attr]
        params = cache[key]
        if params is None:
            continue
        inputs = nccl.get(params) if backend == "nccl" else None
        exp = expected_busbw(op, backend, size, conf, params, ab_name, inputs,
                             (logged or {}).get((config, op, size)), (releases or {}).get(config))
        if exp is not None:
            found.append((i, exp, params, inputs, read))
            if exp.kind == "nccl":
                defaults.setdefault(config, read)
    costs = run_costs_us(records, {i: exp for i, exp, _, _, _ in found})
    raised: dict[tuple[str, str, float, float, int], list[int]] = {}  # (curve, op, cost, floor, at) -> sizes
    unjudged: dict[tuple[str, str, BoundChannels], list[int]] = {}  # (config, op, channels) -> sizes
    # (config, op) -> the p2p model's (size, model) rows, with the link parameters and settings they were judged under
    p2p_rows: dict[tuple[str, str], tuple[LinkParams, ModelSettings, list[tuple[int, str]]]] = {}
    ll128_forced: dict[str, str] = {}  # config -> the note for an NCCL_PROTO that turns LL128 on off its default
    # (config, op) -> (size, expected, ceiling) where NVLS's own rate kept a measurement above the model normal
    under_ceiling: dict[tuple[str, str], list[tuple[int, float, float]]] = {}
    for i, exp, params, inputs, read in found:
        row = records[i]
        if read.ll128_forced and inputs is not None and str(row["config"]) not in ll128_forced:
            reason = ll128_default_off(inputs, inputs.ring)
            if reason:
                ll128_forced[str(row["config"])] = ll128_forced_text(read, reason)
        op, nranks, size = str(row["op"]), int(row["nranks"]), int(row["size_bytes"])
        cost = costs.get(curve_key(row))
        unpriced = exp.busbw_gbps
        label = f"{row['config']}{' in-place' if row.get('in_place') is True else ''}"
        if cost is not None and exp.kind == "nccl" and size > RUN_FLOOR_MAX_BYTES:
            exp = with_run_cost(exp, op, nranks, size, cost.extra_us)
            raised.setdefault((label, op, cost.extra_us, cost.floor_us, cost.floor_size), []).append(size)
        busbw = measured_busbw(op, nranks, size, float(row.get("time_us", math.nan)), float(row["busbw_gbps"]))
        nums["measured_busbw_gbps"][i] = busbw
        margin, above = margins.for_nccl(op, size, params) if exp.kind == "nccl" else (margins.alpha_beta,) * 2
        if exp.ceiling_gbps > unpriced:  # NVLS's own rate: only above it is a measurement suspicious
            if unpriced * (1 + above) < busbw <= exp.ceiling_gbps * (1 + above):
                under_ceiling.setdefault((label, op), []).append((size, unpriced, exp.ceiling_gbps))
            above = exp.ceiling_gbps * (1 + above) / unpriced - 1
        if exp.busbw_gbps < unpriced:  # the cost excuses a slower call; only the model without it makes one suspicious
            above = unpriced * (1 + above) / exp.busbw_gbps - 1
        exp = matched_tie(busbw, exp, margin=margin, link_tolerance=margins.link, margin_above=above)
        if inputs is not None and exp.kind == "nccl":
            modelled.setdefault((id(inputs), read.nvls_chunk_bytes, op),
                                (read.applied_to(inputs), []))[1].append((exp.model, size))
        cols["model"][i], cols["model_kind"][i], cols["algo_source"][i] = exp.model, exp.kind, exp.algo_source
        cols["bound_algo"][i], cols["bound_limited_by"][i] = exp.bound.algo, exp.bound.limited_by
        nums["model_busbw_gbps"][i], nums["bound_busbw_gbps"][i] = exp.busbw_gbps, exp.bound.busbw_gbps
        nums["margin"][i], nums["margin_above"][i] = margin, above
        bound = bound_channels(inputs, exp.model.split("/")[0], read.channel_bounds) \
            if inputs is not None and exp.kind == "nccl" and read.channel_bounds else None
        if exp.model.startswith(f"{P2P_ALGO}/"):
            p2p_rows.setdefault((str(row["config"]), op), (params, read, []))[2].append((size, exp.model))
        if bound is not None:
            unjudged.setdefault((str(row["config"]), op, bound), []).append(size)
        elif math.isfinite(busbw) and math.isfinite(exp.busbw_gbps) and exp.busbw_gbps > 0:
            cols["verdict"][i] = verdict(busbw, exp, margin=margin, link_tolerance=margins.link, margin_above=above)
    for k, v in cols.items():
        sizes[k] = v
    measured = nums.pop("measured_busbw_gbps")
    for k, a in nums.items():
        sizes[k] = a
    sizes["efficiency"] = np.where(np.isfinite(measured), measured, sizes["busbw_gbps"]) / sizes["model_busbw_gbps"]
    notes.extend(nccl.notes)
    for (label, op, extra_us, floor_us, at), held in raised.items():
        shown = format_size_span(held)
        notes.append(f"{op} {label}: this run's fastest call of sizes {format_size(RUN_FLOOR_MIN_BYTES)}-"
                     f"{format_size(RUN_FLOOR_MAX_BYTES)} takes {floor_us:.1f} us (size {format_size(at)}), "
                     f"{extra_us:.1f} us more than the model's time there: a per-call cost of this setup the model "
                     "does not price (one process driving all GPUs, -g N; a net plugin's own cost), added to the "
                     f"expected time at {shown}")
    for config, read in defaults.items():
        if read.unmodelled:
            notes.append(f"{config}: {unmodelled_text(read)}: its verdicts are against the defaults")
        notes.extend(n for n in (f"{config}: {n}" for n in read.nvls_notes) if n not in notes)
    for config, why in sorted(ll128_forced.items()):
        notes.append(f"{config}: {why}")
    for (label, op), kept in under_ceiling.items():
        notes.append(nvls_ceiling_note(f"{op} {label}", kept))
    for (config, op, bound), held in unjudged.items():
        notes.append(channel_bound_note(config, op, bound, held))
    for (config, op), (_, read, judged) in p2p_rows.items():
        if ll := [at for at, model in judged if model == P2P_LL_MODEL]:
            notes.append(f"{config}: {p2p_ll_note(op, ll, read.p2p)}")
    for (config, op), (params, read, judged) in p2p_rows.items():
        at_sizes = sorted({at for at, _ in judged})
        notes.extend(n for n in (f"{config}: {n}" for n in (*read.p2p_notes, *p2p_tuning_notes(
                         params, op, at_sizes, read.p2p), *p2p_channel_notes(params, op, at_sizes, read.p2p)))
                     if n not in notes)
    for (_, _, op), (inputs, choices) in modelled.items():
        by_algo = [(model.split("/")[0], size) for model, size in choices]
        notes.extend(n for n in defect_notes(inputs, op, by_algo) + fitted_term_notes(inputs, op, choices)
                     if n not in notes)
    if source is None:
        notes.append(f"efficiency not computed: no link parameters, and no GPU named by the results ({NO_MODEL_HINT}; "
                     "in Python, analyze(df, params=LinkParams(...)))")
