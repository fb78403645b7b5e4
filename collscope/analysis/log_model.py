"""NCCL's own choices and predictions (from its debug log) next to collscope's model of NCCL's tuner.

For every per-size choice ``nccl-log`` found (``AllReduce: 1048576 Bytes -> Algo RING proto LL128 ...``),
:func:`choices_against_model` gives collscope's predicted time for the algorithm and protocol NCCL ran
(:func:`collscope.analysis.nccl_model.model.nccl_time_us`) and the pair collscope's model would have picked,
for the communicator the log describes (nranks, nnodes) on the GPU named by ``--gpu`` or a topology.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from collscope.analysis.model_settings import net_settings, nics_left_text
from collscope.analysis.nccl_model.choice import nccl_choice
from collscope.analysis.nccl_model.constants import (
    PROTOS_WITHOUT_LL128,
    ll128_off_note,
    model_version_for,
    release_tables,
)
from collscope.analysis.nccl_model.model import nccl_time_us
from collscope.analysis.nccl_model.search import graph_inputs_from_topology
from collscope.analysis.params import link_params
from collscope.collectives.nccl_log.choices import SizeChoice
from collscope.collectives.nccl_log.records import NcclLog
from collscope.errors import ConfigError
from collscope.topo.cluster import Cluster
from collscope.topo.model import NodeTopology
from collscope.units import format_size
from collscope.vocab.channel_limits import channel_limits_set
from collscope.vocab.nccl import ALGORITHMS, OP_FUNC, PROTOCOLS, SelectionError, parse_selection

__all__ = ["ChoiceVsModel", "LogAgainstModel", "choices_against_model", "render_against_model_text"]

_FUNC_OP = {func: op for op, func in OP_FUNC.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChoiceVsModel:
    """One logged choice with NCCL's prediction and collscope's."""

    choice: SizeChoice
    model_time_us: float | None
    """collscope's model of NCCL for the logged algorithm and protocol; ``None`` where it has no model."""
    model_pick: str | None
    """``Algorithm/Protocol`` collscope's model picks at this size."""

    def to_json(self) -> dict[str, Any]:
        return {**self.choice.to_json(), "model_time_us": self.model_time_us, "model_pick": self.model_pick}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogAgainstModel:
    rows: tuple[ChoiceVsModel, ...]
    notes: tuple[str, ...]
    """What the comparison assumed (forced settings applied to the model's pick, channel limits ignored)."""

    def to_json(self) -> dict[str, Any]:
        return {"choices": [r.to_json() for r in self.rows], "notes": list(self.notes)}


def _allowed(log: NcclLog, func: str, env: str, vocabulary: tuple[str, ...],
             notes: list[str]) -> tuple[str, ...] | None:
    """The names NCCL_ALGO / NCCL_PROTO (as the log echoed it) allows for ``func``; None: all."""
    text = log.env.get(env)
    if text is None:
        return None
    try:
        entries = parse_selection(text, vocabulary, env)
    except SelectionError as exc:
        notes.append(f"{exc}: the model's pick is not restricted")
        return None
    entry = next((e for e in entries if e.func == func), None) or next((e for e in entries if e.func is None), None)
    if entry is None:
        return None
    return tuple(n for n in vocabulary if (n in entry.names) != entry.exclude)


