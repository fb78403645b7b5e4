"""GPUDirect RDMA between each GPU and its NIC, decided by NCCL's own rule, with the variable that changes it.

NCCL's rule (NVIDIA/nccl src/graph/paths.cc ``ncclTopoCheckGdr``, read at v2.22.3-v2.30.7; called for sends with
read=1 and receives with read=0 by src/transport/net.cc ``sendSetup``/``recvSetup``):

- both ends must support it: the NIC plugin's ``gdrSupport`` (IB: the nvidia_peermem/nv_peer_mem module or DMA-BUF,
  src/transport/net_ib/gdr.cc ``ncclIbGdrSupport``) -- not visible in these captures, so stated as a condition;
- GDR is used when the GPU-NIC path type is at most ``NCCL_NET_GDR_LEVEL``; the default level is PXB
  (``int netGdrLevel = PATH_PXB``), so PIX and PXB get GDR and PHB and SYS do not. NCCL has one CPU node per NUMA
  domain, so ``nvidia-smi topo -m``'s NODE (across host bridges of one NUMA node) is NCCL's PHB;
- the level's names are NCCL's path types (``ncclGetLevel``, exact upper-case match against ``topoPathTypeStr``);
  legacy integers map 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and above SYS (``levelsOldToNew``);
- Grace C2C (GH200, GB200, GB300: the GPU reaches its CPU over NVLink-C2C): a NIC on that CPU's PCIe (PHB from
  the GPU) is path type P2C; ``NCCL_NET_GDR_C2C`` (added in 2.26.2, default 0; default 1 since 2.27.3) makes GDR
  apply there (2.27-2.28: the distance is taken as C2C; 2.29+: the default level itself is P2C). Before 2.26
  GDR is off there unless ``NCCL_NET_GDR_LEVEL=SYS`` (NVIDIA/nccl#1579, NCCL 2.24.3 on GH200: all_reduce busbw
  +20% with it);
- reads (sends): ``NCCL_NET_GDR_READ`` (default -2, auto) uses GDR for sends on sm >= 80; before Ampere only when the
  GPU has an NVLink peer (or is the only GPU); 0 turns GDR off for sends.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from collscope.topo.gpus import gpu_generation
from collscope.topo.paths import is_nvlink, path_rank
from collscope.vocab.nccl import NET_GDR_DEFAULT_LEVEL, PATH_LEVELS, net_gdr_level

__all__ = ["NCCL_PATH_TYPES", "GdrDecision", "GpuNic", "gdr_decision", "gdr_level", "gpu_nics", "gpu_on_c2c",
           "nccl_path_type"]

NCCL_PATH_TYPES: tuple[str, ...] = PATH_LEVELS
"""NCCL's path types a GDR level names, closest first (:data:`collscope.vocab.nccl.PATH_LEVELS`)."""
_DEFAULT_LEVEL = NET_GDR_DEFAULT_LEVEL
_SMI_TO_NCCL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
_GRACE = re.compile(r"(?<![A-Z0-9])G[HB][0-9]00(?![0-9])", re.ASCII)
_COST = ("the NIC then reaches GPU memory through the CPU's root complex (PCIe peer-to-peer across the host "
         "bridge{smp}), which many CPUs forward well below the PCIe rate: compare nccl-tests busbw with and "
         "without it before keeping it")


def gdr_level(value: str | None) -> str:
    """The level NCCL reads from ``NCCL_NET_GDR_LEVEL`` (``None``: NCCL's default PXB), as a path type name
    (:func:`collscope.vocab.nccl.net_gdr_level`)."""
    return net_gdr_level(value)


def nccl_path_type(smi_class: str, *, c2c: bool = False) -> str | None:
    """NCCL's path type for an ``nvidia-smi topo -m`` GPU-NIC class (``None`` for classes a NIC cannot have)."""
    nccl = _SMI_TO_NCCL.get(smi_class)
    if nccl == "PHB" and c2c:
        return "P2C"  # paths.cc: GPU-CPU C2C merged with CPU-NIC PHB (mergePathType / "C2C + PHB" update)
    return nccl


def gpu_on_c2c(attrs: dict[str, Any], edge_kinds: Iterable[str] = ()) -> bool:
    """Whether a GPU reaches its CPU over Grace NVLink-C2C: a ``<c2c>`` link in the capture, or a Grace superchip
    named by its model (GH200, GB200, GB300)."""
    if "c2c" in edge_kinds:
        return True
    names = " ".join(str(attrs.get(k) or "") for k in ("model", "generation")).upper()
    return _GRACE.search(names) is not None


