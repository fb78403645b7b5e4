"""Why a grid combination cannot run (or would not measure what it says): the rules ``plan_sweep`` applies.

Each rule returns a reason or None; :func:`skip_reason` returns the first reason. Facts:
``reference/nccl-facts.md`` sections 1.4 (algorithm/protocol pairs, enable rules) and 2 (versions of knobs).

Without a topology, hardware rules (NVLS needs NVSwitch and Hopper+, CollNetDirect needs NVSwitch, LL128 needs
NVLink) are not applied: such points are kept, which says nothing about whether they are possible; the sweep
verifies from NCCL's debug output what really ran.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from collscope.errors import ConfigError
from collscope.sweeps.spec import SweepSpec
from collscope.topo.gpus import gpu_generation
from collscope.topo.model import NodeTopology
from collscope.vocab.engines import engine_row
from collscope.vocab.knobs import DYNAMIC_RULES, KNOBS
from collscope.vocab.nccl import (
    ALGORITHMS,
    ALGOS_FOR_FUNC,
    OP_FUNC,
    PROTOCOLS,
    enabled,
    listed,
    pair_runs,
    parse_selection,
    per_function_syntax,
)
from collscope.vocab.ompi import OMPI_ALGORITHMS

__all__ = ["PlanContext", "skip_reason", "parse_nccl_version", "collnet_plugin_hint", "nvls_capable"]

_SINCE: dict[str, tuple[int, int, int]] = {
    "CollNetDirect": (2, 14, 0), "CollNetChain": (2, 14, 0), "NVLS": (2, 17, 0), "NVLSTree": (2, 18, 0),
    "PAT": (2, 23, 0), "NCCL_MIN_CTAS": (2, 17, 0), "NCCL_MAX_CTAS": (2, 17, 0), "NCCL_NVLS_ENABLE": (2, 17, 0),
    "NCCL_PXN_DISABLE": (2, 12, 0), "NCCL_IB_QPS_PER_CONNECTION": (2, 10, 0), "NCCL_COLLNET_ENABLE": (2, 6, 0),
}
_PER_FUNC_SINCE = (2, 24, 0)
_NVLS_ONE_DOMAIN = (2, 18, 0)
"""From NCCL 2.18 multi-node NVLS needs CollNet (src/graph/tuning.cc: ``if (nNodes > 1) algoEnable[NVLS] = 0``
without CollNet support; 2.24+: ``collnetEnable == 0 && NVLS && nNodes > 1`` disables it)."""
_CTAS_64_SINCE = (2, 25, 0)


def parse_nccl_version(text: str) -> tuple[int, int, int]:
    """``"2.21.5"`` (optionally ``+cuda12.4``) -> (2, 21, 5)."""
    m = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[-+].*)?\s*", text)
    if not m:
        raise ConfigError(f"nccl_version={text!r} is not a version like '2.21.5'")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _v(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def collnet_plugin_hint(env: Mapping[str, str]) -> bool:
    """Whether the environment names a CollNet-capable plugin (``NCCL_COLLNET_PLUGIN`` or ``NCCL_NET_PLUGIN``)."""
    return any(env.get(v, "").strip().lower() not in ("", "none") for v in ("NCCL_COLLNET_PLUGIN", "NCCL_NET_PLUGIN"))


def _gpu_sm(topology: NodeTopology, gpu: str) -> int | None:
    d = topology.graph.nodes[gpu]
    if d.get("sm") is not None:
        return int(d["sm"])
    gen = gpu_generation(str(d.get("generation") or d.get("model") or "") or None)
    return None if gen is None else gen.sm


def nvls_capable(topology: NodeTopology) -> tuple[bool | None, str]:
    """(True/False/None when unknown, why): NVLS needs NVSwitch and Hopper (sm90) or newer GPUs."""
    if not topology.has_nvswitch:
        return False, f"{topology.host} has no NVSwitch"
    sms = [_gpu_sm(topology, g) for g in topology.gpus]
    if not sms or any(s is None for s in sms):
        return None, "GPU generation unknown"
    if min(s for s in sms if s is not None) < 90:
        return False, f"{topology.host}'s GPUs are older than Hopper (sm{min(s for s in sms if s is not None)})"
    return True, "NVSwitch with Hopper+ GPUs"


@dataclass(frozen=True, kw_only=True)
class PlanContext:
    """What the rules know besides the settings."""

    spec: SweepSpec
    topology: NodeTopology | None = None
    nccl_version: tuple[int, int, int] | None = None
    collnet_plugin: bool = False
    nvl_domains: int | None = None
    """NVLink domains the ranks span (what NCCL counts as nodes: src/init.cc sets ``nNvlDomains = nNodes``); None:
    unknown, the spec's ``nnodes`` stands in (right for HGX nodes; a multi-node NVLink rack such as GB200 NVL72 is
    one domain however many trays it spans)."""

    @property
    def ppn(self) -> int:
        return max(1, self.spec.nranks // max(1, self.spec.nnodes))

    @property
    def domains(self) -> int:
        """NVLink domains: :attr:`nvl_domains`, else ``nnodes``."""
        return self.nvl_domains if self.nvl_domains is not None else self.spec.nnodes


def skip_reason(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    """Why ``settings`` (validated, normalised, forced knobs only) should not run for ``op``; None if they should."""
    for rule in (_engine, _ompi, _single_node, _min_max, _version, _nccl_algo_proto, _nccl_enables):
        reason = rule(op, settings, ctx)
        if reason:
            return reason
    return None


def _engine(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    row = engine_row(ctx.spec.engine, ctx.spec.backend)
    for name in settings:
        family = KNOBS[name].family
        if not row.honours(family):
            return (f"{name}: knob has no effect on this engine ({row.name}, which reads "
                    f"{', '.join(sorted(row.knob_families))} knobs, not {family})")
    return None


def _ompi(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    for name, value in settings.items():
        target = KNOBS[name].collective
        if target is None:
            continue
        if target != op:
            return f"{name} tunes {target}, not {op}: it has no effect on this point"
        if settings.get(DYNAMIC_RULES) == "0":
            return f"{name} is ignored unless {DYNAMIC_RULES}=1 (it is 0 here)"
        coll = name.removeprefix("OMPI_MCA_coll_tuned_").removesuffix("_algorithm")
        if OMPI_ALGORITHMS[coll][int(value)] == "two_proc" and ctx.spec.nranks != 2:
            return f"{name}={value} (two_proc) runs only with 2 ranks, here {ctx.spec.nranks}"
    return None


def _single_node(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    if ctx.spec.nnodes == 1:
        for name in settings:
            if KNOBS[name].inter_node:
                return f"{name}: single node: no inter-node traffic"
    return None


def _min_max(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    for lo, hi in (("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"), ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")):
        if lo in settings and hi in settings and int(settings[lo]) > int(settings[hi]):
            return f"{lo}={settings[lo]} is above {hi}={settings[hi]}"
    return None


def _version(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    have = ctx.nccl_version
    if have is None:
        return None
    for name, since in _SINCE.items():
        if name in settings and have < since:
            return f"{name} needs NCCL {_v(since)}+, this is NCCL {_v(have)}"
    for name, universe in (("NCCL_ALGO", ALGORITHMS), ("NCCL_PROTO", PROTOCOLS)):
        if name not in settings:
            continue
        entries = parse_selection(settings[name], universe, name)
        if per_function_syntax(entries) and have < _PER_FUNC_SINCE:
            return f"{name}={settings[name]}: the per-function syntax needs NCCL {_v(_PER_FUNC_SINCE)}+, " \
                   f"this is NCCL {_v(have)}"
        for algo in sorted({n for e in entries for n in e.names}):
            if algo in _SINCE and have < _SINCE[algo]:
                return f"{name}: {algo} needs NCCL {_v(_SINCE[algo])}+, this is NCCL {_v(have)}"
    for name in ("NCCL_MIN_CTAS", "NCCL_MAX_CTAS"):
        if name in settings and int(settings[name]) > 32 and have < _CTAS_64_SINCE:
            return f"{name}={settings[name]}: above 32 needs NCCL {_v(_CTAS_64_SINCE)}+, this is NCCL {_v(have)}"
    return None


def _unavailable(ctx: PlanContext, settings: Mapping[str, str]) -> dict[str, str]:
    """Algorithm -> why NCCL cannot run it in this sweep's environment."""
    out: dict[str, str] = {}
    if ctx.topology is not None:
        ok, why = nvls_capable(ctx.topology)
        if ok is False:
            out["NVLS"] = out["NVLSTree"] = f"NVLS needs NVSwitch and Hopper or newer GPUs: {why}"
        if not ctx.topology.has_nvswitch:
            out["CollNetDirect"] = f"CollNetDirect needs NVSwitch: {ctx.topology.host} has none"
    if settings.get("NCCL_NVLS_ENABLE") == "0":
        out["NVLS"] = out["NVLSTree"] = "NVLS is disabled by NCCL_NVLS_ENABLE=0"
    if ctx.spec.nnodes == 1:
        out.setdefault("NVLSTree", "NCCL disables NVLSTree on a single node")
    collnet_on = {**ctx.spec.fixed_env, **settings}.get("NCCL_COLLNET_ENABLE") == "1" and ctx.collnet_plugin
    if ctx.domains > 1 and not collnet_on and (ctx.nccl_version is None or ctx.nccl_version >= _NVLS_ONE_DOMAIN):
        counted = " (one per node: no NVLink domain count given)" if ctx.nvl_domains is None else ""
        out.setdefault("NVLS", f"NCCL disables NVLS across {ctx.domains} NVLink domains{counted} unless CollNet is "
                       "enabled (NCCL_COLLNET_ENABLE=1 with a CollNet plugin): NCCL 2.18+ src/graph/tuning.cc; a "
                       "forced NVLS fails with 'no algorithm/protocol available' from NCCL 2.24, ran Ring/Tree before")
    if not ctx.collnet_plugin:
        for algo in ("CollNetDirect", "CollNetChain"):
            out[algo] = f"{algo} needs a CollNet (SHARP) plugin; set collnet_plugin: true in the spec (or " \
                        "NCCL_COLLNET_PLUGIN / NCCL_NET_PLUGIN) where one is installed"
    if settings.get("NCCL_COLLNET_ENABLE") == "0":
        out["CollNetDirect"] = out["CollNetChain"] = "CollNet is disabled by NCCL_COLLNET_ENABLE=0"
    if ctx.ppn > 1:
        out["PAT"] = f"PAT runs only with 1 GPU per node, here {ctx.ppn}"
    return out


