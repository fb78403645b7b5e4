"""What nccl-tests measures for alltoall on NCCL: grouped point-to-point, which NCCL's tuning model does not cover.

NCCL runs alltoall as one ``ncclSend``/``ncclRecv`` pair per peer inside a group (nccl-tests src/alltoall.cu;
``ncclAlltoAll`` of NCCL >= 2.28 does the same): no algorithm x protocol table, so :mod:`.model` has nothing to
choose. The bandwidth side is the p2p bound of :mod:`collscope.analysis.models` (each rank's bytes to peers in its
NVLink domain at NCCL's effective NVLink rate, to the other domains at its share of the NICs, whichever is slower);
four terms fitted on the published alltoall rows of bench/scorecard/published.csv (GB200/GB300/B300 trays,
NVL72 partitions and racks, HGX H100 nodes and a 10-node H100 cluster, 1 MiB to 16 GiB) and checked leaving one
system out at a time (``bench/p2p_fit.py`` prints the fit and the held-out count against the pairwise alpha-beta
model's: 110 of 118 rows left out, 100 without the channel term below):

- :data:`P2P_LAUNCH_US`: the fixed cost of a grouped launch, whatever the number of peers (the published 1 MiB
  times are 17 us on 4 ranks and 31 us on 64: not a per-peer alpha, which charges 63 x alpha on 64 ranks; the
  ramp below charges the peers);
- :data:`P2P_EFFICIENCY`: the published peaks sit at 0.8 to 0.95 of the p2p bound (615-683 GB/s on NVLink5, whose
  bound is 900 GB/s x 370/450; 88-90 GB/s against a 98 GB/s NIC share between racks; 348-357 GB/s on 4 and 8 H100
  of one HGX node, whose bound is 370.8); 0.85 places the most of them (0.8 did before the H100 rows came);
- :data:`P2P_RAMP_BYTES_PER_PEER`: the size ramp, a rank reaching b / (b + 128 KiB) of that rate with b bytes per
  peer;
- :data:`P2P_CHANNEL_GBPS`: what a channel carries, inside one NVLink domain, where the channels NCCL's rule keeps
  busy carry less than the p2p rate (a GB300 tray's alltoall: 24 of 32 channels up to 512 MiB).

With the channel term the fit moved the launch from 20 to 18 us and the ramp from 256 to 128 KiB: the 4- and 8-GPU
GB300 curves' shortfall at 32-512 MiB, which a longer ramp had partly stood for, is the channels', and 64 GB300 of
a rack take 31-33 us at 1-2 MiB, the 128 KiB ramp's 31 us (the 256 KiB one's 46: 0.65 x the published busbw).

Only alltoall is fitted (:data:`P2P_FITTED_OPS`). gather, scatter and sendrecv are the same mechanism (grouped
``ncclSend``/``ncclRecv``, nccl-tests src/gather.cu, scatter.cu, sendrecv.cu) with another traffic pattern, so
:data:`P2P_MODELLED_OPS` applies the alltoall terms to the bytes of the rank that sets their time
(:func:`.models.p2p_wire_us`): the root of gather and scatter (a block of size / nranks with each peer; across the
network a scatter's root sends through all its node's NICs, PXN, and a gather's root receives through its own NIC),
and for sendrecv a rank sending the whole size to one peer (its own NIC when that peer is in another NVLink domain).
Their published rows were never used to fit the launch, efficiency and ramp: they are the check (two one-node
sendrecv curves are two of the three sources of :data:`P2P_CHANNEL_GBPS`).
docs/reading-results.md shows the rows, and the systems where it is still off (a 128-rank job whose every size up to
32 MiB takes about 500 us, alltoall between NVL72 racks, sendrecv on a fabric its source reports congested).
NCCL's own rules (the variables a job sets, the channels and the protocol of a transfer) are :mod:`.p2p_rules`.
"""

from __future__ import annotations

from collections.abc import Iterable

from collscope.analysis.model_types import LinkParams, make_prediction
from collscope.analysis.models import p2p_wire_us
from collscope.analysis.nccl_model.model import NcclChoice
from collscope.analysis.nccl_model.p2p_rules import (
    DEFAULT_P2P_TUNING,
    P2P_LL_PROTO,
    P2pTuning,
    p2p_active_channels,
    p2p_protocol,
    p2p_transfers,
)
from collscope.topo.gpus import gpu_generation
from collscope.units import format_size

__all__ = ["P2P_LAUNCH_US", "P2P_EFFICIENCY", "P2P_RAMP_BYTES_PER_PEER", "P2P_FITTED_OPS", "P2P_MODELLED_OPS",
           "P2P_ALGO", "P2P_LL_MODEL", "P2P_CHANNEL_GBPS", "P2P_CHANNEL_SOURCES", "p2p_channel_gbps",
           "p2p_channel_notes", "p2p_time_us", "p2p_choice",
           "p2p_ll_note", "p2p_ll_sizes"]