@dataclass(frozen=True, slots=True)
class GdrDecision:
    """GPUDirect RDMA between one GPU and one NIC as NCCL decides it."""

    gpu: str
    nic: str
    path: str
    """The ``nvidia-smi topo -m`` class (``"NODE"``)."""
    nccl_path: str
    """NCCL's path type for it (NODE is NCCL's ``"PHB"``; Grace C2C + PHB is ``"P2C"``)."""
    level: str
    gdr: bool
    why: str
    variable: str
    """What changes the decision (``"NCCL_NET_GDR_LEVEL=PHB"``), with its cost when it turns GDR on."""
    read: str
    """What NCCL does for sends (GDR reads, ``NCCL_NET_GDR_READ``)."""
    unsupported: bool = False
    """The GPU's platform has no GPUDirect RDMA at all (the GPU table's ``no_gdr``): no variable changes ``gdr``."""

    def to_dict(self) -> dict[str, Any]:
        return {"nic": self.nic, "path": self.path, "nccl_path": self.nccl_path, "gdr_level": self.level,
                "gdr": self.gdr, "why": self.why, "variable": self.variable, "gdr_read": self.read,
                "gdr_unsupported": self.unsupported}


def _read_rule(sm: int | None, nvlink_peer: bool) -> str:
    base = "sends (GDR reads, NCCL_NET_GDR_READ default auto)"
    if sm is None:
        return f"{base}: on for sm >= 80 (Ampere and newer); older GPUs only with an NVLink peer"
    if sm >= 80 or nvlink_peer:
        why = f"sm {sm} >= 80" if sm >= 80 else f"sm {sm} < 80 but the GPU has an NVLink peer"
        return f"{base}: on ({why}); NCCL_NET_GDR_READ=0 turns them off"
    return f"{base}: off (sm {sm} < 80 and no NVLink peer); NCCL_NET_GDR_READ=1 turns them on"


def gdr_decision(gpu: str, nic: str, path: str, *, c2c: bool = False, level: str | None = None,
                 sm: int | None = None, nvlink_peer: bool = False, no_gdr: str = "") -> GdrDecision | None:
    """NCCL's GPUDirect RDMA decision for ``gpu`` and ``nic`` at ``nvidia-smi topo -m`` class ``path``.

    ``level`` is ``NCCL_NET_GDR_LEVEL`` as set (``None``: unset, NCCL's default); ``c2c`` says the GPU sits on a
    Grace CPU over NVLink-C2C; ``no_gdr`` is the GPU table's reason GPUDirect RDMA cannot work on this GPU at all
    (``GpuGeneration.no_gdr``): then no level changes the answer. ``None`` for a class a GPU-NIC pair cannot have
    (``X``, ``NV#``)."""
    nccl = nccl_path_type(path, c2c=c2c)
    if nccl is None:
        return None
    chosen = gdr_level(level)
    if no_gdr:
        return GdrDecision(gpu, nic, path, nccl, chosen, False, no_gdr,
                           "none: no NCCL variable enables it on this GPU (NCCL_NET_GDR_LEVEL and NCCL_NET_GDR_C2C "
                           "do not change it)", "sends: through host memory as well (no GPUDirect RDMA on this GPU)",
                           unsupported=True)
    read = _read_rule(sm, nvlink_peer)
    condition = " (if nvidia_peermem or DMA-BUF is available to the NIC: not visible in these captures)"
    as_nccl = path if nccl == path else f"{path} (NCCL's {nccl})"
    if nccl == "P2C" and level is None:
        return GdrDecision(gpu, nic, path, nccl, "P2C", True,
                           f"{as_nccl}: NIC on the Grace CPU the GPU reaches over C2C; NCCL >= 2.27 uses GPUDirect "
                           f"RDMA there (NCCL_NET_GDR_C2C=1 by default){condition}",
                           "NCCL_NET_GDR_C2C=0 turns it off; NCCL 2.26 needs NCCL_NET_GDR_C2C=1, earlier "
                           "versions NCCL_NET_GDR_LEVEL=SYS", read)
    on = NCCL_PATH_TYPES.index(nccl) <= NCCL_PATH_TYPES.index(chosen)
    source = f"NCCL_NET_GDR_LEVEL={chosen}" if level is not None else f"NCCL_NET_GDR_LEVEL's default {chosen} (unset)"
    if on:
        why = f"{as_nccl} is within {source}{condition}"
        if c2c and nccl in ("PIX", "PXB"):
            why += "; on a C2C system NCCL maps the buffer for PCIe (GDR mode PCI)"
        if level is not None and NCCL_PATH_TYPES.index(nccl) > NCCL_PATH_TYPES.index(_DEFAULT_LEVEL):
            smp = " and the SMP interconnect" if nccl == "SYS" else ""
            variable = f"set: unset it to get NCCL's default; {_COST.format(smp=smp)}"
        else:
            variable = "NCCL_NET_GDR_LEVEL=LOC (or 0) turns it off"
        return GdrDecision(gpu, nic, path, nccl, chosen, True, why, variable, read)
    why = (f"{as_nccl} is beyond {source}: the NIC sends from and receives into host memory, the proxy copies "
           "through it")
    if NCCL_PATH_TYPES.index(nccl) <= NCCL_PATH_TYPES.index(_DEFAULT_LEVEL):  # off only by a level set below it
        variable = (f"unsetting NCCL_NET_GDR_LEVEL (NCCL's default {_DEFAULT_LEVEL}) or setting it to {nccl} turns "
                    "it on")
        return GdrDecision(gpu, nic, path, nccl, chosen, False, why, variable, read)
    smp = " and the SMP interconnect" if nccl == "SYS" else ""
    need = "SYS" if nccl == "SYS" else ("P2C" if nccl == "P2C" else "PHB")
    variable = f"NCCL_NET_GDR_LEVEL={need} turns it on; {_COST.format(smp=smp)}"
    return GdrDecision(gpu, nic, path, nccl, chosen, False, why, variable, read)


