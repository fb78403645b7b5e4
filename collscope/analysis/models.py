"""Alpha-beta (Hockney) models of collective algorithms, with the reduction term gamma.

Notation (``../shared/reference/nccl-facts.md`` section 7): p ranks, n bytes (all_reduce, reduce_scatter,
reduce, broadcast: the full vector; all_gather: the total gathered size, as nccl-tests' "size"), alpha the
latency of one message, beta = 1 / bandwidth, gamma = 1 / reduction throughput. Formulas, for links that are
all the same (one node, or explicit ``alpha``/``bw``):

=========================  ===========================================================  ===========================
op / algorithm             time                                                         source (nccl-facts 7)
=========================  ===========================================================  ===========================
all_reduce ring            2(p-1)a + 2(p-1)/p n b + (p-1)/p n g                          Patarasuk & Yuan 2009
all_reduce recursive dbl.  lg p (a + n b + n g)                                         MPICH allreduce comment
all_reduce Rabenseifner    2 lg p a + 2(p-1)/p n b + (p-1)/p n g  (p = 2^k)               MPICH allreduce comment
all_reduce binomial        2 ceil(lg p)(a + n b) + ceil(lg p) n g  (reduce + bcast)       MPICH reduce/bcast
all_reduce linear          2(p-1)(a + n b) + (p-1) n g  (linear reduce + linear bcast)    [derived]
all_reduce double bin. tree 2((ppn-1) a + floor(lg N) a_net) + 2 n b + n g              NCCL trees, section 7
all_gather ring            (p-1) a + (p-1)/p n b                                        MPICH allgather_intra_ring.c
all_gather recursive dbl.  lg p a + (p-1)/p n b                                         MPICH allgather comment
all_gather Bruck           ceil(lg p) a + (p-1)/p n b                                   MPICH allgather_intra_brucks.c
reduce_scatter ring        (p-1) a + (p-1)/p n (b + g)                                  Thakur et al. 2005
reduce_scatter rec. halv.  lg p a + (p-1)/p n (b + g)                                   MPICH reduce comment
broadcast binomial         ceil(lg p)(a + n b)                                          MPICH bcast comment
broadcast scatter+allgath. (lg p + p - 1) a + 2(p-1)/p n b                              MPICH bcast comment
reduce binomial            ceil(lg p)(a + n b + n g)                                    MPICH reduce comment
reduce Rabenseifner        2 lg p a + 2(p-1)/p n b + (p-1)/p n g                        MPICH reduce comment
broadcast / reduce ring    (p-1) a + n b  (+ n g)                                       NCCL Ring (nccl-facts 1.4)
alltoall pairwise          (p-1) a + (p-1)/p n b  (n: the total, n/p per peer)          Thakur et al. 2005
gather / scatter linear    as alltoall, at the root                                     [derived]
gather / scatter binomial  ceil(lg p) a + (p-1)/p n b                                   MPICH gather/scatter
sendrecv shift             a + n b  (to rank + 1)                                       nccl-tests sendrecv.cu
=========================  ===========================================================  ===========================

Across nodes (ranks placed in blocks of ``ppn`` per node) the step-by-step algorithms charge each step at the
link it uses: a partner at distance d < ppn is on the same node (alpha, intra bandwidth); otherwise the step
crosses nodes (alpha_inter, and the node's NIC bandwidth shared by its ppn ranks, at most the intra bandwidth).
The grouped point-to-point ops (alltoall, gather, scatter, sendrecv) overlap a rank's NVLink and NIC transfers:
their bandwidth term is the slower of the two link classes (:func:`_exchange`).
A multi-node NVLink domain (``LinkParams.nvl_domain`` larger than a node, e.g. 72 GPUs of an NVL72 rack) counts
as one node here: its ranks reach each other over NVLink, only steps between domains cross the NICs.
Ring and tree are pipelined through every node once, so they see the **multi-node ring bound**:

    busbw <= min(intra-node ring busbw, NICs per node x NIC bandwidth)            (nccl-facts 7)

because every node's NICs together carry f x n (f the busbw factor) per collective. ``LinkParams.bw_gbps`` is
that bound; ring steps take alpha_inter when the ring crosses nodes. Non-power-of-two rank counts: recursive
doubling/halving and Rabenseifner fold the r = p - 2^floor(lg p) extra ranks in with one step of n bytes before
and one after (MPICH), all_gather recursive doubling is charged like Bruck [approximation].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from collscope.analysis.model_types import LinkParams, Prediction, make_prediction
from collscope.collectives.record import busbw_factor
from collscope.errors import ConfigError
from collscope.vocab.ops import op_facts

__all__ = [
    "ALPHA_BETA_MODELS",
    "alpha_beta_time_us",
    "alpha_beta_predictions",
    "lower_bound_us",
    "ring_bound_busbw_gbps",
    "p2p_net_gbps",
    "p2p_intra_gbps",
    "p2p_root_net_gbps",
    "p2p_pair_net_gbps",
    "p2p_op_net_gbps",
    "p2p_wire_us",
    "NVLINK_P2P_EFFICIENCY",
    "p2p_spread",
]


# ---- step costs ---------------------------------------------------------------------------------------------
def _us(nbytes: float, gbps: float) -> float:
    """Transfer time in us of ``nbytes`` at ``gbps`` decimal GB/s: n / (gbps * 1e9) s = n / (gbps * 1e3) us."""
    return nbytes / (gbps * 1e3)


def _reduce_us(p: LinkParams, nbytes: float) -> float:
    return 0.0 if p.gamma_gbps is None else _us(nbytes, p.gamma_gbps)


def _step_link(p: LinkParams, distance: int) -> tuple[float, float]:
    """(alpha us, GB/s) of one step between partners ``distance`` ranks apart (block placement): inside one NVLink
    domain (the node, or a multi-node NVLink domain) the intra-node link, else the NICs."""
    if p.ndomains == 1 or distance < p.domain_ranks:
        return p.alpha_us, p.intra_gbps
    if p.inter_bw_gbps is None:
        return p.alpha_net_us, p.bw_gbps
    return p.alpha_net_us, min(p.intra_gbps, p.inter_bw_gbps / p.ppn)


def _step(p: LinkParams, distance: int, nbytes: float, reduce_bytes: float = 0.0) -> float:
    alpha, gbps = _step_link(p, distance)
    return alpha + _us(nbytes, gbps) + _reduce_us(p, reduce_bytes)


def _pow2_floor(x: int) -> int:
    return 1 << (x.bit_length() - 1)


def _ceil_lg(x: int) -> int:
    return (x - 1).bit_length()


def _ring_alpha(p: LinkParams) -> float:
    return p.alpha_net_us if p.ndomains > 1 else p.alpha_us


# ---- all_reduce ---------------------------------------------------------------------------------------------
def _ar_ring(p: LinkParams, n: float) -> float:
    r = p.nranks
    return 2 * (r - 1) * _ring_alpha(p) + _us(2 * (r - 1) / r * n, p.bw_gbps) + _reduce_us(p, (r - 1) / r * n)


def _ar_double_binary_tree(p: LinkParams, n: float) -> float:
    # Chains inside nodes, binary trees over nodes, two trees with half the data each, pipelined:
    # 2 ((ppn-1) a + floor(lg N) a_net) + 2 n / B + n g (nccl-facts 7 and NCCL's Tree latency line, 1.5).
    # A multi-node NVLink domain is one chain, as one node (its GPUs talk over NVLink, not the NICs).
    depth = (p.domain_ranks - 1) * p.alpha_us + (p.ndomains.bit_length() - 1) * p.alpha_net_us
    return 2 * depth + _us(2 * n, p.bw_gbps) + _reduce_us(p, n)


def _fold_extra(p: LinkParams, n: float, core: Callable[[int], float], *, back_bytes: float) -> float:
    """Non-power-of-two ranks: one step of n (with its reduction) in, the core on 2^k ranks, one step back."""
    core_ranks = _pow2_floor(p.nranks)
    extra = 0.0 if core_ranks == p.nranks else _step(p, 1, n, n) + _step(p, 1, back_bytes)
    return extra + core(core_ranks)


def _ar_recursive_doubling(p: LinkParams, n: float) -> float:
    def core(q: int) -> float:
        return sum(_step(p, 1 << i, n, n) for i in range(q.bit_length() - 1))

    return _fold_extra(p, n, core, back_bytes=n)


def _rs_halving_core(p: LinkParams, n: float, q: int) -> float:
    # step i: partner q / 2^(i+1) away, send and reduce n / 2^(i+1); total (q-1)/q n.
    k = q.bit_length() - 1
    return sum(_step(p, q >> (i + 1), n / (1 << (i + 1)), n / (1 << (i + 1))) for i in range(k))


def _ag_doubling_core(p: LinkParams, n: float, q: int) -> float:
    # step i: partner 2^i away, send 2^i blocks of n / q; total (q-1)/q n.
    k = q.bit_length() - 1
    return sum(_step(p, 1 << i, n * (1 << i) / q) for i in range(k))


def _ar_rabenseifner(p: LinkParams, n: float) -> float:
    return _fold_extra(p, n, lambda q: _rs_halving_core(p, n, q) + _ag_doubling_core(p, n, q), back_bytes=n)


def _binomial(p: LinkParams, n: float, reduce_bytes: float) -> float:
    return sum(_step(p, 1 << i, n, reduce_bytes) for i in range(_ceil_lg(p.nranks)))


def _ar_binomial(p: LinkParams, n: float) -> float:
    return _binomial(p, n, n) + _binomial(p, n, 0.0)


def _ar_linear(p: LinkParams, n: float) -> float:
    # The root receives p-1 vectors and reduces each, then sends p-1 copies, one message at a time.
    far = p.nranks - 1
    return sum(_step(p, d, n, n) + _step(p, d, n) for d in range(1, far + 1))


# ---- all_gather, reduce_scatter ----------------------------------------------------------------------------
def _ag_ring(p: LinkParams, n: float) -> float:
    r = p.nranks
    return (r - 1) * _ring_alpha(p) + _us((r - 1) / r * n, p.bw_gbps)


def _ag_bruck(p: LinkParams, n: float) -> float:
    # ceil(lg p) steps; step i sends min(2^i, p - 2^i) blocks of n / p to the rank 2^i away.
    r = p.nranks
    return sum(_step(p, 1 << i, min(1 << i, r - (1 << i)) * n / r) for i in range(_ceil_lg(r)))


def _ag_recursive_doubling(p: LinkParams, n: float) -> float:
    if _pow2_floor(p.nranks) == p.nranks:
        return _ag_doubling_core(p, n, p.nranks)
    return _ag_bruck(p, n)


def _rs_ring(p: LinkParams, n: float) -> float:
    r = p.nranks
    return (r - 1) * _ring_alpha(p) + _us((r - 1) / r * n, p.bw_gbps) + _reduce_us(p, (r - 1) / r * n)


def _rs_recursive_halving(p: LinkParams, n: float) -> float:
    return _fold_extra(p, n, lambda q: _rs_halving_core(p, n, q), back_bytes=n / p.nranks)


# ---- broadcast, reduce -------------------------------------------------------------------------------------
def _bc_binomial(p: LinkParams, n: float) -> float:
    return _binomial(p, n, 0.0)


def _scatter_binomial(p: LinkParams, n: float, reduce: bool) -> float:
    # step i: partner p / 2^(i+1) away gets n / 2^(i+1); total (p-1)/p n for p = 2^k.
    k = _ceil_lg(p.nranks)
    return sum(_step(p, max(1, p.nranks >> (i + 1)), n / (1 << (i + 1)), n / (1 << (i + 1)) if reduce else 0.0)
               for i in range(k))


def _bc_scatter_allgather(p: LinkParams, n: float) -> float:
    return _scatter_binomial(p, n, False) + _ag_ring(p, n)


def _reduce_binomial(p: LinkParams, n: float) -> float:
    return _binomial(p, n, n)


def _reduce_rabenseifner(p: LinkParams, n: float) -> float:
    # reduce-scatter by recursive halving, then a binomial gather to the root (the scatter reversed).
    return _rs_recursive_halving(p, n) + _scatter_binomial(p, n, False)


# ---- alltoall, gather, scatter, sendrecv: grouped point-to-point ---------------------------------------------
# NCCL runs these as ncclSend/ncclRecv pairs inside one ncclGroupStart/End (nccl-tests src/alltoall.cu,
# gather.cu, scatter.cu, sendrecv.cu; NCCL >= 2.28 ncclAlltoAll/ncclGather/ncclScatter do the same): a rank's
# transfers to peers in its NVLink domain and to peers across the network are in flight together, so the
# bandwidth term is the slower of the two link classes [derived], and the latency term charges one message per
# peer, as the pairwise exchange does (Thakur, Rabenseifner & Gropp 2005: (p-1) a + (p-1)/p n b).
NVLINK_P2P_EFFICIENCY = 370.0 / 450.0
"""NCCL's effective NVLink rate over the line rate for transfers without NVLink SHARP: "450GB/s is the line rate.
With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s, which you can observe as
"BusBw" when running non-allreduce operations" (sjeaugey, H100, https://github.com/NVIDIA/nccl-tests/issues/212)."""


