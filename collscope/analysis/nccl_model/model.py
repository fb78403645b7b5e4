"""NCCL's own cost model: bandwidth and latency per (collective, algorithm, protocol), time per size, the choice.

Follows ``src/graph/tuning.cc`` (``ncclTopoTuneModel``) and ``src/enqueue.cc`` (``ncclTopoGetAlgoTime``,
``topoGetAlgoInfo``) of NCCL 2.30.7 as described in ``../shared/reference/nccl-facts.md`` sections 1.4 (bandwidth),
1.5 (latency), 1.6 (time, tree correction, plateau, choice), and 1.7 for ``version="2.19"``. Inputs are the
per-algorithm graphs NCCL's topology search produces (:class:`NcclGraphInputs`); :mod:`.nccl_search` approximates
that search from a topology.

:func:`nccl_choice` also gives what nccl-tests measures for that choice (``expected_*``): NCCL's time plus three
fitted terms NCCL's model leaves out (it compares algorithms; it does not predict a measurement): the size ramp of
Simple (:func:`ramp_us`), the LL step latency (:func:`hop_us`), the network's per-call cost (:func:`net_us`) and
NVLS's cost per rank of a large NVLink domain (:func:`nvls_rank_us`), :func:`measured_extra_us`.

Not modelled: tuner plugins, ``NCCL_THREAD_THRESHOLDS`` / channel reduction after the choice, FP8 penalties,
CollNet plugins that implement iallgather/ireducescatter (multi-node NVLS/CollNet AllGather/ReduceScatter are off),
the CUDA 11.8 sm90 2-rank LL128 exception, aggregated operations (one operation per launch: latCount = 1).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from collscope.analysis.models import Prediction, make_prediction
from collscope.analysis.nccl_model.constants import (
    ALGOS,
    PATH_TYPES,
    PROTOS,
    TREE_CORRECTION,
    compcap_index,
    nccl_constants,
)
from collscope.errors import ConfigError
from collscope.units import format_size
from collscope.vocab.nccl import OP_FUNC

__all__ = [
    "NcclGraph",
    "NcclGraphInputs",
    "NcclChoice",
    "NCCL_OPS",
    "nccl_bandwidth",
    "nccl_latency_us",
    "nccl_time_us",
    "nccl_predictions",
    "nccl_choice",
    "RAMP_BYTES_PER_RANK_CHANNEL",
    "runtime_channels",
    "ramp_us",
    "hop_us",
    "measured_extra_us",
    "NET_EXTRA_US",
    "net_us",
    "NVLS_RANK_US",
    "NVLS_BOARD_RANKS",
    "nvls_rank_us",
    "nvls_rank_notes",
    "NVLS_RANK_SOURCE",
    "MEASURED_TERMS",
    "FLOOR_FACTORS",
    "size_floor_us",
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
    nvswitch: bool = False
    cpu_vendor: Literal["intel", "amd", "other"] = "intel"
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def _enabled(inputs: NcclGraphInputs, func: str, algo: str, proto: str, g: NcclGraph) -> bool:
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
        limit = "PXN" if inputs.sm >= 90 else "PXB"
        ok = PATH_TYPES.index(g.type_inter) <= PATH_TYPES.index(limit)
        ok = ok and PATH_TYPES.index(g.type_intra) <= PATH_TYPES.index("NVB") and inputs.sm >= 70
        if not ok:
            return False
    return True


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
                                                                                         proto, g):
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
        factor = (0.25 if nodes > 1 and func in ("AllReduce", "Reduce") else 1 / 3) if old else 0.5
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
    # 1.4 item 6: bus -> algorithm bandwidth
    if not (algo != "Ring" and func in ("AllGather", "ReduceScatter")):
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
    inter = c.hw_latency_us["NET"]["Tree" if ppn == 1 else algo][p] + g.latency_inter_us
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
            and inputs.cpu_vendor in ("intel", "amd")):
        bw *= TREE_CORRECTION[proto][log_size]
    if (algo == "Ring" and proto == "Simple" and inputs.nnodes > 1 and func == "AllReduce"
            and size_bytes // (inputs.ring.n_channels * inputs.nranks) >= 64):
        lat *= 1.4 if inputs.sm >= 80 else 1.9  # plateau effect of ring
    return lat + size_bytes / (1000 * bw)


RAMP_BYTES_PER_RANK_CHANNEL = 128 * 1024
"""The size ramp of published Simple-protocol curves: a collective reaches b / (b + 128 KiB) of its peak busbw
when each rank moves b bytes per channel (b = size / (nranks x channels)). Fitted, not NCCL's: on the Azure ND
A100 v4 / H100 v5 rows of bench/scorecard/published.csv (16 MiB to 1 GiB, Ring and NVLS) and checked on the other
systems' rows (GB200 tray ring, NVL72 NVLS, multi-rack NVLSTree); docs/reading-results.md shows the scorecard with
and without it. 128 KiB is also NCCL's NVLS chunk (src/transport/nvls.cc ``NCCL_NVLS_CHUNKSIZE`` default
128 * 1024), but NCCL's own chunk-shrinking rule for small sizes (src/enqueue.cc) fits the published ramps worse."""


