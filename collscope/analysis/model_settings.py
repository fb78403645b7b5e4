"""What a configuration's NCCL settings do to the model of one op: one reading, shared by ``analyze`` (per
configuration of a sweep) and ``predict`` (``--setting NAME=VALUE``).

- **selection**: ``NCCL_ALGO``/``NCCL_PROTO`` restrict NCCL's choice (per function, NCCL >= 2.24's
  ``func:list;...``), ``NCCL_NVLS_ENABLE=0`` takes NVLS and NVLSTree away (src/transport/nvls.cc leaves
  ``nvlsSupport`` 0);
- **NICs**: ``NCCL_IB_HCA`` leaves NCCL the NICs it names; ``NCCL_NET_GDR_LEVEL`` and ``NCCL_PXN_DISABLE`` move
  the GPU-NIC paths the graphs cross nodes at (:func:`.params.link_params`, ``net``);
- **channel bounds**: ``NCCL_MIN/MAX_CTAS``, ``NCCL_MIN/MAX_NCHANNELS`` (:mod:`.nccl_model.channel_limits`):
  sizes run on another count than NCCL's own are not judged;
- **NVLS chunk**: ``NCCL_NVLS_CHUNKSIZE``, the largest chunk of NVLS inside one NVLink domain, read as NCCL reads it
  (the chunks NCCL shrinks to and NVLS's shortest step: :func:`.nccl_model.measured.nvls_chunk_bytes`);
- **point-to-point parts** (alltoall, gather, scatter, sendrecv): ``NCCL_P2P_LL_THRESHOLD``, the
  ``NCCL_P2P_{NVL,PCI,NET}_CHUNKSIZE`` and ``NCCL_BUFFSIZE``'s cap on them, read as NCCL reads them
  (:func:`.nccl_model.p2p_rules.p2p_tuning`);
- any other tuning variable (:func:`collscope.vocab.env_roles.env_role`) is taken at NCCL's default, and said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.nccl_model.model import NVLS_CHUNK_DEFAULT_BYTES, NcclGraphInputs
from collscope.analysis.nccl_model.p2p import P2P_MODELLED_OPS
from collscope.analysis.nccl_model.p2p_rules import DEFAULT_P2P_TUNING, P2P_TUNING_VARIABLES, P2pTuning, p2p_tuning
from collscope.errors import ConfigError
from collscope.vocab.channel_limits import CHANNEL_LIMIT_NAMES
from collscope.vocab.env_roles import env_role
from collscope.vocab.nccl import (
    ALGORITHMS,
    OP_FUNC,
    PROTOCOLS,
    covers,
    enabled,
    ignored_unit_note,
    nccl_param_int,
    parse_selection,
    pxn_disabled,
)

__all__ = ["MODELLED_SETTINGS", "NVLS_ALGOS", "UNMODELLED_WHY", "ModelSettings", "merged_settings", "model_settings",
           "net_settings", "nics_left_text", "unmodelled_text"]

MODELLED_SETTINGS = frozenset({"NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL",
                               "NCCL_PXN_DISABLE", "NCCL_NVLS_CHUNKSIZE", *CHANNEL_LIMIT_NAMES})
"""The NCCL settings the models take (module doc); any other tuning variable is taken at NCCL's default."""
NVLS_ALGOS = frozenset({"NVLS", "NVLSTree"})
"""The algorithms NCCL_NVLS_ENABLE=0 takes away (``nvlsSupport`` 0: src/transport/nvls.cc ``ncclNvlsInit``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """A configuration's settings as the model of one op reads them."""

    algos: frozenset[str] | None = None
    """The algorithms NCCL may choose; None: all of them."""
    protos: frozenset[str] | None = None
    """The protocols NCCL may choose; None: all of them."""
    forced: str = ""
    """The settings that restricted the choice, as ``NCCL_ALGO=Ring, NCCL_NVLS_ENABLE=0`` (empty: none)."""
    net: NetSettings = NetSettings()
    """NCCL_IB_HCA, NCCL_NET_GDR_LEVEL and NCCL_PXN_DISABLE as set: the link parameters take them."""
    channel_bounds: dict[str, str] | None = None
    """The channel-bound variables set (name -> value), for :func:`.nccl_model.channel_limits.bound_channels`."""
    unmodelled: tuple[str, ...] = ()
    """The tuning variables set that the model takes at NCCL's default, as ``NAME=value``."""
    p2p: P2pTuning = DEFAULT_P2P_TUNING
    """The point-to-point variables as the p2p model of an alltoall, gather, scatter or sendrecv reads them."""
    p2p_notes: tuple[str, ...] = ()
    """What NCCL does not read of them as written (``128K`` is 128 to NCCL), or a value it cannot run with."""
    ll128_forced: bool = False
    """NCCL_PROTO names the op's function and leaves LL128 on: NCCL then runs LL128 without its default conditions
    (src/graph/tuning.cc: ``protoEnable`` 1 from ``parseList``, where the default is 2, "only where tested")."""
    nvls_chunk_bytes: int | None = None
    """NCCL_NVLS_CHUNKSIZE as NCCL reads it (None: not set, or a value NCCL cannot run with: :attr:`nvls_notes`)."""
    nvls_notes: tuple[str, ...] = ()
    """What NCCL does not read of NCCL_NVLS_CHUNKSIZE as written, what the model took of it."""

    def applied_to(self, inputs: NcclGraphInputs) -> NcclGraphInputs:
        """NCCL's graph inputs under these settings: LL128 forced on, NCCL_NVLS_CHUNKSIZE's chunk."""
        return replace(inputs, ll128_forced=inputs.ll128_forced or self.ll128_forced,
                       nvls_chunk_bytes=self.nvls_chunk_bytes or inputs.nvls_chunk_bytes)