def p2p_intra_gbps(p: LinkParams) -> float:
    """A rank's rate to peers in its NVLink domain for point-to-point transfers: the NVLink line rate x
    :data:`NVLINK_P2P_EFFICIENCY`; other links (PCIe, explicit ``bw``) as given."""
    return p.intra_gbps * NVLINK_P2P_EFFICIENCY if p.intra_link == "nvlink" else p.intra_gbps


def p2p_net_gbps(p: LinkParams) -> float:
    """One rank's rate to peers in other NVLink domains when every rank of its node sends across at once: its
    share of the node's NICs, at most one NIC ("Alltoall cannot aggregate the bandwidth of multiple NICs, so the
    performance you should see is the performance of a single NIC", sjeaugey,
    https://github.com/NVIDIA/nccl-tests/issues/267): the per-GPU NIC rate with one NIC per GPU (400 Gb/s -> 50 GB/s);
    at most the intra-node rate; :func:`p2p_intra_gbps` when one domain holds every rank."""
    if p.ndomains == 1:
        return p2p_intra_gbps(p)
    share = _step_link(p, p.domain_ranks)[1]
    return min(share, p2p_intra_gbps(p)) if p.nic_gbps is None else min(share, p.nic_gbps, p2p_intra_gbps(p))


def p2p_root_net_gbps(p: LinkParams) -> float:
    """The rate at which a scatter's root sends to peers in other NVLink domains: its node's NICs together, at most
    its NVLink rate. Only the root crosses, to peers on every rail, and NCCL sends each transfer through the NIC of
    its node that is local to the GPU of the peer's index, over NVLink to that GPU first (PXN: src/graph/search.cc
    ``ncclTopoGetNetDev`` picks "the remote rank preferred device", ``NCCL_P2P_PXN_LEVEL`` default 2). Without the
    node's NIC total (``--bw-gbps`` only), :func:`p2p_net_gbps`."""
    if p.ndomains == 1 or p.inter_bw_gbps is None:
        return p2p_net_gbps(p)
    return min(p.inter_bw_gbps, p2p_intra_gbps(p))


