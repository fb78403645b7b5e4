"""The busbw an algorithm cannot exceed on given links: its bytes on the busiest link against that link's rate.

Per rank (inside a node) and per node (across its NICs), in units of S, the collective's size, per direction
(``../shared/reference/nccl-facts.md`` section 7; sjeaugey in https://github.com/NVIDIA/nccl/issues/457: "for
tree it would be 2*S", ring 2(n-1)S/n, "CollNet: 2S intra-node, S inter-node"):

=====================  ==============================  =================================================
all_reduce algorithm   bytes per rank inside a node    bytes per node across its NICs
=====================  ==============================  =================================================
Ring                   2(n-1)/n                        2(n-1)/n (the ring passes through every node)
Tree                   2 (chain: reduce up, bcast      1 on 2 nodes (each node roots one of the two trees
                       down, two trees of S/2)         of S/2); 2 on more (interior in one tree)
NVLS                   1 + 1/ppn (to the switch once,  1 (CollNet/SHARP reduces in the network)
                       its shard back, then the
                       multicast result)
NVLSTree               1 + 1/ppn                       as Tree, on the node's reduced data
CollNetDirect/Chain    2                               1
=====================  ==============================  =================================================

busbw = f S / T with f the busbw factor, so the bound is ``f / max(intra bytes / intra GB/s, NIC bytes / node
NIC GB/s)``. For Ring this is the multi-node ring bound min(intra, NICs x NIC) of :func:`.models.ring_bound_busbw_gbps`;
Tree, NVLS, NVLSTree and CollNet move less than 2(n-1)/n S across the NICs, so the ring NIC bound is no limit
for them. all_gather, reduce_scatter, broadcast and reduce move at least (n-1)/n S (S for broadcast/reduce) per
rank whatever the algorithm [derived: every rank must receive the others' data], so the ring bound is their bound
for every algorithm.

Ops NCCL runs as grouped point-to-point (no ``nccl_func`` in :data:`collscope.vocab.ops.OP_TABLE`) are bound by
one rank's own links, with d the ranks of its NVLink domain and B_net the rate of its transfers across the network:
for alltoall :func:`.models.p2p_net_gbps` (the node's NICs shared by its ranks, at most one NIC: the per-GPU NIC rate
with one NIC per GPU) [derived; sjeaugey in https://github.com/NVIDIA/nccl-tests/issues/130: "On 2 nodes, 50% of the
traffic is inter-node so you should see BusBW = 2x network bandwidth per GPU ... general formula is N/(N-1)x the
bandwidth per GPU, N being the number of nodes", which is B_net (p-1)/(p-d) for large p]; for a scatter's root
:func:`.models.p2p_root_net_gbps` (its node's NICs together, through PXN); for a gather's root and sendrecv
:func:`.models.p2p_pair_net_gbps` (the rank's own NIC). B_intra is the NVLink line rate here (a bound), the
models take NCCL's effective rate (:data:`.models.NVLINK_P2P_EFFICIENCY`):

=====================  ===========================================  ==========================================
op                     bytes over NVLink, over the network (x S)    busbw bound (f the busbw factor)
=====================  ===========================================  ==========================================
alltoall (each rank),  (d-1)/p, (p-d)/p: a block of S/p to each     f / max((d-1)/p / B_intra, (p-d)/p / B_net)
gather, scatter (root) peer                                         = B_net (p-1)/(p-d) when the NIC binds
sendrecv               S to rank + 1: NVLink in one domain, the     min(B_intra, B_net) across domains, f = 1
                       network for a domain's last rank
=====================  ===========================================  ==========================================

E.g. alltoall on 16 H100 in two 8-GPU nodes, one 400 Gb/s NIC per GPU: each rank sends 8/16 of S over its
50 GB/s NIC, so algbw <= 50 x 16/8 = 100 GB/s and busbw <= 100 x 15/16 = 93.75 GB/s.

Alpha-beta model names map to NCCL's: ``double_binary_tree`` is Tree,
the others are point-to-point algorithms bounded like the ring (Patarasuk & Yuan's lower bound, nccl-facts 7).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import p2p_op_net_gbps, p2p_spread, ring_bound_busbw_gbps
from collscope.analysis.nccl_model.measured import MEASURED_TERMS
from collscope.analysis.nccl_model.model import NcclChoice, NcclGraphInputs, nccl_time_us
from collscope.collectives.record import busbw_factor
from collscope.vocab.ops import OP_BY_NCCL_FUNC, op_facts

__all__ = ["Bound", "algorithm_bound", "held_to_bound", "held_time_us", "excess_time_us"]

_AB_TO_NCCL = {"double_binary_tree": "Tree"}
_TRAFFIC_OP = OP_BY_NCCL_FUNC["AllReduce"]
"""The op whose per-algorithm traffic the module table gives (NCCL's AllReduce)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Bound:
    """The busbw limit of one algorithm on some links, and what sets it."""

    algo: str
    """NCCL's algorithm name (``Ring``, ``Tree``, ``NVLSTree``, ...)."""
    busbw_gbps: float
    limited_by: str
    """The link that sets the bound: ``"NICs"``, or the links inside the NVLink domain (:func:`_intra_links`)."""


def _intra_links(params: LinkParams) -> str:
    """What the bound calls the links inside an NVLink domain: ``"intra-node links"`` when the domain is the node,
    ``"NVLink domain links"`` when it spans nodes (an NVL72 rack's trays), whose NVLink is not inside a node."""
    return "intra-node links" if params.domain_ranks <= params.ppn else "NVLink domain links"


def _traffic(algo: str, ppn: int, nnodes: int, nranks: int) -> tuple[float, float]:
    """(bytes per rank inside a node, bytes per node across NICs) in units of S, all_reduce (module table)."""
    ring = 2 * (nranks - 1) / nranks
    tree_nic = 0.0 if nnodes == 1 else 1.0 if nnodes == 2 else 2.0
    if algo == "Tree":
        return (2.0 if ppn > 1 else 0.0), tree_nic
    if algo == "NVLS":
        return 1 + 1 / ppn, (0.0 if nnodes == 1 else 1.0)
    if algo == "NVLSTree":
        return 1 + 1 / ppn, tree_nic
    if algo in ("CollNetDirect", "CollNetChain"):
        return (2.0 if ppn > 1 else 0.0), (0.0 if nnodes == 1 else 1.0)
    return ring, (ring if nnodes > 1 else 0.0)


def algorithm_bound(op: str, algo: str, params: LinkParams) -> Bound:
    """The busbw ``algo`` (NCCL's name or an alpha-beta model name) cannot exceed for ``op`` on ``params``."""
    name = _AB_TO_NCCL.get(algo, algo)
    if op_facts(op).nccl_func is None:
        return _p2p_bound(op, name, params)
    if op != _TRAFFIC_OP or name not in ("Tree", "NVLS", "NVLSTree", "CollNetDirect", "CollNetChain"):
        ring = ring_bound_busbw_gbps(params)
        by_nic = ring < params.intra_gbps
        return Bound(algo=name, busbw_gbps=ring,
                     limited_by="NICs" if by_nic else _intra_links(params))
    # A multi-node NVLink domain is one node for the traffic: its ranks reach each other over NVLink.
    intra_bytes, nic_bytes = _traffic(name, params.domain_ranks, params.ndomains, params.nranks)
    f = busbw_factor(op, params.nranks)
    intra_t = intra_bytes / params.intra_gbps
    nodes_per_domain = params.domain_ranks // params.ppn
    nic_gbps = params.inter_bw_gbps * nodes_per_domain if params.inter_bw_gbps is not None else params.bw_gbps
    nic_t = nic_bytes / nic_gbps if params.ndomains > 1 else 0.0
    if intra_t <= 0 and nic_t <= 0:
        return Bound(algo=name, busbw_gbps=ring_bound_busbw_gbps(params), limited_by=_intra_links(params))
    return Bound(algo=name, busbw_gbps=f / max(intra_t, nic_t),
                 limited_by="NICs" if nic_t > intra_t else _intra_links(params))



def excess_time_us(size_bytes: int, time_us: float, next_size_bytes: int, next_time_us: float, *,
                   busbw_factor: float, bound_busbw_gbps: float) -> float:
    """How much longer a size took than a larger size of the same collective allows: the larger size's time less
    the time its extra bytes take at the bound, subtracted from the smaller size's time (us; <= 0 when consistent).

    A larger message costs at least its extra bus bytes (``busbw_factor`` x the extra size) at the bound more than a
    smaller one, whatever algorithm NCCL picks at either size (the one picked at the smaller size is at least as fast
    there as the larger size's algorithm would be). So when the larger size took less than that more, the smaller
    size's time holds time that is not data movement: a stall, a warm-up, or a slower algorithm chosen there.
    E.g. sendrecv on A100 NVLink (bound 300 GB/s per direction): 128 MiB in 1211 us and 256 MiB in 1423 us means
    134 MB more in 212 us, 633 GB/s on the margin; at 300 GB/s they take 447 us, so 128 MiB holds >= 235 us extra."""
    if next_size_bytes <= size_bytes or bound_busbw_gbps <= 0:
        raise ValueError("excess_time_us needs a larger next size and a positive bound")
    extra_us = busbw_factor * (next_size_bytes - size_bytes) / (bound_busbw_gbps * 1e3)
    return time_us - (next_time_us - extra_us)


_BIG_BYTES = 1 << 40
"""A size at which NCCL's model time is its bandwidth term alone (latencies of microseconds against seconds)."""


def held_time_us(op: str, algo: str, proto: str, size_bytes: int, expected_time_us: float, params: LinkParams,
                 inputs: NcclGraphInputs, *, version: str = "2.30") -> tuple[float, Bound | None]:
    """The expected time of (algo, proto) at ``size_bytes`` with its bandwidth term held to the algorithm's bound
    on the links (:func:`algorithm_bound`), and the bound when it binds (None: NCCL's model is within the links).

    NCCL's tables rank algorithms and can rate one above what the wires carry: NVLSTree on 2 x 8 H100 with eight
    200 Gb/s NICs per node is 460 GB/s in them, where each node's NICs carry S each way, so busbw <= 1.875 x 200 =
    375 GB/s. The bandwidth term S f / busbw of NCCL's model (its busbw at :data:`_BIG_BYTES`) is replaced by
    S f / bound; the latency, the size ramp and the network's per-call cost stay."""
    bound = algorithm_bound(op, algo, params)
    big_time = nccl_time_us(inputs, op, algo, proto, _BIG_BYTES, version=version)
    if big_time is None or big_time <= 0 or bound.busbw_gbps <= 0 or size_bytes <= 0:
        return expected_time_us, None
    f = busbw_factor(op, params.nranks)
    model_busbw = f * _BIG_BYTES / (big_time * 1e3)
    if bound.busbw_gbps >= model_busbw:
        return expected_time_us, None
    return expected_time_us + f * size_bytes / 1e3 * (1 / bound.busbw_gbps - 1 / model_busbw), bound


def held_to_bound(op: str, choice: NcclChoice, params: LinkParams, inputs: NcclGraphInputs, *,
                  version: str = "2.30") -> NcclChoice:
    """``choice`` with its expected measurement's bandwidth held to its algorithm's bound (:func:`held_time_us`)
    where NCCL's model exceeds it; ``held_to_bound`` says so."""
    if choice.near_ties:
        choice = replace(choice, near_ties=tuple(held_to_bound(op, t, params, inputs, version=version)
                                                 for t in choice.near_ties))
    if choice.expected_time_us <= 0:
        return choice
    time, bound = held_time_us(op, choice.algo, choice.proto, choice.size_bytes, choice.expected_time_us, params,
                               inputs, version=version)
    if bound is None:
        return choice
    busbw = busbw_factor(op, params.nranks) * choice.size_bytes / (time * 1e3)
    return replace(choice, expected_time_us=time, expected_busbw_gbps=busbw, ceiling_busbw_gbps=0.0,
                   held_to_bound=f"its bandwidth held to the {bound.algo} bound on the {bound.limited_by}, "
                                 f"{bound.busbw_gbps:.1f} GB/s, which NCCL's model exceeds; with {MEASURED_TERMS}")


def _p2p_bound(op: str, name: str, params: LinkParams) -> Bound:
    """The bound of a grouped point-to-point op on one rank's own links (module table)."""
    f = busbw_factor(op, params.nranks)
    facts = op_facts(op)
    net = p2p_op_net_gbps(params, op)
    local, remote = p2p_spread(params)
    if facts.size_is_total:  # alltoall, gather, scatter: a block of S/p per peer
        intra_t, nic_t = local / params.nranks / params.intra_gbps, remote / params.nranks / net
    else:  # sendrecv: S to one neighbour
        intra_t, nic_t = 1 / params.intra_gbps, (1 / net if remote else 0.0)
    return Bound(algo=name, busbw_gbps=f / max(intra_t, nic_t),
                 limited_by="NICs" if nic_t > intra_t else _intra_links(params))
