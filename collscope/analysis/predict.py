"""``predict``: expected time and busbw per algorithm (alpha-beta) and per algorithm x protocol (NCCL's model).

The result is a :class:`PredictResult`; its ``to_dict()`` is what ``collscope predict --json`` prints::

    {"predictions": [{"model", "algo", "proto", "op", "size_bytes", "time_us", "busbw_gbps"}, ...],
     "nccl_choice": [{"size_bytes", "algo", "proto", "time_us", "busbw_gbps", "expected_time_us",
                      "expected_busbw_gbps", "held_to_bound", "floor_from_bytes", "near_ties": [{the same
                      fields}, ...], "published_accuracy"}, ...],
     "params": {LinkParams fields, "ppn", "ring_bound_busbw_gbps", "nccl_version", "nccl_graphs", "notes"}}

``model`` is ``"alpha-beta"`` (``proto`` null) or ``"nccl"``. ``nccl_choice``'s ``time_us``/``busbw_gbps`` are NCCL's
model (what it compares to choose); ``expected_*`` add what nccl-tests measures beyond it
(``nccl_model.measured.measured_extra_us``: the size ramp of Simple, the LL step latency, the network's per-call
cost, NVLS's cost per rank of a domain larger than a board), at least 1/k of the expected time at k x the size
(``floor_from_bytes`` names that size, else 0), with the bandwidth held to the algorithm's bound on the links where
NCCL's model exceeds it (``bounds.held_to_bound``; ``held_to_bound`` then says so, else it is empty): what analyze,
trace and the scorecard compare against. NCCL's model needs a GPU generation; without one
(explicit alpha/bandwidth only) ``nccl_choice`` is empty and a note says why. ``published_accuracy`` says how far
published systems fall from that expected measurement at the size's band and scope (:mod:`.model_accuracy`: rows,
within 15%, the 10th/50th/90th percentile of measured / model, and a sentence), null where the scorecard holds no
published figure. ``near_ties`` are the pairs within ``nccl_model.choice.NEAR_TIE`` of the choice in NCCL's model,
each with its own expected measurement (which of them runs is closer than collscope calls).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collscope.analysis.bounds import held_to_bound
from collscope.analysis.model_accuracy import BandAccuracy, published_accuracy
from collscope.analysis.model_settings import (
    ModelSettings,
    ll128_forced_text,
    model_settings,
    nics_left_text,
    unmodelled_text,
)
from collscope.analysis.model_types import LinkParams, Prediction, make_prediction
from collscope.analysis.models import ALPHA_BETA_MODELS, alpha_beta_predictions, ring_bound_busbw_gbps
from collscope.analysis.nccl_model.channel_limits import bound_channels, predicted_bound_note
from collscope.analysis.nccl_model.choice import nccl_choice, nvls_ceiling_predict_note
from collscope.analysis.nccl_model.constants import PROTOS_WITHOUT_LL128, ll128_off_note, release_tables
from collscope.analysis.nccl_model.known_defects import defect_notes
from collscope.analysis.nccl_model.measured import MEASURED_TERMS, fitted_term_notes
from collscope.analysis.nccl_model.model import NcclChoice, ll128_default_off, nccl_predictions
from collscope.analysis.nccl_model.nothing_left import NCCL_NO_ALGORITHM_ERROR, ring_fallback
from collscope.analysis.nccl_model.p2p import (
    P2P_ALGO,
    P2P_MODELLED_OPS,
    p2p_channel_notes,
    p2p_choice,
    p2p_ll_note,
    p2p_ll_sizes,
)
from collscope.analysis.nccl_model.p2p_rules import p2p_tuning_notes
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.errors import ConfigError
from collscope.topo.cluster import Cluster
from collscope.topo.load import load_topology
from collscope.topo.model import NodeTopology
from collscope.units import format_size
from collscope.vocab.ops import OPS, op_facts

__all__ = ["predict", "PredictResult", "load_topology", "DEFAULT_SIZES", "render_predict_text"]

DEFAULT_SIZES: tuple[int, ...] = tuple(1024 * 4**i for i in range(11))
"""1K, 4K, ..., 1G."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictResult:
    """Every model's prediction for one collective on one topology (see the module doc for the JSON)."""

    predictions: tuple[Prediction, ...]
    """Per size (ascending): the alpha-beta algorithms first, then NCCL's model per algorithm x protocol."""
    nccl_choice: tuple[NcclChoice, ...]
    """What NCCL's model picks per size; empty without a GPU generation."""
    params: LinkParams
    """The link parameters the models used, with their sources."""
    ring_bound_busbw_gbps: float
    """The busbw a ring cannot exceed on these links."""
    nccl_version: str
    """The NCCL version whose cost model was used."""
    nccl_graphs: dict[str, Any] | None
    """NCCL's ring/tree/NVLS graphs for the topology (None without a GPU generation)."""
    notes: tuple[str, ...] = ()
    defects: tuple[str, ...] = ()
    """The notes of known NCCL defects that hit NCCL's choice here (:mod:`.nccl_model.known_defects`); also
    among :attr:`notes`."""
    setting_notes: tuple[str, ...] = ()
    """What the job's settings (``settings``) did to the prediction and which of them it does not take; also among
    :attr:`notes`."""
    fitted_notes: tuple[str, ...] = ()
    """Where a term fitted on one or two published curves is a tenth of the expected time or more (NVLS's cost per
    rank of a large domain, NVLS's shortest step on sm100): a judgement at those sizes leans on those curves; also
    among :attr:`notes`."""
    accuracy: tuple[BandAccuracy | None, ...] = ()
    """Per :attr:`nccl_choice` entry, how published systems scatter around the model at that size and scope
    (:mod:`.model_accuracy`); None where the scorecard holds no published figure."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``collscope predict --json``."""
        return {
            "predictions": [p.to_dict() for p in self.predictions],
            "nccl_choice": [{**c.to_dict(), "published_accuracy": None if a is None else a.to_dict()}
                            for c, a in zip(self.nccl_choice, self._accuracy(), strict=True)],
            "params": {**self.params.to_dict(), "ring_bound_busbw_gbps": self.ring_bound_busbw_gbps,
                       "nccl_version": self.nccl_version, "nccl_graphs": self.nccl_graphs,
                       "notes": list(self.notes)},
        }


    def _accuracy(self) -> tuple[BandAccuracy | None, ...]:
        return self.accuracy or (None,) * len(self.nccl_choice)