def p2p_pair_net_gbps(p: LinkParams) -> float:
    """The rate of one rank's own NIC, at most its NVLink rate, for the transfers across the network that only it
    makes at a time: sendrecv's last rank of a domain sending to the first of the next, and a gather's root
    receiving from every peer of the other domains (NCCL has no PXN on receive, src/transport/net.cc ``recvSetup``:
    the receiver uses its own local NIC). Without a NIC rate, :func:`p2p_net_gbps`."""
    if p.ndomains == 1 or p.nic_gbps is None:
        return p2p_net_gbps(p)
    return min(p.nic_gbps, p2p_intra_gbps(p))


def p2p_op_net_gbps(p: LinkParams, op: str) -> float:
    """The rate of the transfers across the network of the rank that sets a grouped point-to-point op's time:
    :func:`p2p_root_net_gbps` for a root that sends a block to every peer (scatter), :func:`p2p_pair_net_gbps` for
    a rank with one peer (sendrecv) or a root that receives from every peer (gather), else :func:`p2p_net_gbps`
    (alltoall: every rank crosses at once)."""
    facts = op_facts(op)
    if facts.rooted and facts.send_blocks_nranks:
        return p2p_root_net_gbps(p)
    if facts.one_peer or facts.rooted:
        return p2p_pair_net_gbps(p)
    return p2p_net_gbps(p)


