"""NCCL's own point-to-point rules, as NCCL 2.30 writes them (nothing here is fitted): the variables a job sets
(:class:`P2pTuning`), the chunk and the parts of a transfer (src/init.cc computeBuffSizes), the channels NCCL gives a
transfer and its nChannelsMin inside one NVLink domain and across domains (src/graph/paths.cc, src/enqueue.cc
addP2pToPlan), and the protocol it sends each transfer with. What nccl-tests measures for grouped point-to-point,
with its fitted terms, is :mod:`.p2p`, which reads these.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from collscope.analysis.model_types import LinkParams
from collscope.analysis.models import p2p_wire_us
from collscope.analysis.nccl_model.constants import DEFAULT_BUFFSIZE_BYTES, NCCL_PCI_X16_GBPS, NCCL_STEPS
from collscope.analysis.nccl_model.measured import runtime_channels
from collscope.analysis.nccl_model.search import GRACE_GPUS, graph_inputs_from_topology
from collscope.errors import ConfigError
from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.units import format_size
from collscope.vocab.nccl import ignored_unit_note, nccl_param_int
from collscope.vocab.ops import op_facts

__all__ = ["P2P_PROTO", "P2P_LL_PROTO", "P2P_LL_THRESHOLD_BYTES", "P2P_NVL_CHUNK_BYTES", "P2pTuning",
           "DEFAULT_P2P_TUNING", "P2P_TUNING_VARIABLES", "p2p_tuning", "p2p_chunk_bytes", "p2p_protocol",
           "p2p_channels", "p2p_active_channels", "p2p_transfers", "p2p_tuning_notes"]

P2P_NVL_CHUNK_BYTES = 512 * 1024
"""NCCL's p2p chunk between GPUs joined by NVLink (``NCCL_P2P_NVL_CHUNKSIZE``, 512 KiB, src/init.cc)."""
_MAXCHANNELS = 64
"""src/include/device.h MAXCHANNELS (2.30)."""
P2P_PROTO = "Simple"
"""NCCL's point-to-point transfers above NCCL_P2P_LL_THRESHOLD (16 KiB per peer) use the Simple protocol."""
P2P_LL_PROTO = "LL"
"""The protocol of a transfer at or below :data:`P2P_LL_THRESHOLD_BYTES`."""
P2P_LL_THRESHOLD_BYTES = 16 * 1024
"""NCCL sends a point-to-point transfer with LL when its bytes are at most its channels x NCCL_P2P_LL_THRESHOLD
(16384 by default; src/enqueue.cc ``addP2pToPlan``: ``protoLL &= bytes <= nChannels * ncclParamP2pLLThreshold()``,
``nChannels = min(nChannelsMin, divUp(bytes, minPartSize))``). Across NVLink domains and inside one of all-NVLink
GPUs the part is 64 KiB or more (the network chunk / 2, 128 or 256 KiB on Grace Blackwell; the NVLink chunk / 8,
512 KiB: src/init.cc computeBuffSizes), so a transfer of up to 64 KiB has one channel and LL runs exactly the
transfers of 16 KiB or less. On one node of GPUs not all joined by NVLink the part is NCCL_P2P_PCI_CHUNKSIZE / 8,
16 KiB: LL runs a transfer of up to nChannelsMin x 16 KiB (:func:`p2p_protocol`). A job's own threshold and chunks
are a :class:`P2pTuning`."""
_PCI_CHUNK_BYTES = 128 * 1024
"""NCCL_P2P_PCI_CHUNKSIZE's default (src/init.cc): the p2p chunk of one node whose GPUs are not all NVLink."""
_PCI_PEER_CHANNELS = 2
"""p2p channels per PCIe peer (src/graph/paths.cc ncclTopoGetNchannels: ``*nChannels = 2`` for a PCIe path)."""
_NET_CHUNK_BYTES = 128 * 1024
"""NCCL_P2P_NET_CHUNKSIZE's default (src/init.cc): the p2p chunk of a communicator across NVLink domains (twice it
where the CPU is ARM and the GPUs sm >= 100, Grace Blackwell, which collscope's inputs do not say: the bounds
below take the smaller chunk, so they never claim more than NCCL does)."""
_PER_CHANNEL_NET_GBPS = 14
"""NCCL_P2P_PER_CHANNEL_NET_BW's default, GB/s (src/graph/paths.cc): a peer in another NVLink domain gets a channel
per this much of the rank's NIC bandwidth, and at least one per NIC (:func:`_net_peer_channels`)."""
_P2P_PEERS_PER_BATCH = 8
"""src/include/device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH: across NVLink domains the per-peer channels are halved
while they times the peers' batches exceed the p2p channels (src/graph/paths.cc ncclTopoComputeP2pChannels)."""