def _ll128_problem(ctx: PlanContext) -> str | None:
    topo = ctx.topology
    if topo is None:
        return None
    sms = [s for s in (_gpu_sm(topo, g) for g in topo.gpus) if s is not None]
    if sms and min(sms) < 70:
        return f"NCCL enables LL128 only on sm70+ (here sm{min(sms)})"
    if ctx.ppn > 1 and len(topo.gpus) > 1 and all(len(d) < 2 for d in topo.nvlink_domains()):
        return f"NCCL enables LL128 only over NVLink between GPUs; {topo.host} has none"
    return None


def _nccl_algo_proto(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    algo_v, proto_v = settings.get("NCCL_ALGO"), settings.get("NCCL_PROTO")
    if algo_v is None and proto_v is None:
        return None
    func = OP_FUNC.get(op)
    if func is None:
        return f"NCCL_ALGO/NCCL_PROTO have no effect on {op} (point-to-point, no collective algorithm)"
    algos = parse_selection(algo_v, ALGORITHMS, "NCCL_ALGO") if algo_v else ()
    protos = parse_selection(proto_v, PROTOCOLS, "NCCL_PROTO") if proto_v else ()
    unavailable = _unavailable(ctx, settings)
    for algo in sorted(listed(algos, func)):
        if algo in unavailable:
            return f"NCCL_ALGO={algo_v}: {unavailable[algo]}"
    forced_protos = listed(protos, func)
    if "LL128" in forced_protos:
        problem = _ll128_problem(ctx)
        if problem:
            return f"NCCL_PROTO={proto_v}: {problem}; forcing it elsewhere can corrupt data (NCCL docs)"
    can = enabled(algos, func, ALGORITHMS) & ALGOS_FOR_FUNC[func]
    if not can:
        return f"NCCL_ALGO={algo_v} leaves no algorithm for {func} ({func} runs " \
               f"{', '.join(a for a in ALGORITHMS if a in ALGOS_FOR_FUNC[func])})"
    usable = can - set(unavailable)
    use_protos = enabled(protos, func, PROTOCOLS)
    if not any(pair_runs(a, p) for a in usable for p in use_protos):
        shown = ", ".join(a for a in ALGORITHMS if a in usable) or "none available"
        return f"no algorithm/protocol pair NCCL runs for {func}: algorithms {shown} x protocols " \
               f"{', '.join(p for p in PROTOCOLS if p in use_protos)} (NVLS, NVLSTree, PAT and CollNet run only " \
               "with Simple)"
    return None


def _nccl_enables(op: str, settings: Mapping[str, str], ctx: PlanContext) -> str | None:
    if settings.get("NCCL_NVLS_ENABLE") == "1" and ctx.topology is not None:
        ok, why = nvls_capable(ctx.topology)
        if ok is False:
            return f"NCCL_NVLS_ENABLE=1 fails without NVLS hardware (NVSwitch, Hopper+): {why}"
    if settings.get("NCCL_COLLNET_ENABLE") == "1" and not ctx.collnet_plugin:
        return "NCCL_COLLNET_ENABLE=1 needs a CollNet (SHARP) plugin; set collnet_plugin: true in the spec (or " \
               "NCCL_COLLNET_PLUGIN / NCCL_NET_PLUGIN) where one is installed"
    if settings.get("NCCL_ALGO") and settings.get("NCCL_COLLNET_ENABLE") == "0":
        entries = parse_selection(settings["NCCL_ALGO"], ALGORITHMS, "NCCL_ALGO")
        if any(n.startswith("CollNet") for e in entries if not e.exclude for n in e.names):
            return "NCCL_ALGO forces CollNet but NCCL_COLLNET_ENABLE=0 disables it"
    return None