def p2p_spread(p: LinkParams) -> tuple[int, int]:
    """(peers in the rank's NVLink domain, peers across the network) of one rank: (d - 1, p - d) with d the
    domain's ranks, block placement."""
    return p.domain_ranks - 1, p.nranks - p.domain_ranks


def p2p_wire_us(p: LinkParams, op: str, size_bytes: float) -> tuple[float, float]:
    """(time at the p2p bound in us, bytes per peer) of the rank that sets ``op``'s time, ``size_bytes`` as
    nccl-tests prints it: one peer and the whole size for an op whose ranks each send to one peer (sendrecv: the
    NVLink rate, and across NVLink domains the rank's own NIC); else size / nranks with each peer of the rank, the
    peers in its NVLink domain at the NVLink rate and the others at its NIC share (alltoall), its node's NICs (a
    scatter's root) or its own NIC (a gather's root), whichever class is slower (the network rates:
    :func:`p2p_op_net_gbps`). The models of nccl_model.p2p and :func:`_exchange` both take it."""
    intra = p2p_intra_gbps(p) * 1e3
    net = p2p_op_net_gbps(p, op) * 1e3
    if op_facts(op).one_peer:
        return max(size_bytes / intra, size_bytes / net if p.ndomains > 1 else 0.0), float(size_bytes)
    local, remote = p2p_spread(p)
    per_peer = size_bytes / p.nranks
    return max(local * per_peer / intra, remote * per_peer / net if remote else 0.0), per_peer