def _selection(settings: Mapping[str, str], var: str, vocabulary: tuple[str, ...],
               func: str | None) -> tuple[frozenset[str] | None, str]:
    value = settings.get(var)
    if not value or func is None:
        return None, ""
    try:
        return enabled(parse_selection(value, vocabulary, var), func, vocabulary), f"{var}={value}"
    except ConfigError:
        return None, ""


def model_settings(settings: Mapping[str, str], op: str) -> ModelSettings:
    """How ``settings`` (a configuration's, or ``predict --setting``'s) change the model of ``op``."""
    func = OP_FUNC.get(op)
    algos, algo_text = _selection(settings, "NCCL_ALGO", ALGORITHMS, func)
    protos, proto_text = _selection(settings, "NCCL_PROTO", PROTOCOLS, func)
    if str(settings.get("NCCL_NVLS_ENABLE", "")).strip() == "0":
        algos = (algos if algos is not None else frozenset(ALGORITHMS)) - NVLS_ALGOS
        algo_text = ", ".join(t for t in (algo_text, "NCCL_NVLS_ENABLE=0") if t)
    net = net_settings(settings)
    bounds = {k: str(settings[k]) for k in CHANNEL_LIMIT_NAMES if k in settings}
    p2p_op = op in P2P_MODELLED_OPS
    p2p, p2p_notes = p2p_tuning(settings) if p2p_op else (DEFAULT_P2P_TUNING, [])
    unmodelled = tuple(f"{k}={v}" for k, v in sorted(settings.items())
                       if env_role(k) == "tuning" and k not in MODELLED_SETTINGS
                       and not (p2p_op and k in P2P_TUNING_VARIABLES))
    nvls_chunk, nvls_notes = _nvls_chunk(settings)
    return ModelSettings(algos=algos, protos=protos, forced=", ".join(t for t in (algo_text, proto_text) if t),
                         net=net, channel_bounds=bounds or None, unmodelled=unmodelled, p2p=p2p,
                         p2p_notes=tuple(p2p_notes), ll128_forced=_ll128_forced(settings, func),
                         nvls_chunk_bytes=nvls_chunk, nvls_notes=tuple(nvls_notes))


def _nvls_chunk(settings: Mapping[str, str]) -> tuple[int | None, list[str]]:
    """NCCL_NVLS_CHUNKSIZE of ``settings`` as NCCL reads it (src/transport/nvls.cc ``ncclParamNvlsChunkSize``,
    strtoll: ``128K`` is 128), with what the model takes of it; None where unset or not a chunk NCCL can run."""
    name = "NCCL_NVLS_CHUNKSIZE"
    text = str(settings.get(name, "")).strip()
    if not text:
        return None, []
    value, ignored = nccl_param_int(text)
    notes = []
    if ignored:
        notes.append(ignored_unit_note(name, text, value, ignored))
    if value <= 0:
        notes.append(f"{name}={text}: NCCL reads {value}, not a chunk it can run with; the model keeps NCCL's "
                     f"default ({NVLS_CHUNK_DEFAULT_BYTES})")
        return None, notes
    notes.append(f"{name}={value}: taken as NVLS's largest chunk inside one NVLink domain (NCCL shrinks it for "
                 "smaller messages, src/enqueue.cc calcCollChunking; at most the Simple step, 512 KiB at the default "
                 "NCCL_BUFFSIZE); on sm100 it paces NVLS through its shortest step")
    return value, notes


