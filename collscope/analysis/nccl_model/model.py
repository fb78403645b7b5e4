"""NCCL's own cost model: bandwidth and latency per (collective, algorithm, protocol), time per size.

Follows ``src/graph/tuning.cc`` (``ncclTopoTuneModel``) and ``src/enqueue.cc`` (``ncclTopoGetAlgoTime``,
``topoGetAlgoInfo``) of NCCL 2.30.7 as described in ``../shared/reference/nccl-facts.md`` sections 1.4 (bandwidth),
1.5 (latency), 1.6 (time, tree correction, plateau, choice), and 1.7 for ``version="2.19"``. Inputs are the
per-algorithm graphs NCCL's topology search produces (:class:`NcclGraphInputs`); :mod:`.nccl_search` approximates
that search from a topology.

Everything here is NCCL's, cited. What nccl-tests measures beyond it (terms fitted on published results) is
:mod:`.measured`; the choice and its expected measurement (:func:`~.choice.nccl_choice`) are :mod:`.choice`.

Not modelled: tuner plugins, ``NCCL_THREAD_THRESHOLDS`` / channel reduction after the choice, FP8 penalties,
CollNet plugins that implement iallgather/ireducescatter (multi-node NVLS/CollNet AllGather/ReduceScatter are off),
the CUDA 11.8 sm90 2-rank LL128 exception, aggregated operations (one operation per launch: latCount = 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from collscope.analysis.model_types import Prediction, make_prediction
from collscope.analysis.nccl_model.constants import (
    ALGOS,
    PATH_TYPES,
    PROTOS,
    TREE_CORRECTION,
    compcap_index,
    ll128_default_sms,
    nccl_constants,
)
from collscope.errors import ConfigError
from collscope.vocab.nccl import OP_FUNC, ll128_network_limit

__all__ = [
    "NVLS_CHUNK_DEFAULT_BYTES",
    "NcclGraph",
    "NcclGraphInputs",
    "NcclChoice",
    "NCCL_OPS",
    "nccl_bandwidth",
    "nvls_graph_cap",
    "nccl_latency_us",
    "nccl_time_us",
    "nccl_predictions",
    "ll128_default_off",
]

NCCL_OPS = OP_FUNC
"""collscope op -> NCCL function (``ncclFuncStr``), the vocabulary's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclGraph:
    """One graph of NCCL's topology search (what ``NCCL_DEBUG_SUBSYS=GRAPH`` prints, nccl-facts 1.3)."""

    n_channels: int
    bw_intra: float
    """GB/s per channel inside a node."""
    bw_inter: float
    """GB/s per channel between nodes."""
    type_intra: str = "NVL"
    """Path type inside the node, one of :data:`PATH_TYPES`."""
    type_inter: str = "PIX"
    """Path type from GPU to NIC."""
    pattern: Literal["ring", "balanced_tree", "split_tree", "tree", "nvls", "collnet_direct"] = "ring"
    same_channels: bool = True
    latency_inter_us: float = 0.0

    def __post_init__(self) -> None:
        for name in ("type_intra", "type_inter"):
            if getattr(self, name) not in PATH_TYPES:
                raise ConfigError(f"{name} {getattr(self, name)!r} is not an NCCL path type; valid: "
                                  f"{', '.join(PATH_TYPES)}")