def _exchange(p: LinkParams, n: float, *, op: str = "alltoall") -> float:
    """One rank exchanges a block of n / p with each of the p - 1 others (alltoall: every rank; gather and scatter:
    the root, whose link carries all the traffic). Time: (d-1) a + (p-d) a_net + max((d-1)/p n / B_intra,
    (p-d)/p n / B_net), B_intra = :func:`p2p_intra_gbps`, B_net = :func:`p2p_op_net_gbps` of ``op`` (alltoall: the
    rank's NIC share; a scatter's root: its node's NICs; a gather's root: its own NIC)."""
    local, remote = p2p_spread(p)
    return local * p.alpha_us + remote * p.alpha_net_us + p2p_wire_us(p, op, n)[0]


def _gather_linear(p: LinkParams, n: float) -> float:
    return _exchange(p, n, op="gather")


def _scatter_linear(p: LinkParams, n: float) -> float:
    return _exchange(p, n, op="scatter")


def _gather_binomial(p: LinkParams, n: float) -> float:
    # MPICH gather/scatter binomial: ceil(lg p) steps, step i moves n / 2^(i+1) between partners p / 2^(i+1) apart:
    # ceil(lg p) a + (p-1)/p n b (the binomial scatter's cost; the gather is the same steps reversed).
    return _scatter_binomial(p, n, False)


def _sendrecv_shift(p: LinkParams, n: float) -> float:
    # nccl-tests src/sendrecv.cu: each rank sends n to rank + 1 and receives n from rank - 1, all at once. One
    # domain: a + n / B_intra; across domains the last rank of each domain sends over the network:
    # a_net + n / B_net, and that rank sets the time.
    if p.ndomains == 1:
        return p.alpha_us + _us(n, p2p_intra_gbps(p))
    return max(p.alpha_us + _us(n, p2p_intra_gbps(p)), p.alpha_net_us + _us(n, p2p_pair_net_gbps(p)))


def _bc_ring(p: LinkParams, n: float) -> float:
    # NCCL's Broadcast/Reduce run Ring only (nccl-facts 1.4), pipelined along the chain root -> ... -> last:
    # (p-1) a + n / B (+ n g for reduce), B the ring's rate (the multi-node ring bound across domains).
    return (p.nranks - 1) * _ring_alpha(p) + _us(n, p.bw_gbps)


def _reduce_ring(p: LinkParams, n: float) -> float:
    return _bc_ring(p, n) + _reduce_us(p, n)