P2P_LAUNCH_US = 18.0
"""Fixed cost of one grouped alltoall launch, us (fitted, module doc)."""
P2P_EFFICIENCY = 0.85
"""Share of the p2p bound a large alltoall reaches (fitted, module doc)."""
P2P_RAMP_BYTES_PER_PEER = 128 * 1024
"""Per-peer bytes at which alltoall reaches half its rate (fitted, module doc)."""
P2P_FITTED_OPS = ("alltoall",)
"""The op whose published rows fitted the four terms."""
P2P_MODELLED_OPS = ("alltoall", "gather", "scatter", "sendrecv")
"""The grouped point-to-point ops with this model (nccl-tests' hypercube, whose peers change per step, has none)."""
P2P_CHANNEL_GBPS: tuple[tuple[int, float], ...] = ((90, 20.0), (80, 13.0))
"""What one channel (a CTA) carries point-to-point over NVLink, GB/s, by the GPU's sm (the first row at or below
it; none below sm 80): a rank's transfers inside one NVLink domain reach the p2p rate (the bound x
:data:`P2P_EFFICIENCY`) only with enough channels busy (:func:`.p2p_rules.p2p_active_channels`, NCCL's rule), else
they get channels x this. Fitted, not NCCL's, on three published sources of three GPU generations, each stepping
with NCCL's channels: one node's sendrecv of 8 H100 (xxrjun/nccl-tests-cluster, NCCL 2.29.2), 80-82 GB/s on 4
channels (32-64 MiB) and 163 on 8 (128 MiB), 20.2-20.4 a channel; 8 A100 (li-plus/playground, -g 8), 111 on 8
channels (128 MiB), 13.9; OCI's GB300 alltoall (NCCL 2.28.7), 491-512 GB/s busbw on a tray's 24 channels (4 ranks,
256-512 MiB, 20.5-21.3 a channel) and 562-590 on 2 trays' 28 (8 ranks, 20.1-21.1), both reaching 614-685 once every
channel is busy (1-16 GiB). On H100 and A100 16 channels carry the p2p rate (the ``P2P_SATURATING_CHANNELS`` = 16 this
replaces), on NVLink5 about 30: a GB300 tray's alltoall runs below its rate up to 512 MiB. ``bench/p2p_fit.py``
scores 16-24 GB/s with the other terms refitted: 20 places the most alltoall rows."""
P2P_CHANNEL_SOURCES = ("xxrjun/nccl-tests-cluster (8 H100 sendrecv), li-plus/playground (8 A100 sendrecv), "
                       "oracle-quickstart/oci-gpu-quickstarts (GB300 alltoall, 4 and 8 ranks)")
P2P_ALGO = "P2P"
"""The name the choice carries: not an NCCL_ALGO value (NCCL_ALGO does not apply to point-to-point)."""
P2P_LL_MODEL = f"{P2P_ALGO}/{P2P_LL_PROTO}"
"""The model name analyze's rows carry where NCCL sends the transfers with LL (:func:`p2p_ll_note`)."""
def p2p_time_us(params: LinkParams, op: str, size_bytes: int, *, launch_us: float = P2P_LAUNCH_US,
                efficiency: float = P2P_EFFICIENCY, ramp_bytes: float = P2P_RAMP_BYTES_PER_PEER,
                channel_table: tuple[tuple[int, float], ...] = P2P_CHANNEL_GBPS,
                tuning: P2pTuning = DEFAULT_P2P_TUNING) -> float | None:
    """The time nccl-tests measures for ``op`` at ``size_bytes``: the launch, then :func:`.models.p2p_wire_us` at the
    efficiency or, inside one NVLink domain, at what the busy channels carry where that is slower
    (:data:`P2P_CHANNEL_GBPS`), ramped by the bytes per peer; None for an op without this model or a size <= 0. The
    keywords are the fitted terms (bench/p2p_fit.py refits them)."""
    if op not in P2P_MODELLED_OPS or size_bytes <= 0:
        return None
    wire_us, per_peer = p2p_wire_us(params, op, size_bytes)
    wire_us = max(wire_us / efficiency, _channel_bound_us(params, op, size_bytes, tuning, channel_table))
    return launch_us + wire_us * (1.0 + ramp_bytes / per_peer)


def p2p_channel_gbps(gpu: str | None, table: tuple[tuple[int, float], ...] = P2P_CHANNEL_GBPS) -> float | None:
    """:data:`P2P_CHANNEL_GBPS` (or ``table``) of ``gpu``'s generation; None for an unknown GPU or one below the
    table's rows."""
    gen = gpu_generation(gpu) if gpu else None
    if gen is None:
        return None
    return next((rate for sm, rate in table if gen.sm >= sm), None)