def runtime_channels(inputs: NcclGraphInputs, algo: str) -> int:
    """The channels NCCL runs an algorithm on: NVLS/NVLSTree ``comm->nvlsChannels`` (src/transport/nvls.cc
    ncclNvlsTuning: NVLS_NCHANNELS_SM90 16; sm100 NVLS_NCHANNELS_SM100_NVL 24 on one NVLink domain,
    NVLS_NCHANNELS_SM100 32 across domains); the others the search's channels doubled
    (src/graph/connect.cc ncclTopoPostset: ``nChannels = std::min(MAXCHANNELS, nChannels * 2)``, MAXCHANNELS 64
    in src/include/device.h)."""
    if algo in ("NVLS", "NVLSTree"):
        if inputs.sm < 100:
            return 16
        return 24 if inputs.nnodes == 1 else 32
    g = _graph(inputs, algo) or inputs.ring
    return min(64, 2 * g.n_channels)


def ramp_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, *,
            version: str = "2.30") -> float:
    """The time a Simple-protocol collective loses to the size ramp (:data:`RAMP_BYTES_PER_RANK_CHANNEL`):
    nranks x channels x 128 KiB at the algorithm's bandwidth, so that busbw = peak x b / (b + 128 KiB).
    0 for LL/LL128 (their published small-size figures are too few to fit a term) and for sizes <= 0."""
    if proto != "Simple" or size_bytes <= 0:
        return 0.0
    bw = nccl_bandwidth(inputs, op, algo, proto, version=version)
    if bw <= 0:
        return 0.0
    fill_bytes = inputs.nranks * runtime_channels(inputs, algo) * RAMP_BYTES_PER_RANK_CHANNEL
    return min(fill_bytes, size_bytes) / (1000 * bw)  # at most the bandwidth time again: busbw >= half the peak


def hop_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, *, version: str = "2.30") -> float:
    """What a Ring LL step costs beyond NCCL's per-step latency: one more ``hwLat`` per step inside the node
    (NVLink or PCI; src/graph/tuning.cc ``hwLat[intraHw][NCCL_ALGO_RING][NCCL_PROTO_LL]``, 0.6 us on NVLink).
    Fitted, not NCCL's: the published single-node Ring/LL figures at 1 MiB of Azure ND A100/H100/H200/GB200 v6 take
    about twice NCCL's per-step latency (2 (n-1) steps x 1.2 us on NVLink; checked on OCI's GB300 tray curves at
    1-4 MiB); 0 elsewhere (LL128 and the other algorithms: too few published points to fit)."""
    if algo != "Ring" or proto != "LL":
        return 0.0
    c = nccl_constants(version)
    hw = "NVLINK" if inputs.ring.type_intra == "NVL" else "PCI"
    return _nsteps(_func(op), inputs.nranks) * c.hw_latency_us[hw]["Ring"][PROTOS.index(proto)]