NVLS_CHUNK_DEFAULT_BYTES = 128 * 1024
"""NCCL_NVLS_CHUNKSIZE's default, 128 KiB (src/transport/nvls.cc)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclGraphInputs:
    """Everything NCCL's tuning model reads from the communicator."""

    nranks: int
    nnodes: int
    sm: int
    """The smallest compute capability x 10 in the communicator."""
    ring: NcclGraph
    tree: NcclGraph
    """Used by Tree and PAT."""
    nvls: NcclGraph | None = None
    """Used by NVLS and NVLSTree; None without NVLS support (needs sm90+ and NVSwitch)."""
    collnet_direct: NcclGraph | None = None
    collnet_chain: NcclGraph | None = None
    collnet_enabled: bool = False
    """NCCL_COLLNET_ENABLE (SHARP plugin present); off by default."""
    ll128_forced: bool = False
    """NCCL_PROTO names the function and leaves LL128 on, which skips NCCL's default LL128 conditions
    (:func:`ll128_default_off`); :attr:`collscope.analysis.model_settings.ModelSettings.ll128_forced`."""
    nvswitch: bool = False
    net_bw_gbps: float = 0.0
    """NCCL's ``comm->minNetBw``: the smallest GPU-to-NIC path bandwidth of a rank's NICs, GB/s (src/graph/topo.cc
    ncclTopoGetMinNetBw: the NIC's rate or the GPU's PCIe link, whichever is less); 0 inside one NVLink domain."""
    cpu_vendor: Literal["intel", "amd", "other"] = "intel"
    nvls_chunk_bytes: int = NVLS_CHUNK_DEFAULT_BYTES
    """NCCL's ``comm->nvlsChunkSize`` inside one NVLink domain: NCCL_NVLS_CHUNKSIZE, :data:`NVLS_CHUNK_DEFAULT_BYTES`
    by default, the largest chunk of NVLS (:func:`.measured.nvls_chunk_bytes`); a job's setting is read
    by :func:`collscope.analysis.model_settings.model_settings`."""
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ppn(self) -> float:
        return self.nranks / self.nnodes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclChoice:
    """What NCCL's model picks for one size: the (algorithm, protocol) of the smallest time."""

    size_bytes: int
    algo: str
    proto: str
    time_us: float
    """NCCL's own model's time (what it compares to choose)."""
    busbw_gbps: float
    expected_time_us: float = 0.0
    """What nccl-tests measures for that choice: NCCL's time plus :func:`measured_extra_us`."""
    expected_busbw_gbps: float = 0.0
    held_to_bound: str = ""
    """Set when the expected measurement was held to the algorithm's busbw bound on the links, which NCCL's model
    plus the fitted terms exceeded (:func:`collscope.analysis.bounds.held_to_bound`): what the bound is."""
    floor_from_bytes: int = 0
    """The larger size k x ``size_bytes`` whose expected time / k raised this size's expected time
    (:data:`FLOOR_FACTORS`); 0 when none did."""
    ceiling_busbw_gbps: float = 0.0
    """Above the expected measurement, the busbw of NVLS's own rate where NCCL's NVLS graph holds the table below
    it inside one NVLink domain (:func:`nvls_graph_cap`): the expected measurement with that rate. analyze calls a
    measurement ``suspicious`` only above it; 0 where the expected measurement is the ceiling."""
    near_ties: tuple[NcclChoice, ...] = ()
    """The other (algorithm, protocol) pairs whose time in NCCL's model is within :data:`.choice.NEAR_TIE` of this
    one's, each with its own expected measurement: which of them runs is closer than collscope can call."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["near_ties"] = [t.to_dict() for t in self.near_ties]  # lists, as JSON reads them back
        return out


def _func(op: str) -> str:
    if op not in NCCL_OPS:
        raise ConfigError(f"NCCL's model has no collective {op!r}; valid: {', '.join(NCCL_OPS)}")
    return NCCL_OPS[op]


def _graph(inputs: NcclGraphInputs, algo: str) -> NcclGraph | None:
    return {"Tree": inputs.tree, "Ring": inputs.ring, "CollNetDirect": inputs.collnet_direct,
            "CollNetChain": inputs.collnet_chain, "NVLS": inputs.nvls, "NVLSTree": inputs.nvls,
            "PAT": inputs.tree}[algo]


def _nsteps(func: str, n: int) -> int:
    return 2 * (n - 1) if func == "AllReduce" else n - 1 if func in ("AllGather", "ReduceScatter") else n


def _log2i(x: int) -> int:
    return x.bit_length() - 1 if x > 0 else -1


def _modelled(func: str, algo: str, proto: str) -> bool:
    """nccl-facts 1.4 item 1: which (collective, algorithm, protocol) NCCL puts in its table."""
    if func in ("Broadcast", "Reduce") and algo != "Ring":
        return False
    if func in ("AllGather", "ReduceScatter") and algo not in ("PAT", "Ring", "NVLS", "CollNetDirect"):
        return False
    if func == "AllReduce" and algo == "PAT":
        return False
    return not (algo in ("NVLS", "NVLSTree", "PAT") and proto != "Simple")


def _enabled(inputs: NcclGraphInputs, func: str, algo: str, proto: str, g: NcclGraph, version: str) -> bool:
    """nccl-facts 1.4 item 7 and 1.4 item 1 (PAT auto-enable): the default enable rules."""
    if algo == "PAT" and (inputs.sm < 60 or inputs.ppn != 1):
        return False
    if algo == "NVLSTree" and inputs.nnodes == 1:
        return False
    if not inputs.collnet_enabled and (algo in ("CollNetDirect", "CollNetChain") or
                                       (algo == "NVLS" and inputs.nnodes > 1)):
        return False
    if algo == "CollNetDirect" and not inputs.nvswitch:
        return False
    if proto == "LL128":
        if inputs.sm < 70:
            return False
        if not inputs.ll128_forced and ll128_default_off(inputs, g, version):
            return False
    return True


def ll128_default_off(inputs: NcclGraphInputs, g: NcclGraph, version: str = "2.30") -> str:
    """Why NCCL leaves LL128 off by default on graph ``g`` ("" when it enables it): src/graph/tuning.cc enables it
    by default only where it is tested ("Other cases are not tested and may cause silent data corruption"): a
    network path (``typeInter``) up to PXN on Hopper and newer, PXB before; a path inside the node up to NVB; the
    GPUs its release lists. An NCCL_PROTO that names LL128 for the function skips these (``protoEnable`` 1, not 2)."""
    limit = ll128_network_limit(inputs.sm)
    # 2.19-2.26 had no P2C: a Grace GPU's NIC on its CPU was a PHB path there (constants' release tables)
    inter = "PHB" if g.type_inter == "P2C" and version == "2.19" else g.type_inter
    if inputs.nnodes > 1 and PATH_TYPES.index(inter) > PATH_TYPES.index(limit):
        return f"the network path is {inter}, beyond {limit} on sm {inputs.sm}"
    if PATH_TYPES.index(g.type_intra) > PATH_TYPES.index("NVB"):
        return f"the path inside the node is {g.type_intra}, beyond NVB"
    sms = ll128_default_sms(version)  # the tables' release: constants._LL128_DEFAULT_SMS
    if sms is not None and inputs.sm not in sms:
        return f"sm {inputs.sm} is not among the GPUs its release enables it on ({', '.join(map(str, sorted(sms)))})"
    return ""


# src/include/device.h: NCCL_MAX_DIRECT_ARITY 7 (2.19.4 and 2.30.7), NCCL_MAX_NVLS_ARITY 32 (2.30.7).
_MAX_DIRECT_ARITY = 7
_MAX_NVLS_ARITY = 32


def _skipped_at_enqueue(inputs: NcclGraphInputs, func: str, algo: str, version: str) -> bool:
    """Pairs NCCL 2.30 leaves out of the cost table of one call although the tuning table has them
    (src/enqueue.cc updateCollCostTable): CollNetDirect and CollNetChain with more than NCCL_MAX_DIRECT_ARITY + 1
    local ranks, NVLS and NVLSTree for other collectives than AllReduce with more than NCCL_MAX_NVLS_ARITY local
    ranks. Local ranks are a node's, an NVLink domain's with MNNVL (72 on an NVL72 rack). 2.19.4 had neither rule."""
    if version == "2.19":
        return False
    if algo in ("CollNetDirect", "CollNetChain") and inputs.ppn > _MAX_DIRECT_ARITY + 1:
        return True
    return algo in ("NVLS", "NVLSTree") and func != "AllReduce" and inputs.ppn > _MAX_NVLS_ARITY


def nvls_graph_cap(inputs: NcclGraphInputs, op: str, *, version: str = "2.30") -> float:
    """How far NCCL's NVLS graph holds NVLS's table bandwidth below NVLS's own rate inside one NVLink domain: the
    intra term ``bwIntra x nvlsEfficiency x (nCh - 1) / nCh`` (x 2 for AllReduce) over ``min(intra, bwInter)``
    (src/graph/tuning.cc), >= 1; 1.0 across domains, for the other algorithms and for the 2.19 tables.

    Inside one domain no NVLS byte crosses a NIC, yet the NVLS graph's ``bwInter`` bounds the table: NCCL's search
    raises it in pass 2 only up the speed array (src/graph/search.cc ncclTopoCompute), whose sm100 top is 90 GB/s
    (sm100SpeedArrayIntra). 8 sm100 GPUs: 8 heads at bwIntra 80 (9 x 80 <= 18 x 40.1), an intra term of 80 x 0.74
    x 7/8 x 2 = 103.6 GB/s a channel against bwInter 90: 720 GB/s busbw in the table, 829 at the intra term (1.15 x).
    The table ranks algorithms; published 8-GPU sm100 NVLS all_reduce runs measure 835-892 GB/s at 4-16 GiB
    (GCP A4 B200, OCI B300, OCI GB300 and GB200 2 trays, GCP A4X GB200 2 trays: bench/scorecard/published.csv).
    A 4-GPU sm100 tray: 4 heads at 90/90, 1.11. On 8 H100 (bwIntra 40, bwInter 60) and on domains of 16 or more
    sm100 GPUs the intra term binds already: 1.0."""
    g = inputs.nvls
    if version == "2.19" or inputs.nnodes != 1 or g is None or g.n_channels < 2:
        return 1.0
    c = nccl_constants(version)
    intra = g.bw_intra * c.nvls_efficiency[compcap_index(inputs.sm)] * (g.n_channels - 1) / g.n_channels
    intra *= 2.0 if _func(op) == "AllReduce" else (inputs.ppn - 1) / inputs.ppn
    held = min(intra, g.bw_inter)
    return intra / held if held > 0 and intra > held else 1.0


def nccl_bandwidth(inputs: NcclGraphInputs, op: str, algo: str, proto: str, *, version: str = "2.30") -> float:
    """The table bandwidth NCCL stores for (op, algo, proto), GB/s: algorithm bandwidth, except non-Ring
    AllGather/ReduceScatter which keep bus bandwidth (nccl-facts 1.4 item 6); 0 when not used."""
    func = _func(op)
    c = nccl_constants(version)
    if algo not in c.algos or proto not in PROTOS:
        raise ConfigError(f"unknown NCCL algorithm/protocol {algo}/{proto}; valid: {', '.join(c.algos)} x "
                          f"{', '.join(PROTOS)}")
    g = _graph(inputs, algo)
    if g is None or g.n_channels == 0 or not _modelled(func, algo, proto) or not _enabled(inputs, func, algo,
                                                                                         proto, g, version):
        return 0.0
    n, nodes, ppn = inputs.nranks, inputs.nnodes, inputs.ppn
    cc = compcap_index(inputs.sm)
    scale = nodes - 1 if nodes <= 2 else 2
    ll_row = cc if nodes == 1 else (1 if inputs.cpu_vendor == "amd" else 0)
    ll_max = c.ll_max_bw[ll_row][scale]
    old = version == "2.19"
    collnet = algo in ("CollNetDirect", "CollNetChain")
    bw = g.bw_intra if nodes <= 2 or collnet else g.bw_inter
    if algo in ("NVLS", "NVLSTree"):
        if g.n_channels < 2:
            return 0.0
        if old:  # 1.7: NVLS min(bwIntra, bwInter); NVLSTree min(bwIntra, N <= 2 ? bwInter : bwInter / 2)
            inter = g.bw_inter if algo == "NVLS" or nodes <= 2 else g.bw_inter / 2
            bw = min(g.bw_intra, inter)
        else:  # 1.4 item 4
            intra = g.bw_intra * c.nvls_efficiency[cc] * (g.n_channels - 1) / g.n_channels
            intra *= 2.0 if func == "AllReduce" else (ppn - 1) / ppn
            inter = g.bw_inter * (2 if nodes <= 2 and algo == "NVLSTree" else 1)
            cap = c.per_ch_max_nvls_tree_bw[cc][scale] if algo == "NVLSTree" else math.inf
            bw = min(intra, inter, cap)
    bus = g.n_channels * bw
    # 1.4 item 5 refinements (1.7 for 2.19)
    if algo == "Ring" and proto == "LL":
        # 2.19.4/2.20.5: x 1/4 across nodes and for AllReduce/Reduce, else x 1/3; 2.21 on: x 1/2
        factor = (0.25 if nodes > 1 or func in ("AllReduce", "Reduce") else 1 / 3) if old else 0.5
        bus = min(ll_max, bus * factor)
    if algo == "Ring" and proto == "LL128":
        bus = min(bus * (0.7 if old and ppn < 2 else 0.92), g.n_channels * c.per_ch_max_ring_ll128_bw[cc][scale])
    if algo == "Tree" and func == "AllReduce":
        bus = min(bus * 0.92, g.n_channels * c.per_ch_max_tree_bw[cc][scale])
    if algo == "Tree" and proto == "LL":
        bus = min(bus / 3.8, ll_max)
    if algo == "Tree" and proto == "LL128":
        bus = min(bus * (7 / 9 if nodes == 1 else 120 / 128), g.n_channels * c.per_ch_max_tree_ll128_bw[cc][scale])
    if algo == "Tree" and g.pattern == "tree":
        bus *= 0.85
    if algo == "PAT":
        bus *= 0.75
    if collnet and proto != "Simple":
        return 0.0
    if algo == "CollNetDirect":
        if func in ("AllGather", "ReduceScatter"):
            bus = ppn * min(g.bw_intra, 0.9 * g.bw_inter)
        else:
            f = ppn / g.n_channels
            f -= (f - 1) / 2
            bus /= f
            if inputs.sm >= 90:
                bus *= 0.85
    if algo in ("NVLS", "CollNetDirect") and func in ("AllGather", "ReduceScatter") and nodes > 1:
        return 0.0  # needs a CollNet plugin with iallgather/ireducescatter: not modelled
    # 1.4 item 6: bus -> algorithm bandwidth; 2.19.4/2.20.5 convert NVLS's AllGather/ReduceScatter too (x 5/6)
    if not (algo != "Ring" and func in ("AllGather", "ReduceScatter")) or (old and algo in ("NVLS", "NVLSTree")):
        if algo == "Ring" or (algo in ("NVLS", "NVLSTree") and not old):
            bus *= n / _nsteps(func, n)
        elif algo in ("NVLS", "NVLSTree"):
            bus *= 5 / 6
        else:
            bus *= 0.5
    return bus


def nccl_latency_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, *, version: str = "2.30") -> float:
    """The latency NCCL stores for (op, algo, proto), us (nccl-facts 1.5)."""
    func = _func(op)
    c = nccl_constants(version)
    g = _graph(inputs, algo) or inputs.ring
    p = PROTOS.index(proto)
    n, nodes = inputs.nranks, inputs.nnodes
    ppn = n // nodes
    intra_hw = "NVLINK" if g.type_intra == "NVL" else "PCI"
    hw = intra_hw if nodes == 1 else "NET"
    lat = c.base_latency_us[algo][p]
    intra = c.hw_latency_us[intra_hw][algo][p]
    # one rank per node: Tree's network latency from 2.23.4 (src/graph/tuning.cc), the algorithm's own before
    inter = c.hw_latency_us["NET"]["Tree" if ppn == 1 and version != "2.19" else algo][p] + g.latency_inter_us
    if proto == "Simple":
        inter += g.latency_inter_us  # the flush
    nsteps = _nsteps(func, n)
    if algo == "Ring":
        if func in ("Broadcast", "Reduce"):
            step = c.hw_latency_us[hw]["Ring"][p]
            if g.same_channels:
                return lat + step
            if proto == "Simple":
                step = c.hw_latency_us[hw]["Tree"][p]
            return lat + nsteps * step
        overhead = 0.0
        if nodes > 1:
            overhead = (2.0 if inputs.cpu_vendor == "amd" else 1.0) * (3 if proto == "Simple" else 1)
        intra = max(intra, overhead)
        if nodes == 1:
            n_inter = 0
        elif func == "AllReduce":
            n_inter = 2 * nodes if version == "2.19" else 2 * (nodes - 1)
        else:
            n_inter = nodes - 1
        return lat + (nsteps - n_inter) * intra + n_inter * inter
    if algo == "Tree":
        return lat + (2 * ((ppn - 1) * intra + _log2i(nodes) * inter) if func == "AllReduce" else 0.0)
    if algo == "CollNetDirect":
        return lat + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * 0.4) + inter
    if algo == "CollNetChain":
        return lat + 2 * (ppn - 1) * intra + inter
    if algo == "NVLS":
        return intra + (inter if nodes > 1 else 0.0)
    if algo == "NVLSTree":
        return lat + intra + 2 * _log2i(nodes) * inter
    if algo == "PAT" and func in ("AllGather", "ReduceScatter"):
        return lat + _log2i(nodes) * inter / 3.5 + n * 2.8
    return lat


def nccl_time_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, *,
                 version: str = "2.30") -> float | None:
    """``lat + nBytes / (1000 bw)`` with the tree correction and the ring plateau (nccl-facts 1.6); None when
    (algo, proto) is not used for ``op`` here."""
    bw = nccl_bandwidth(inputs, op, algo, proto, version=version)
    if bw <= 0 or _skipped_at_enqueue(inputs, _func(op), algo, version):
        return None
    lat = nccl_latency_us(inputs, op, algo, proto, version=version)
    func = _func(op)
    log_size = _log2i(int(size_bytes) >> 6)
    if algo == "Tree" and func == "AllReduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[proto][log_size]
    if (algo == "NVLSTree" and func == "AllReduce" and 0 <= log_size < 24 and inputs.sm >= 100
            and inputs.cpu_vendor in ("intel", "amd") and version != "2.19"):
        bw *= TREE_CORRECTION[proto][log_size]
    if (algo == "Ring" and proto == "Simple" and inputs.nnodes > 1 and func == "AllReduce"
            and size_bytes // (inputs.ring.n_channels * inputs.nranks) >= 64):
        lat *= 1.4 if inputs.sm >= 80 else 1.9  # plateau effect of ring
    return lat + size_bytes / (1000 * bw)


def _pairs(version: str, algos: Iterable[str] | None, protos: Iterable[str] | None) -> list[tuple[str, str]]:
    c = nccl_constants(version)
    want_a = list(c.algos) if algos is None else list(algos)
    want_p = list(PROTOS) if protos is None else list(protos)
    for a in want_a:
        if a not in c.algos:
            raise ConfigError(f"unknown NCCL algorithm {a!r} for NCCL {version}; valid: {', '.join(c.algos)}")
    for p in want_p:
        if p not in PROTOS:
            raise ConfigError(f"unknown NCCL protocol {p!r}; valid: {', '.join(PROTOS)}")
    return [(a, p) for a in ALGOS if a in want_a for p in PROTOS if p in want_p]


def nccl_predictions(inputs: NcclGraphInputs, op: str, sizes: Iterable[int], *, version: str = "2.30",
                     algos: Iterable[str] | None = None, protos: Iterable[str] | None = None) -> list[Prediction]:
    """Every enabled (algorithm, protocol) at every size, size-major, in NCCL's index order."""
    pairs = _pairs(version, algos, protos)
    out = []
    for size in sizes:
        for a, p in pairs:
            t = nccl_time_us(inputs, op, a, p, size, version=version)
            if t is not None:
                out.append(make_prediction("nccl", a, p, op, size, t, inputs.nranks))
    return out