def _channel_bound_us(params: LinkParams, op: str, size_bytes: int, tuning: P2pTuning,
                      table: tuple[tuple[int, float], ...] = P2P_CHANNEL_GBPS) -> float:
    """The time of the bytes the rank that sets ``op``'s time sends inside one NVLink domain at what its busy
    channels carry (:func:`.p2p_rules.p2p_active_channels` x :data:`P2P_CHANNEL_GBPS`, or ``table``); 0.0 where
    there is no rule (across domains, an unknown GPU)."""
    rate = p2p_channel_gbps(params.gpu, table)
    active = p2p_active_channels(params, op, size_bytes, tuning)
    if not rate or not active:
        return 0.0
    per_peer = p2p_wire_us(params, op, size_bytes)[1]
    return per_peer * p2p_transfers(params, op) / (active * rate * 1000)


def p2p_ll_sizes(choices: Iterable[NcclChoice]) -> list[int]:
    """The sizes of ``choices`` (NCCL's model's, or this model's) that NCCL sends as LL point-to-point."""
    return [c.size_bytes for c in choices if f"{c.algo}/{c.proto}" == P2P_LL_MODEL]


def p2p_ll_note(op: str, sizes: Iterable[int], tuning: P2pTuning = DEFAULT_P2P_TUNING) -> str:
    """What the expected figure of ``op`` is at ``sizes``, where NCCL sends LL (:func:`p2p_protocol`); empty
    without such sizes."""
    held = sorted(set(sizes))
    if not held:
        return ""
    shown = ", ".join(format_size(s) for s in held)
    threshold = format_size(tuning.ll_threshold_bytes)
    return (f"{op} at {shown}: NCCL sends each of these transfers with the LL protocol (a transfer of at most its "
            f"channels x NCCL_P2P_LL_THRESHOLD, {threshold}: src/enqueue.cc addP2pToPlan), "
            "while the model's launch, efficiency and size ramp are fitted on published alltoall rows nearly all of "
            "Simple transfers: the expected figure there is that fit's (the launch alone at the smallest sizes), "
            "with no LL term of its own")


def p2p_choice(params: LinkParams, op: str, size_bytes: int,
               tuning: P2pTuning = DEFAULT_P2P_TUNING) -> NcclChoice | None:
    """The model as an :class:`NcclChoice` (``algo`` :data:`P2P_ALGO`): its time is both NCCL's "model time" and
    the expected measurement, as NCCL has no model of its own to compare; None where :func:`p2p_time_us` is."""
    time = p2p_time_us(params, op, size_bytes, tuning=tuning)
    if time is None:
        return None
    proto = p2p_protocol(params, op, size_bytes, tuning)
    busbw = make_prediction("nccl", P2P_ALGO, proto, op, size_bytes, time, params.nranks).busbw_gbps
    return NcclChoice(size_bytes=int(size_bytes), algo=P2P_ALGO, proto=proto, time_us=time, busbw_gbps=busbw,
                      expected_time_us=time, expected_busbw_gbps=busbw)


def p2p_channel_notes(params: LinkParams, op: str, sizes: Iterable[int],
                      tuning: P2pTuning = DEFAULT_P2P_TUNING) -> list[str]:
    """A note naming the sizes where the channels ``op`` keeps busy inside one NVLink domain carry less than the p2p
    rate (:data:`P2P_CHANNEL_GBPS`), with their count; empty elsewhere."""
    rate = p2p_channel_gbps(params.gpu)
    if rate is None:
        return []
    few = [(s, c) for s in sorted(set(sizes)) if s > 0 and (c := p2p_active_channels(params, op, s, tuning))
           is not None and _channel_bound_us(params, op, s, tuning) > p2p_wire_us(params, op, s)[0] / P2P_EFFICIENCY]
    if not few:
        return []
    runs: list[list[tuple[int, int]]] = []  # consecutive sizes on the same channels: "2M-512M on 24"
    for size, channels in few:
        if runs and runs[-1][-1][1] == channels:
            runs[-1].append((size, channels))
        else:
            runs.append([(size, channels)])
    parts = ", ".join(f"{format_size(run[0][0])}{'-' + format_size(run[-1][0]) if len(run) > 1 else ''} on "
                      f"{run[0][1]}" for run in runs)
    return [f"{op} inside one NVLink domain keeps the channels NCCL's p2p rule gives its transfers busy ({parts}): "
            f"at about {rate:g} GB/s a channel (P2P_CHANNEL_GBPS, fitted on {P2P_CHANNEL_SOURCES}) they carry less "
            f"than the p2p rate, so that is the expected rate there; NCCL_MIN_P2P_NCHANNELS (more p2p channels) and "
            f"NCCL_P2P_NVL_CHUNKSIZE (larger parts) change it (src/graph/paths.cc, src/enqueue.cc)"]