@dataclass(frozen=True, slots=True)
class GpuNic:
    """A GPU's NIC for NCCL (its nearest active compute NICs), GDR for it, and the nearer NICs passed over."""

    gpu: str
    nics: tuple[str, ...]
    """Nearest compute NICs (empty: none); NCCL uses one of them, all at the same path class."""
    decision: GdrDecision | None
    passed_over: tuple[tuple[str, str], ...]
    """NICs nearer to the GPU than ``nics`` but never its NIC (down, front-end, slower, front-end bond): name, why."""
    pxn: str = ""
    """When GDR is off for the GPU's own NIC and an NVLink peer has a NIC with GDR: NCCL's PXN relay (empty
    otherwise)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nics": list(self.nics), "passed_over": [{"name": n, "why": w}
                                                                        for n, w in self.passed_over]}
        if self.pxn:
            out["pxn"] = self.pxn
        if self.decision is None:
            return {**out, "nic": None, "gdr": None,
                    "why": "no compute NIC" if not self.nics else "path class not captured"}
        return {**out, **self.decision.to_dict()}


def _sm_and_no_gdr(attrs: dict[str, Any]) -> tuple[int | None, str]:
    """The GPU's sm (captured, else its table row's) and the table's reason GPUDirect RDMA cannot work on it (empty
    when none or the GPU is unknown): one look-up of the GPU table, by name, else by the captured sm."""
    sm = int(attrs["sm"]) if attrs.get("sm") is not None else None
    gen = gpu_generation(attrs.get("generation") or attrs.get("model"), sm=sm)
    if gen is None:
        return sm, ""
    return (sm if sm is not None else gen.sm), gen.no_gdr


def gpu_nics(node: Any, *, level: str | None = None, pxn: bool = True) -> dict[str, GpuNic]:
    """Each GPU's NIC and NCCL's GPUDirect RDMA decision for it (``node``: a ``NodeTopology`` or any object with
    ``graph``, ``gpus``, ``nic_choices()``, ``nearest_nics()`` and ``path_class()``); ``level``:
    ``NCCL_NET_GDR_LEVEL`` as set (None: NCCL's default); ``pxn``: False for ``NCCL_PXN_DISABLE=1`` (no relay)."""
    g = node.graph
    choices = node.nic_choices()
    out: dict[str, GpuNic] = {}
    for gpu in node.gpus:
        nearest, cls = node.nearest_nics(gpu)
        limit = path_rank(cls) if cls else (len(NCCL_PATH_TYPES), 0)
        passed = []
        for name, choice in choices.items():
            if choice.left_out and path_rank(node.path_class(gpu, name)) < limit:
                why = choice.why if choice.why.startswith(choice.role) else f"{choice.role}: {choice.why}"
                passed.append((name, "; ".join(w for w in (why, choice.bond) if w)))
        decision = None
        if nearest and cls:
            attrs = g.nodes[gpu]
            kinds = [d.get("kind") for _, _, d in g.edges(gpu, data=True)]
            peer = any(is_nvlink(node.path_class(gpu, o)) for o in node.gpus if o != gpu) or len(node.gpus) == 1
            sm, no_gdr = _sm_and_no_gdr(attrs)
            decision = gdr_decision(gpu, nearest[0], cls, c2c=gpu_on_c2c(attrs, kinds), level=level,
                                    sm=sm, nvlink_peer=peer, no_gdr=no_gdr)
        out[gpu] = GpuNic(gpu, tuple(nearest), decision, tuple(passed))
    for gpu, item in out.items():
        if pxn and item.decision is not None and not item.decision.gdr:
            relays = [(o, other.decision.nic) for o, other in out.items() if o != gpu and other.decision is not None
                      and other.decision.gdr and is_nvlink(node.path_class(gpu, o))]
            if relays:
                out[gpu] = dataclasses.replace(item, pxn=_pxn_text(relays))
    return out


def _pxn_text(relays: list[tuple[str, str]]) -> str:
    """paths.cc ncclTopoComputePaths: a GPU sends through an NVLink peer whose NIC is within the GDR level (PXN,
    NCCL_PXN_DISABLE=0 by default, GPU->NIC direction only); receives are decided as above."""
    shown = ", ".join(f"{peer} ({nic})" for peer, nic in relays[:3])
    more = f" (+{len(relays) - 3})" if len(relays) > 3 else ""
    return (f"sends can go over NVLink through {shown}{more}, whose NICs have GPUDirect RDMA (PXN, on unless "
            "NCCL_PXN_DISABLE=1); receives still go through host memory")