NET_EXTRA_US = 30.0
"""What a collective across NVLink domains (NCCL's nodes: ``nNodes`` > 1) pays beyond NCCL's model, per call, us.
Fitted, not NCCL's: the published 2-node all_reduce curves flatten at 85-160 us from 1 to 8 MiB (Nebius H100,
Lambda and GCP B200, dstack's pages and yangwhale/gpu-tpu-pedia) where NCCL's latencies (``baseLat`` + ``hwLat[NET]``
per network step, src/graph/tuning.cc) give 60-115 us. Chosen from 0-50 us by the rows within 15% and checked
leaving one source out at a time (``bench/net_term_fit.py``). Since the models' bandwidth is held to the links'
bound, 25 us scores one row more than 30 (108 against 107 of 140 multi-node rows) and is chosen whichever source is
left out, the held-out sources gaining 9 rows; 30 stays because 25 puts one more row more than 30% off with no
stated reason (Lambda's 2 x 8 B200 at 1 MiB: 1.32 x the published figure, 1.25 with 30): a one-row difference
either way, inside what this fit can tell. 0 inside one domain, an NVL72 rack's trays included."""


def net_us(inputs: NcclGraphInputs) -> float:
    """:data:`NET_EXTRA_US` when the communicator spans NVLink domains, else 0."""
    return NET_EXTRA_US if inputs.nnodes > 1 else 0.0


MEASURED_TERMS = "the fitted size ramp / LL step latency / network cost / NVLS rank cost"
"""How the outputs name what :func:`measured_extra_us` adds to NCCL's model time."""

NVLS_RANK_US = 0.6
"""What an NVLS or NVLSTree call pays per rank of its NVLink domain beyond :data:`NVLS_BOARD_RANKS`, us. NCCL's
model charges NVLS one ``hwLat[NVLINK][NVLS]`` (25 us, src/graph/tuning.cc: ``latencies[NVLS] = intraLat``) whatever
the ranks it joins. Fitted, not NCCL's, on the one published mid-size NVLS curve beyond 8 GPUs: OCI's GB300 NVL72
all_reduce on 64 GPUs of one rack (NCCL 2.28.7) takes 67-75 us from 1 to 4 MiB where NCCL's model and the ramp give
30-43 us, while the same source's 8 GPUs on 2 trays take 30-56 us there. 0.6 us per rank (34 us on 64, 38 us on 72)
brings its 1-32 MiB rows within 15% (5 rows more: bench/scorecard.py) and changes no other source's verdict (the
72- and 144-GPU NVL72 rows start at 512 MiB, where it is 2% of the time); 0.7 scores the same, 0.5 one row less, 1.0
four less. One source: the form (linear in the ranks) and the figure are this curve's, and a second published curve
of a large domain at 1-64 MiB would be the check it lacks."""
NVLS_BOARD_RANKS = 8
"""The NVLink domain NCCL's NVLS latency was tuned on (an HGX board, 8 GPUs); no per-rank cost up to it."""


def nvls_rank_us(inputs: NcclGraphInputs, algo: str) -> float:
    """:data:`NVLS_RANK_US` per rank of the NVLink domain (NCCL's ranks per node) beyond :data:`NVLS_BOARD_RANKS`,
    for NVLS and NVLSTree; 0 for the other algorithms and for domains of 8 GPUs or fewer."""
    if algo not in ("NVLS", "NVLSTree"):
        return 0.0
    return NVLS_RANK_US * max(0.0, inputs.ppn - NVLS_BOARD_RANKS)


NVLS_RANK_SOURCE = "OCI's GB300 NVL72 all_reduce on 64 GPUs of one rack, 1-32 MiB"
"""The one published curve :data:`NVLS_RANK_US` is fitted on (bench/scorecard/published.csv)."""