def merged_settings(sources: Sequence[tuple[str, Mapping[str, str]]],
                    given: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(settings, notes): the NCCL variables of one job from several of its sources (``(label, env)``: each rank
    log's ``set by environment`` lines), ``given`` (the user's ``--setting``) winning. A variable the sources set
    to different values is left out, at NCCL's default, with a note naming the values and where each came from."""
    seen: dict[str, dict[str, list[str]]] = {}
    for label, env in sources:
        for name, value in env.items():
            seen.setdefault(name, {}).setdefault(str(value), []).append(label)
    out: dict[str, str] = {}
    notes = []
    for name, values in seen.items():
        if given and name in given:
            continue
        if len(values) == 1:
            out[name] = next(iter(values))
            continue
        where = "; ".join(f"{value!r} in {', '.join(labels)}" for value, labels in values.items())
        notes.append(f"the job's logs set {name} to different values ({where}): the model takes NCCL's default "
                     f"for it (--setting {name}=VALUE to state the job's)")
    out.update(given or {})
    return out, notes


def net_settings(settings: Mapping[str, str]) -> NetSettings:
    """The NCCL variables of ``settings`` that change how the graphs cross nodes (:class:`NetSettings`)."""
    return NetSettings(ib_hca=str(settings.get("NCCL_IB_HCA", "")).strip() or None,
                       gdr_level=str(settings.get("NCCL_NET_GDR_LEVEL", "")).strip() or None,
                       pxn_disable=pxn_disabled(settings.get("NCCL_PXN_DISABLE")))


def _ll128_forced(settings: Mapping[str, str], func: str | None) -> bool:
    value = settings.get("NCCL_PROTO")
    if not value or func is None:
        return False
    try:
        entries = parse_selection(value, PROTOCOLS, "NCCL_PROTO")
    except ConfigError:
        return False
    return covers(entries, func) and "LL128" in enabled(entries, func, PROTOCOLS)


def nics_left_text(params: LinkParams) -> str:
    """What the model counts of the NICs NCCL_IB_HCA leaves (``params`` built with it)."""
    return (f"the model counts the {params.nics_per_node} NIC(s) per node the setting leaves NCCL "
            f"({params.nics_per_node} x {params.nic_gbps:g} GB/s)")


def ll128_forced_text(read: ModelSettings, reason: str) -> str:
    """What to say when ``read`` turns LL128 on where NCCL's default leaves it off (``reason``, from
    :func:`collscope.analysis.nccl_model.model.ll128_default_off`)."""
    return (f"{read.forced} turns LL128 on where NCCL's default leaves it off ({reason}): NCCL runs it as set; its "
            "source enables LL128 by default only where it is tested ('Other cases are not tested and may cause "
            "silent data corruption', src/graph/tuning.cc), so check the run's #wrong column; the model rates LL128 "
            "with NCCL's own tables")


UNMODELLED_WHY = {
    "NCCL_COLLNET_ENABLE": "CollNet (SHARP) runs only where a CollNet network plugin is loaded, which the input does "
                           "not show; predict --collnet models the job with it",
}
"""Why the model leaves a variable at NCCL's default, where there is more to say than that it does."""


def unmodelled_text(read: ModelSettings) -> str:
    """``NCCL_BUFFSIZE=1048576 set, which the model does not take (...)`` for :attr:`ModelSettings.unmodelled`,
    with :data:`UNMODELLED_WHY`'s reason for each variable that has one."""
    why = "; ".join(f"{name}: {UNMODELLED_WHY[name]}" for name in (u.partition("=")[0] for u in read.unmodelled)
                    if name in UNMODELLED_WHY)
    return (f"{', '.join(read.unmodelled)} set, which the model does not take (it assumes NCCL's default for each"
            + (f"; {why})" if why else ")"))