def choices_against_model(log: NcclLog, *, gpu: str | None = None, topology: NodeTopology | Cluster | None = None,
                          version: str | None = None, nranks: int | None = None, nnodes: int | None = None,
                          nvl_domain: int | None = None) -> LogAgainstModel:
    """collscope's model next to every per-size choice of ``log``; ConfigError when nothing says nranks or nnodes.

    ``version``: the model constants (:data:`VERSIONS`); by default the ones closest to the log's NCCL.
    ``nranks``/``nnodes``/``nvl_domain``: the user's overrides (``--nranks`` ...), which win over the log's lines.
    """
    release_notes: tuple[str, ...] = ()
    release = version or log.nccl_version or ""
    if version is None:
        try:
            version, release_notes = release_tables(log.nccl_version or "")
        except ValueError:  # no version, or one that does not read as a release: the newest tables
            version = model_version_for(log.nccl_version)
    ranks = nranks if nranks is not None else log.nranks
    if ranks is None:
        raise ConfigError(f"{log.source}: the log does not say how many ranks the communicator has "
                          "(no 'comm ... nRanks' line), so collscope's model cannot be evaluated; pass --nranks N")
    if nnodes is None:
        nnodes = log.nnodes
    if nnodes is None:  # never one node by default: the model of a multi-node run differs
        raise ConfigError(f"{log.source}: the log does not say how many nodes the communicator spans (no "
                          "'comm ... nNodes' line of NCCL >= 2.20.3, and its lines do not show every rank's host), so "
                          "collscope's model cannot be evaluated; pass --nnodes N")
    if nnodes > 1 and topology is None and not (nvl_domain is not None and nvl_domain >= ranks):
        raise ConfigError(f"collscope's model of a {nnodes}-node run needs the NIC rates: pass the node's topology "
                          "with its ibstat/ibv_devinfo captures (--topo DIR from collscope topo collect)")
    net = net_settings(log.env)
    unmatched = ""
    try:
        params = link_params(topology, gpu=gpu, nranks=ranks, nnodes=nnodes, nvl_domain=nvl_domain, net=net)
    except ConfigError as exc:
        if not net.ib_hca:
            raise
        unmatched = (f"NCCL_IB_HCA={net.ib_hca} set in the run, but the model cannot count the NICs it leaves ({exc}): "
                     "it counts every compute NIC of the topology")
        net = dataclasses.replace(net, ib_hca=None)
        params = link_params(topology, gpu=gpu, nranks=ranks, nnodes=nnodes, nvl_domain=nvl_domain, net=net)
    inputs = graph_inputs_from_topology(params, version=version)
    notes = [f"collscope's model of NCCL {version} (the log says {log.nccl_version or 'no version'}) for "
             f"{ranks} ranks on {nnodes} node(s), {params.gpu}", *release_notes]
    ll128_off = ll128_off_note(release, inputs.sm) if "NCCL_PROTO" not in log.env else None
    if ll128_off is not None:
        notes.append(ll128_off)
    if unmatched:
        notes.append(unmatched)
    elif net.ib_hca and params.ndomains > 1:
        notes.append(f"NCCL_IB_HCA={net.ib_hca} set in the run: {nics_left_text(params)}")
    if net.moves_crossing and params.ndomains > 1:
        notes.append(f"{net.crossing_text()} set in the run: "
                     + (f"the model's graphs cross nodes at {params.nic_path}, the topology's paths under it"
                        if params.nic_path else "the model takes NCCL's default crossing (no GPU-NIC paths in the "
                        "topology)"))
    limits = channel_limits_set(log.env)
    if limits:
        notes.append(f"{', '.join(limits)} set in the run: the model assumes NCCL's own channel count")
    out = []
    for choice in log.size_choices:
        op = _FUNC_OP.get(choice.op or "")
        if op is None:
            out.append(ChoiceVsModel(choice=choice, model_time_us=None, model_pick=None))
            continue
        size = choice.op_size_bytes(ranks)  # the model counts all_gather/reduce_scatter sizes as totals
        assert size is not None  # ranks is known here
        try:
            time_us: float | None = nccl_time_us(inputs, op, choice.algorithm, choice.protocol, size,
                                                 version=version)
        except (ConfigError, KeyError, ValueError):
            time_us = None
        if time_us is not None and time_us == float("inf"):
            time_us = None
        func = OP_FUNC[op]
        protos = _allowed(log, func, "NCCL_PROTO", PROTOCOLS, notes)
        if ll128_off is not None:  # NCCL_PROTO unset: the release's default enable
            protos = PROTOS_WITHOUT_LL128
        pick = nccl_choice(inputs, op, size, version=version,
                           algos=_allowed(log, func, "NCCL_ALGO", ALGORITHMS, notes), protos=protos)
        out.append(ChoiceVsModel(choice=choice, model_time_us=time_us, model_pick=f"{pick.algo}/{pick.proto}"))
    forced = [f"{k}={log.env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO") if k in log.env]
    if forced:
        notes.append(f"the model's pick is restricted like the run: {', '.join(forced)}")
    return LogAgainstModel(rows=tuple(out), notes=tuple(dict.fromkeys(notes)))


def render_against_model_text(result: LogAgainstModel) -> str:
    """The per-size table: NCCL's choice and prediction, collscope's prediction and pick."""
    lines = ["against collscope's model (times per operation)",
             f"  {'function':<13} {'size':>9}  {'NCCL ran':<16} {'NCCL predicts':>13} {'model':>11}  model picks"]
    for row in result.rows:
        c = row.choice
        nccl = "?" if c.nccl_time_us is None else f"{c.nccl_time_us:.1f} us"
        model = "?" if row.model_time_us is None else f"{row.model_time_us:.1f} us"
        pick = row.model_pick or "?"
        same = "" if row.model_pick is None or row.model_pick == f"{c.algorithm}/{c.protocol}" else "  (differs)"
        lines.append(f"  {c.op or '?':<13} {format_size(c.size_bytes):>9}  {c.algorithm + '/' + c.protocol:<16} "
                     f"{nccl:>13} {model:>11}  {pick}{same}")
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)