@dataclass(frozen=True, slots=True)
class P2pTuning:
    """The NCCL variables that move NCCL's point-to-point parts and its LL boundary (src/init.cc computeBuffSizes,
    src/enqueue.cc addP2pToPlan), at NCCL's defaults unless a job set them."""

    ll_threshold_bytes: int = P2P_LL_THRESHOLD_BYTES
    nvl_chunk_bytes: int = P2P_NVL_CHUNK_BYTES
    pci_chunk_bytes: int = _PCI_CHUNK_BYTES
    net_chunk_bytes: int = _NET_CHUNK_BYTES
    simple_buffer_bytes: int = DEFAULT_BUFFSIZE_BYTES
    per_channel_net_gbps: int = _PER_CHANNEL_NET_GBPS
    set_text: tuple[str, ...] = ()
    """The variables set, as NCCL reads them (``NCCL_P2P_LL_THRESHOLD=0``); empty at NCCL's defaults."""


DEFAULT_P2P_TUNING = P2pTuning()
P2P_TUNING_VARIABLES: dict[str, str] = {
    "NCCL_P2P_LL_THRESHOLD": "ll_threshold_bytes",
    "NCCL_P2P_NVL_CHUNKSIZE": "nvl_chunk_bytes",
    "NCCL_P2P_PCI_CHUNKSIZE": "pci_chunk_bytes",
    "NCCL_P2P_NET_CHUNKSIZE": "net_chunk_bytes",
    "NCCL_BUFFSIZE": "simple_buffer_bytes",
    "NCCL_P2P_PER_CHANNEL_NET_BW": "per_channel_net_gbps",
}
"""The variables :class:`P2pTuning` takes, by field: the point-to-point model reads them (a collective's model
does not: NCCL_BUFFSIZE stays a variable it takes at NCCL's default)."""


def p2p_tuning(settings: Mapping[str, str]) -> tuple[P2pTuning, list[str]]:
    """(the tuning, notes) of a job's ``settings``: each variable of :data:`P2P_TUNING_VARIABLES` read as NCCL reads
    it (:func:`collscope.vocab.nccl.nccl_param_int`: ``128K`` is 128), with a note where NCCL ignores part of the
    value or a chunk it reads as 0 or less would break the run (NCCL_BUFFSIZE and the chunks must be positive; the
    LL threshold 0 turns LL off)."""
    fields: dict[str, int] = {}  # P2pTuning's field -> the value NCCL reads
    shown: list[str] = []
    notes: list[str] = []
    for name, field in P2P_TUNING_VARIABLES.items():
        text = str(settings.get(name, "")).strip()
        if not text:
            continue
        value, ignored = nccl_param_int(text)
        if ignored:
            notes.append(ignored_unit_note(name, text, value, ignored))
        if value <= 0 and field != "ll_threshold_bytes":
            notes.append(f"{name}={text}: NCCL reads {value}, not a value it can run with; the model keeps NCCL's "
                         f"default for it")
            continue
        fields[field] = max(0, value)
        shown.append(f"{name}={value}")
    return replace(DEFAULT_P2P_TUNING, **fields, set_text=tuple(shown)), notes