ALPHA_BETA_MODELS: dict[str, dict[str, Callable[[LinkParams, float], float]]] = {
    "all_reduce": {"ring": _ar_ring, "double_binary_tree": _ar_double_binary_tree,
                   "recursive_doubling": _ar_recursive_doubling, "rabenseifner": _ar_rabenseifner,
                   "binomial": _ar_binomial, "linear": _ar_linear},
    "all_gather": {"ring": _ag_ring, "recursive_doubling": _ag_recursive_doubling, "bruck": _ag_bruck},
    "reduce_scatter": {"ring": _rs_ring, "recursive_halving": _rs_recursive_halving},
    "alltoall": {"pairwise": _exchange},
    "broadcast": {"binomial": _bc_binomial, "scatter_allgather": _bc_scatter_allgather, "ring": _bc_ring},
    "reduce": {"binomial": _reduce_binomial, "rabenseifner": _reduce_rabenseifner, "ring": _reduce_ring},
    "sendrecv": {"shift": _sendrecv_shift},
    "gather": {"linear": _gather_linear, "binomial": _gather_binomial},
    "scatter": {"linear": _scatter_linear, "binomial": _gather_binomial},
}
"""op -> algorithm -> time_us(params, size_bytes)."""


def _check_op(op: str) -> dict[str, Callable[[LinkParams, float], float]]:
    if op not in ALPHA_BETA_MODELS:
        raise ConfigError(f"no model for collective {op!r}; valid: {', '.join(ALPHA_BETA_MODELS)}")
    return ALPHA_BETA_MODELS[op]


def alpha_beta_time_us(op: str, algo: str, params: LinkParams, size_bytes: float) -> float:
    """Time in microseconds of one collective of ``size_bytes`` with one algorithm."""
    models = _check_op(op)
    if algo not in models:
        raise ConfigError(f"no {op} model {algo!r}; valid: {', '.join(models)}")
    if size_bytes < 0:
        raise ConfigError(f"size must be >= 0 bytes, got {size_bytes}")
    return models[algo](params, float(size_bytes))


def alpha_beta_predictions(op: str, params: LinkParams, sizes: Iterable[int],
                           algos: Iterable[str] | None = None) -> list[Prediction]:
    """Every (algorithm, size) of ``op``, size-major, algorithms in :data:`ALPHA_BETA_MODELS` order."""
    names = list(_check_op(op)) if algos is None else list(algos)
    return [make_prediction("alpha-beta", a, None, op, s, alpha_beta_time_us(op, a, params, s), params.nranks)
            for s in sizes for a in names]


def lower_bound_us(op: str, params: LinkParams, size_bytes: float) -> float:
    """ceil(lg p) alpha_min + f n / B_max: the latency bound plus the bandwidth bound (Chan et al. 2007;
    nccl-facts 7), with f = busbw_factor(op, p) (1 for broadcast/reduce) and the fastest link of the params. One
    message's latency for an op whose ranks each talk to one peer (sendrecv); for grouped point-to-point ops across
    NVLink domains B_max is NVLink plus the rank's rate across the network (:func:`p2p_op_net_gbps`), whose transfers
    overlap (:func:`_exchange`)."""
    _check_op(op)
    facts = op_facts(op)
    alpha = min(params.alpha_us, params.alpha_net_us)
    fastest = max(params.bw_gbps, params.intra_gbps)
    if facts.nccl_func is None and params.ndomains > 1:
        fastest = max(fastest, params.intra_gbps + p2p_op_net_gbps(params, op))
    steps = 1 if facts.one_peer else _ceil_lg(params.nranks)
    return steps * alpha + _us(busbw_factor(op, params.nranks) * size_bytes, fastest)


def ring_bound_busbw_gbps(params: LinkParams) -> float:
    """The multi-node ring bound: min(intra-node ring busbw, NICs per node x NIC bandwidth) (nccl-facts 7); one
    NVLink domain holding every rank is bound by its NVLink only, and a ring across multi-node NVLink domains by
    the NICs of a domain's nodes together (the ring enters and leaves each domain once) [derived]."""
    if params.ndomains == 1:
        return params.intra_gbps
    if params.inter_bw_gbps is None:
        return params.bw_gbps
    return min(params.intra_gbps, params.inter_bw_gbps * (params.domain_ranks // params.ppn))