def nvls_rank_notes(inputs: NcclGraphInputs, op: str, choices: Iterable[tuple[str, int]], *,
                    version: str = "2.30") -> list[str]:
    """A note naming the sizes of ``choices`` (algorithm, size in bytes) where :func:`nvls_rank_us` is at least a
    tenth of the expected time: there a verdict leans on the one curve the term is fitted on. Empty elsewhere."""
    sizes: set[int] = set()
    per_call = 0.0
    for algo, size in choices:
        extra = nvls_rank_us(inputs, algo)
        time = nccl_time_us(inputs, op, algo, "Simple", size, version=version) if extra > 0 else None
        if time is not None and extra >= 0.1 * (time + measured_extra_us(inputs, op, algo, "Simple", size,
                                                                          version=version)):
            sizes.add(size)
            per_call = extra
    if not sizes:
        return []
    return [f"the expected NVLS time of {op} at {', '.join(format_size(s) for s in sorted(sizes))} includes "
            f"{per_call:.1f} us per call for {inputs.ppn:g} ranks of one NVLink domain ({NVLS_RANK_US:g} us per rank "
            f"beyond {NVLS_BOARD_RANKS}, a tenth of the time or more there), a term fitted on one published curve "
            f"({NVLS_RANK_SOURCE}): a verdict at those sizes leans on that one source"]


def measured_extra_us(inputs: NcclGraphInputs, op: str, algo: str, proto: str, size_bytes: int, *,
                      version: str = "2.30") -> float:
    """What nccl-tests measures beyond NCCL's model time for (algo, proto) at ``size_bytes``: the size ramp of
    Simple (:func:`ramp_us`), the LL step latency (:func:`hop_us`), across NVLink domains the network's per-call
    cost (:func:`net_us`), and NVLS's cost per rank of a domain larger than a board (:func:`nvls_rank_us`)."""
    return (ramp_us(inputs, op, algo, proto, size_bytes, version=version)
            + hop_us(inputs, op, algo, proto, version=version) + net_us(inputs) + nvls_rank_us(inputs, algo))


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


FLOOR_FACTORS = (2, 4, 8, 16, 32, 64)
"""The multiples k of a size whose expected time / k floors its own (:func:`nccl_choice`). A message of k x S can be
sent as k calls of S, so a measurement at S cannot take less than 1/k of the one at k x S: busbw does not fall as
the size grows. NCCL's model plus the fitted terms can break that where its choice changes protocol: on 8 A100,
Ring/LL128 (no size ramp) at 16 MiB expects 169 GB/s and Ring/Simple (with its ramp) at 32 MiB 121 GB/s, where
Azure's published curve rises from 109 to 133 GB/s. Derived, not fitted; up to 64 x, past the sizes where NCCL's
model switches protocol."""


def _best(inputs: NcclGraphInputs, op: str, size_bytes: int, version: str, algos: Iterable[str] | None,
          protos: Iterable[str] | None) -> Prediction | None:
    best: Prediction | None = None
    for pred in nccl_predictions(inputs, op, [size_bytes], version=version, algos=algos, protos=protos):
        if best is None or pred.time_us < best.time_us:
            best = pred
    return best


def _expected_us(inputs: NcclGraphInputs, op: str, best: Prediction, version: str) -> float:
    return best.time_us + measured_extra_us(inputs, op, best.algo, best.proto or "", best.size_bytes,
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
    time plus :func:`measured_extra_us`, at least :func:`size_floor_us`."""
    algos = list(algos) if algos is not None else None
    protos = list(protos) if protos is not None else None
    best = _best(inputs, op, int(size_bytes), version, algos, protos)
    if best is None:
        raise ConfigError(f"no NCCL algorithm/protocol is enabled for {op} with these inputs")
    expected, floor_from = _expected_us(inputs, op, best, version), 0
    floor, larger = size_floor_us(inputs, op, size_bytes, version=version, algos=algos, protos=protos)
    if floor > expected * (1 + 1e-9):
        expected, floor_from = floor, larger
    return NcclChoice(size_bytes=int(size_bytes), algo=best.algo, proto=best.proto or "", time_us=best.time_us,
                      busbw_gbps=best.busbw_gbps, expected_time_us=expected,
                      expected_busbw_gbps=best.busbw_gbps * best.time_us / expected if expected > 0 else 0.0,
                      floor_from_bytes=floor_from)