def p2p_chunk_bytes(params: LinkParams, tuning: P2pTuning = DEFAULT_P2P_TUNING) -> int:
    """NCCL's ``p2pChunkSize`` for ``params`` (src/init.cc computeBuffSizes): the network chunk across NVLink
    domains, the NVLink chunk on one node of all-NVLink GPUs, else the PCI chunk; at most NCCL_BUFFSIZE /
    NCCL_STEPS."""
    if params.ndomains > 1:
        chunk = tuning.net_chunk_bytes
    elif params.intra_link in ("nvlink", "unknown"):
        chunk = tuning.nvl_chunk_bytes
    else:
        chunk = tuning.pci_chunk_bytes
    return max(1, min(chunk, tuning.simple_buffer_bytes // NCCL_STEPS))


def _part_bytes(params: LinkParams, tuning: P2pTuning) -> tuple[int, int]:
    """(minPartSize, maxPartSize) of src/enqueue.cc addP2pToPlan: chunk / 2 and chunk across NVLink domains
    (NCCL's nNodes > 1), chunk / 8 and 32 chunks inside one."""
    chunk = p2p_chunk_bytes(params, tuning)
    return (max(1, chunk // 2), chunk) if params.ndomains > 1 else (max(1, chunk // 8), chunk * 32)


def _pci_min_channels(params: LinkParams) -> int:
    """nChannelsMin of one node of GPUs without NVLink (:func:`_start_channels` with 2 channels per PCIe peer); 1
    without a GPU generation to build the node's graphs."""
    found = _node_p2p_channels(params)
    if found is None:
        return 1
    p2p = found[1]
    return _start_channels(min(p2p, _PCI_PEER_CHANNELS), params.nranks, p2p)


def p2p_protocol(params: LinkParams, op: str, size_bytes: int, tuning: P2pTuning = DEFAULT_P2P_TUNING) -> str:
    """The protocol NCCL sends each transfer of ``op`` at ``size_bytes`` with (:data:`P2P_LL_THRESHOLD_BYTES`):
    :data:`P2P_LL_PROTO` when the bytes to one peer (:func:`.models.p2p_wire_us`: the whole size for sendrecv,
    size / nranks for the others) are at most the transfer's channels x NCCL_P2P_LL_THRESHOLD, the channels being
    ``min(nChannelsMin, bytes / minPartSize)`` (src/enqueue.cc addP2pToPlan); else :data:`P2P_PROTO`. At NCCL's
    defaults that is 16 KiB, or on one node whose GPUs are not all NVLink nChannelsMin x 16 KiB. Where the answer
    needs nChannelsMin across NVLink domains (a raised threshold), see :func:`_ll_boundary`."""
    return _ll_boundary(params, op, size_bytes, tuning)[0]


def _channels_min(params: LinkParams, tuning: P2pTuning = DEFAULT_P2P_TUNING) -> int | None:
    """NCCL's nChannelsMin for a transfer (src/enqueue.cc: the per-peer channels halved while they times the ranks
    exceed the p2p channels): inside one NVLink domain from its links (:func:`_nvlink_channels`, or 2 a PCIe peer),
    across domains from the NICs as well (:func:`_domain_channels`); None where the model lacks what NCCL reads
    (the GPU generation, or across domains the NICs' rate and count)."""
    if params.ndomains > 1:
        return _domain_channels(params, tuning)
    if params.intra_link not in ("nvlink", "unknown"):
        return _pci_min_channels(params)
    found = _nvlink_channels(params)
    return None if found is None else found[0]


def _net_peer_channels(params: LinkParams, tuning: P2pTuning) -> int | None:
    """The channels NCCL gives a peer in another NVLink domain (src/graph/paths.cc ncclTopoGetNchannels):
    ``max(netCount, divUp((int)netBw, NCCL_P2P_PER_CHANNEL_NET_BW))``, where netCount and netBw are the GPU's local
    NICs taken until their GPU-to-NIC paths reach the GPU's own link to the CPU (src/graph/topo.cc
    ncclTopoGetLocalNetCountByBw: its PCIe link; on Grace the C2C link, more than any NIC, so all of them). A GPU's
    local NICs: the node's NICs shared among its GPUs (1 when there are fewer NICs than GPUs). None without the
    NICs' rate and count or the GPU generation. 400 Gb/s on PCIe Gen5: 48 GB/s, 4 channels; 4 x 100 Gb/s per GPU
    (AWS p5): 50 GB/s, 4; 200 Gb/s: 2."""
    gen = gpu_generation(params.gpu) if params.gpu else None
    if gen is None or params.nic_gbps is None or params.nics_per_node <= 0:
        return None
    pci = NCCL_PCI_X16_GBPS.get(params.pcie_gen or gen.pcie_gen, 12.0)
    path = min(params.nic_gbps, pci)
    gpu_link = float("inf") if gen.name in GRACE_GPUS else pci
    count, total = 0, 0.0
    for _ in range(max(1, params.nics_per_node // max(1, params.ppn))):
        count += 1
        total += path
        if total >= gpu_link:
            break
    per_channel = max(1, tuning.per_channel_net_gbps)
    return max(count, -(-int(total) // per_channel))


def _domain_channels(params: LinkParams, tuning: P2pTuning) -> int | None:
    """nChannelsMin across NVLink domains: the fewest channels of any peer (:func:`_net_peer_channels` for the
    other domains', 2 x the NVLink links or 2 over PCIe for the domain's own), rounded up to a power of two and
    halved while they times divUp(ranks, 8) exceed the p2p channels (src/graph/paths.cc
    ncclTopoComputeP2pChannelsPerPeer, ncclTopoComputeP2pChannels), then as on one node (:func:`_start_channels`).
    2 x 8 H100 with 400 Gb/s NICs: 4 per peer, 2 to start. None where :func:`_net_peer_channels` is."""
    net = _net_peer_channels(params, tuning)
    found = _node_p2p_channels(params)
    if net is None or found is None:
        return None
    gen, p2p = found
    fewest = net
    if params.domain_ranks > 1:
        if params.intra_link == "nvlink":
            fewest = min(fewest, _nvlink_peer_channels(params, gen))
        else:
            fewest = min(fewest, _PCI_PEER_CHANNELS)
    per_peer = _pow2_up(fewest)
    batches = -(-params.nranks // _P2P_PEERS_PER_BATCH)
    while per_peer * batches > p2p and per_peer > 1:
        per_peer //= 2
    return _start_channels(per_peer, params.nranks, p2p)


def _ll_boundary(params: LinkParams, op: str, size_bytes: int, tuning: P2pTuning) -> tuple[str, bool]:
    """(the protocol, whether NCCL's rule settles it). A transfer above the threshold runs LL only if
    min(nChannelsMin, its parts) reaches bytes / threshold; where nChannelsMin is unknown (:func:`_channels_min`:
    across NVLink domains without the NICs) and the most channels its part size allows could, the protocol is
    taken as Simple and not settled. At NCCL's defaults it always is (the parts, 64 KiB or more, leave one channel
    up to 64 KiB)."""
    if size_bytes <= 0:
        return P2P_PROTO, True
    per_peer = int(p2p_wire_us(params, op, size_bytes)[1])
    threshold = tuning.ll_threshold_bytes
    if threshold <= 0:
        return P2P_PROTO, True
    if per_peer <= threshold:
        return P2P_LL_PROTO, True
    most = -(-per_peer // _part_bytes(params, tuning)[0])
    start = _channels_min(params, tuning)
    if start is None:
        return P2P_PROTO, per_peer > most * threshold
    return (P2P_LL_PROTO if per_peer <= min(start, most) * threshold else P2P_PROTO), True


def p2p_tuning_notes(params: LinkParams, op: str, sizes: Iterable[int], tuning: P2pTuning) -> list[str]:
    """What the job's point-to-point variables did to the model of ``op``: which it took, and the sizes whose
    protocol NCCL's rule leaves to the unknown nChannelsMin across NVLink domains (:func:`_ll_boundary`)."""
    if not tuning.set_text:
        return []
    out = [f"{', '.join(tuning.set_text)}: taken by the point-to-point model of {op} (the p2p chunk "
           f"{format_size(p2p_chunk_bytes(params, tuning))}, the parts and channels NCCL gives a transfer, and its "
           "LL boundary: src/init.cc computeBuffSizes, src/enqueue.cc addP2pToPlan)"]
    open_sizes = [s for s in sizes if not _ll_boundary(params, op, s, tuning)[1]]
    if open_sizes:
        shown = ", ".join(format_size(s) for s in open_sizes)
        why = ("across NVLink domains: NCCL sends a transfer with LL up to nChannelsMin x {t}, and nChannelsMin comes "
               "from the NICs' count and bandwidth (src/graph/paths.cc ncclTopoGetNchannels, "
               "NCCL_P2P_PER_CHANNEL_NET_BW), which are not known here (--nic-gbit and --nics-per-node give them)"
               if params.ndomains > 1 else
               "on one node: NCCL sends a transfer with LL up to nChannelsMin x {t}, and nChannelsMin needs the GPU "
               "generation's graphs, which the model does not have here")
        out.append(f"{op} at {shown} {why.format(t=format_size(tuning.ll_threshold_bytes))}: taken as Simple there")
    return out


def _pow2_up(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@lru_cache(maxsize=512)
def _node_p2p_channels(params: LinkParams) -> tuple[GpuGeneration, int] | None:
    """(the GPU generation, NCCL's p2p channels: ``pow2Up(min(nChannels, MAXCHANNELS))`` of the collective channels
    it runs, src/graph/paths.cc ncclTopoComputeP2pChannels); None without a generation or the node's graphs."""
    gen = gpu_generation(params.gpu) if params.gpu else None
    if gen is None:
        return None
    try:
        inputs = graph_inputs_from_topology(params, gen)
    except ConfigError:
        return None
    return gen, _pow2_up(min(runtime_channels(inputs, "Ring"), _MAXCHANNELS))


def _start_channels(per_peer: int, nranks: int, p2p: int) -> int:
    """nChannelsMin (src/enqueue.cc): the per-peer channels, halved while they times the ranks exceed the p2p
    channels."""
    start = per_peer
    while start * nranks > p2p and start > 1:
        start //= 2
    return start


def _nvlink_channels(params: LinkParams) -> tuple[int, int] | None:
    """(nChannelsMin, the per-peer channels) of one node of NVLink GPUs (:func:`p2p_channels`); None without the
    GPU generation or the node's graphs."""
    found = _node_p2p_channels(params)
    if found is None:
        return None
    gen, p2p = found
    per_peer = min(p2p, _pow2_up(_nvlink_peer_channels(params, gen)))
    return _start_channels(per_peer, params.nranks, p2p), per_peer


def _nvlink_peer_channels(params: LinkParams, gen: GpuGeneration) -> int:
    """The channels NCCL gives a peer joined by NVLink: 2 x the links between them (src/graph/paths.cc
    ncclTopoGetNchannels: ``2 * max(1, path->bw / nvlBw)``; through NVSwitches all the GPU's links)."""
    links = params.nvlinks_per_gpu or gen.nvlink_links
    if not params.nvswitch:
        links = max(1, links // max(1, params.domain_ranks - 1))
    return 2 * max(1, links)


def p2p_channels(params: LinkParams, op: str, size_bytes: int,
                 tuning: P2pTuning = DEFAULT_P2P_TUNING) -> int | None:
    """The channels NCCL gives the one transfer of a rank of ``op`` (an op whose ranks each send to one peer:
    sendrecv) inside one NVLink domain over NVLink; None for other ops, across domains (NCCL's rule there splits a
    transfer into parts of one chunk, so every channel is used from a few MiB) or without the GPU generation.

    NCCL (src/graph/paths.cc ncclTopoComputeP2pChannels, src/enqueue.cc addP2pToPlan and its caller): p2p channels
    ``pow2Up(min(nChannels, MAXCHANNELS))``, the collective channels NCCL runs; per NVLink peer ``2 x links`` to it,
    rounded up to a power of two, at most that; the minimum halved while it times the ranks exceeds the p2p channels;
    a transfer of ``b`` bytes starts at ``min(minimum, b / (chunk / 8))`` channels and doubles them while a part is
    larger than 32 chunks and the channels are at most half the per-peer ones (the chunk: NCCL_P2P_NVL_CHUNKSIZE,
    512 KiB, at most NCCL_BUFFSIZE / 8: :func:`p2p_chunk_bytes`). 8 H100 of one node: 32 p2p channels, 32 per peer,
    4 to start: 4 channels up to 64 MiB, 8 at 128 MiB, 16 at 256 MiB, 32 from 512 MiB."""
    if not op_facts(op).one_peer:
        return None
    return _transfer_channels(params, int(size_bytes), tuning)


def _transfer_channels(params: LinkParams, transfer_bytes: int, tuning: P2pTuning) -> int | None:
    """The channels NCCL gives one transfer of ``transfer_bytes`` inside one NVLink domain over NVLink (the rule of
    :func:`p2p_channels`); None across domains or without the GPU generation."""
    if params.ndomains > 1 or params.intra_link != "nvlink":
        return None
    found = _nvlink_channels(params)
    if found is None:
        return None
    start, per_peer = found
    min_part, max_part = _part_bytes(params, tuning)
    channels = min(start, -(-transfer_bytes // min_part))
    part = max(min_part, -(-transfer_bytes // channels))
    while part > max_part and channels <= per_peer // 2:
        channels *= 2
        part = -(-transfer_bytes // channels)
    return channels


def p2p_active_channels(params: LinkParams, op: str, size_bytes: int,
                        tuning: P2pTuning = DEFAULT_P2P_TUNING) -> int | None:
    """The channels the rank that sets ``op``'s time keeps busy inside one NVLink domain over NVLink: its transfers
    (one for sendrecv, one with each other rank for alltoall and for the root of gather and scatter) times the
    channels NCCL gives each (:func:`p2p_channels`' rule, on the bytes per peer), at most the p2p channels (NCCL
    puts each transfer on channels of its own, ``ncclP2pChannelBaseForRound``, src/include/channel.h, and runs the
    transfers that share a channel one after the other); None where :func:`p2p_channels` has no rule. 4 GB300 of a
    tray: 32 p2p channels, 8 per transfer, 3 transfers: 24 up to 512 MiB, all 32 from 1 GiB; 8 H100: 4 per
    transfer, 7 transfers, 28 up to 512 MiB; 64 GPUs of an NVL72 rack: 1 per transfer, all 32."""
    found = _node_p2p_channels(params)
    if found is None:
        return None
    per_peer = int(p2p_wire_us(params, op, size_bytes)[1])
    channels = _transfer_channels(params, per_peer, tuning)
    if channels is None:
        return None
    return min(found[1], p2p_transfers(params, op) * channels)


def p2p_transfers(params: LinkParams, op: str) -> int:
    """The transfers of the rank that sets ``op``'s time: one for an op whose ranks each send to one peer
    (sendrecv), one with each other rank otherwise (alltoall, the root of gather and scatter)."""
    return 1 if op_facts(op).one_peer else params.nranks - 1