def predict(op: str, *, topology: NodeTopology | Cluster | None = None, gpu: str | None = None, nranks: int,
            nnodes: int | None, nvl_domain: int | None = None, sizes: Iterable[int] | None = None,
            alpha_us: float | None = None, bw_gbps: float | None = None, gamma_gbps: float | None = None,
            version: str = "2.30", nic_gbit: float | None = None, nics_per_node: int | None = None,
            algos: Iterable[str] | None = None, protos: Iterable[str] | None = None,
            collnet: bool = False, settings: Mapping[str, str] | None = None) -> PredictResult:
    """Predictions of every model for ``op`` on ``nranks`` ranks over ``nnodes`` nodes (see the module doc).

    ``nnodes`` is the caller's to state (None: a ConfigError; nothing is assumed);
    ``nvl_domain``: GPUs one NVLink fabric joins when it spans nodes; ``nic_gbit`` / ``nics_per_node``: the
    compute NICs when no capture gives them (:func:`~.params.link_params`); ``algos`` / ``protos``: what NCCL's
    choice may pick, as NCCL_ALGO / NCCL_PROTO restrict it; ``collnet``: NCCL_COLLNET_ENABLE=1 with a CollNet
    (SHARP) plugin, which adds CollNetDirect/CollNetChain and multi-node NVLS to the choice; ``version``: the job's
    NCCL release (``"2.27.3"``) or a table name, mapped by :func:`~.nccl_model.constants.release_tables`;
    ``settings``: the job's NCCL variables, read as ``analyze`` reads a configuration's
    (:func:`~.model_settings.model_settings`: the selection narrows the choice, NCCL_IB_HCA the NICs and
    NCCL_NET_GDR_LEVEL/NCCL_PXN_DISABLE their paths; channel bounds and the variables the model does not take are
    said in the notes).
    """
    if nnodes is None:
        raise ConfigError(f"a prediction for {nranks} ranks needs the number of nodes they span (nnodes; 1 for one "
                          "node): the models differ across nodes, and none is assumed")
    if op not in ALPHA_BETA_MODELS:
        known = "no model yet for" if op in OPS else "unknown collective"
        raise ConfigError(f"{known} {op!r}; valid: {', '.join(ALPHA_BETA_MODELS)}")
    release = version
    try:
        version, version_notes = release_tables(version)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    size_list = sorted(set(DEFAULT_SIZES if sizes is None else (int(s) for s in sizes)))
    if not size_list or size_list[0] < 0:
        raise ConfigError(f"sizes must be >= 0 bytes, got {size_list or 'none'}")
    read = model_settings(settings or {}, op)
    params = link_params(topology, gpu=gpu, nranks=nranks, nnodes=nnodes, nvl_domain=nvl_domain, alpha_us=alpha_us,
                         bw_gbps=bw_gbps, gamma_gbps=gamma_gbps, nic_gbit=nic_gbit, nics_per_node=nics_per_node,
                         net=read.net)
    preds = alpha_beta_predictions(op, params, size_list)
    setting_notes = _settings_notes(read, params)
    notes: list[str] = [*version_notes, *params.caveats, *setting_notes]
    defects: list[str] = []
    fitted: list[str] = []
    choices: list[NcclChoice] = []
    graphs: dict[str, Any] | None = None
    if op_facts(op).nccl_func is None:
        notes.append(f"NCCL's model skipped: NCCL runs {op} as grouped point-to-point sends and receives, which its "
                     "tuning model (algorithm x protocol) does not cover; the alpha-beta model bounds it by the "
                     "NVLink and per-rank NIC rates")
        if op in P2P_MODELLED_OPS and params.gpu is not None:
            choices = [c for c in (p2p_choice(params, op, s, read.p2p) for s in size_list) if c is not None]
            preds = sorted(preds + [make_prediction("nccl", c.algo, c.proto, op, c.size_bytes, c.time_us, nranks)
                                    for c in choices], key=lambda pred: pred.size_bytes)
            notes.append(f"expected measurement of {op}: the p2p bound of its traffic with a launch cost, an "
                         "efficiency, a size ramp and, inside one NVLink domain, what the channels NCCL keeps busy "
                         "carry, fitted on published alltoall results (nccl_model.p2p)")
            notes.extend(p2p_channel_notes(params, op, size_list, read.p2p))
            tuned = p2p_tuning_notes(params, op, size_list, read.p2p)
            notes.extend(tuned)
            setting_notes.extend(tuned)
            if ll := p2p_ll_note(op, p2p_ll_sizes(choices), read.p2p):
                notes.append(ll)
            bound = bound_channels(None, P2P_ALGO, read.channel_bounds or {})
            if bound is not None and choices:
                notes.append(predicted_bound_note(op, bound, [c.size_bytes for c in choices]))
    elif params.gpu is None:
        notes.append("NCCL's model skipped: it needs a GPU generation (--gpu NAME or a topology naming the GPU)")
    else:
        inputs = graph_inputs_from_topology(params, collnet=collnet, version=version)
        if read.ll128_forced:
            reason = ll128_default_off(inputs, inputs.ring, version)
            if reason:
                notes.append(ll128_forced_text(read, reason))
                setting_notes.append(notes[-1])
        inputs = read.applied_to(inputs)
        graphs = {"source": inputs.source, "ring": _graph_dict(inputs.ring), "tree": _graph_dict(inputs.tree),
                  "nvls": _graph_dict(inputs.nvls) if inputs.nvls else None}
        notes.extend(inputs.notes)
        if alpha_us is not None or bw_gbps is not None:
            notes.append("NCCL's model uses its own constants for the topology; --alpha-us/--bw-gbps only change "
                         "the alpha-beta models")
        nccl = nccl_predictions(inputs, op, size_list, version=version)
        preds = sorted(preds + nccl, key=lambda pred: pred.size_bytes)  # stable: alpha-beta first
        allowed = (_narrowed(algos, read.algos), _narrowed(protos, read.protos))
        ll128_off = ll128_off_note(release, inputs.sm) if allowed[1] is None else None
        if ll128_off is not None:
            allowed = (allowed[0], list(PROTOS_WITHOUT_LL128))
            notes.append(ll128_off)
        try:
            choices = [held_to_bound(op, nccl_choice(inputs, op, s, version=version, algos=allowed[0],
                                                     protos=allowed[1]), params, inputs, version=version)
                       for s in size_list]
        except ConfigError as exc:
            if not read.forced:
                raise
            fallback = ring_fallback(release, str(op_facts(op).nccl_func))
            if fallback is None:
                raise ConfigError(f"{read.forced}: {exc} (the settings leave NCCL nothing it can run here: NCCL "
                                  f"{release} stops such a call with '{NCCL_NO_ALGORITHM_ERROR}', src/enqueue.cc "
                                  "getAlgoInfo)") from None
            ring_inputs, ring_protos = fallback.applied_to(inputs, allowed[1])
            choices = [held_to_bound(op, nccl_choice(ring_inputs, op, s, version=version, algos=["Ring"],
                                                     protos=ring_protos), params, ring_inputs, version=version)
                       for s in size_list]
            notes.append(f"{read.forced} leaves {op} no algorithm NCCL can run here; {fallback.why}: the choice "
                         "is Ring's")
            setting_notes.append(notes[-1])
        defects = defect_notes(inputs, op, ((c.algo, c.size_bytes) for c in choices))
        notes.extend(defects)
        fitted = fitted_term_notes(inputs, op, ((f"{c.algo}/{c.proto}", c.size_bytes) for c in choices),
                                   version=version)
        notes.extend(fitted)
        notes.extend(nvls_ceiling_predict_note(op, choices))
        if read.channel_bounds:
            for algo in dict.fromkeys(c.algo for c in choices):
                found = bound_channels(inputs, algo, read.channel_bounds)
                if found is not None:
                    notes.append(predicted_bound_note(op, found, [c.size_bytes for c in choices if c.algo == algo]))
    accuracy = tuple(published_accuracy(op, across_domains=params.ndomains > 1, size_bytes=c.size_bytes)
                     for c in choices)
    return PredictResult(predictions=tuple(preds), nccl_choice=tuple(choices), params=params,
                         ring_bound_busbw_gbps=ring_bound_busbw_gbps(params), nccl_version=version,
                         nccl_graphs=graphs, notes=tuple(notes), defects=tuple(defects),
                         setting_notes=tuple(setting_notes), fitted_notes=tuple(fitted), accuracy=accuracy)


def _narrowed(given: Iterable[str] | None, read: frozenset[str] | None) -> list[str] | None:
    """The algorithms (or protocols) both the caller and the settings allow; None when neither restricts."""
    if given is None:
        return sorted(read) if read is not None else None
    given = list(given)
    return given if read is None else [g for g in given if g in read]


def _settings_notes(read: ModelSettings, params: LinkParams) -> list[str]:
    """What the settings did to the prediction, and which of them it does not take."""
    out = []
    if read.forced:
        out.append(f"{read.forced}: NCCL's choice restricted as the setting restricts NCCL")
    if read.net.ib_hca and params.ndomains > 1:
        out.append(f"NCCL_IB_HCA={read.net.ib_hca}: {nics_left_text(params)}")
    out.extend(read.p2p_notes)
    out.extend(read.nvls_notes)
    if read.unmodelled:
        out.append(unmodelled_text(read))
    return out


def _graph_dict(g: Any) -> dict[str, Any]:
    return {"n_channels": g.n_channels, "bw_intra": g.bw_intra, "bw_inter": g.bw_inter, "type_intra": g.type_intra,
            "type_inter": g.type_inter, "pattern": g.pattern}


def render_predict_text(prediction: PredictResult) -> str:
    """The readable form: the link parameters with their sources, then one table per size."""
    result = prediction.to_dict()
    p = result["params"]
    domain = (f", NVLink domains of {p['domain_ranks']} ranks ({p['ndomains']} domain(s))"
              if p.get("domain_ranks", p["ppn"]) != p["ppn"] else "")
    lines = [f"{p['nranks']} ranks on {p['nnodes']} node(s) ({p['ppn']} per node){domain}, "
             f"GPU {p['gpu'] or 'unknown'}",
             f"  alpha {p['alpha_us']:g} us"
             + (f", between nodes {p['alpha_inter_us']:g} us" if p.get("alpha_inter_us") is not None else "")
             + f"; ring/tree bandwidth {p['bw_gbps']:g} GB/s per rank"
             + (f"; gamma {p['gamma_gbps']:g} GB/s" if p.get("gamma_gbps") else ""),
             "  sources:"]
    lines += [f"    - {s}" for s in p["source"].split(" | ") if s]
    if p.get("nccl_graphs"):
        lines.append(f"  NCCL {p['nccl_version']} graphs: {p['nccl_graphs']['source']}")
    lines += [f"  note: {n}" for n in p["notes"]]
    choice = {c["size_bytes"]: c for c in result["nccl_choice"]}
    by_size: dict[int, list[dict[str, Any]]] = {}
    for pred in result["predictions"]:
        by_size.setdefault(pred["size_bytes"], []).append(pred)
    for size, rows in by_size.items():
        lines.append("")
        lines.append(f"size {format_size(size)} ({size} B)")
        lines.append(f"  {'model':<11} {'algorithm':<22} {'time (us)':>12} {'busbw (GB/s)':>13}")
        for r in rows:
            name = r["algo"] if r["proto"] is None else f"{r['algo']}/{r['proto']}"
            lines.append(f"  {r['model']:<11} {name:<22} {r['time_us']:>12.2f} {r['busbw_gbps']:>13.2f}")
        if size in choice and choice[size]["algo"] == P2P_ALGO:
            c = choice[size]
            lines.append(f"  expected measurement: {c['expected_time_us']:.2f} us, {c['expected_busbw_gbps']:.2f} "
                         "GB/s (grouped point-to-point: the p2p bound with the fitted launch, efficiency, ramp and "
                         "channel rate)")
        elif size in choice:
            c = choice[size]
            lines.append(f"  NCCL choice: {c['algo']}/{c['proto']} {c['time_us']:.2f} us, {c['busbw_gbps']:.2f} GB/s "
                         "in NCCL's model")
            how = c["held_to_bound"] or f"NCCL's model plus {MEASURED_TERMS}"
            if c["floor_from_bytes"]:
                how += (f"; at least 1/{c['floor_from_bytes'] // c['size_bytes']} of the time expected at "
                        f"{format_size(c['floor_from_bytes'])}, as a larger message is not faster per byte")
            lines.append(f"  expected measurement: {c['expected_time_us']:.2f} us, {c['expected_busbw_gbps']:.2f} "
                         f"GB/s ({how})")
            for t in c["near_ties"]:
                lines.append(f"  near tie: {t['algo']}/{t['proto']} is {t['time_us'] / c['time_us'] - 1:.1%} slower in "
                             f"NCCL's model, closer than collscope calls (NCCL versions move such thresholds): "
                             f"{t['expected_busbw_gbps']:.2f} GB/s expected if it runs")
        if size in choice:
            band = choice[size]["published_accuracy"]
            lines.append(f"  {band['sentence']}" if band else "  published: no figure in collscope's scorecard at "
                         "this size and scope, so how far real systems fall from this model here is not known")
    return "\n".join(lines)
