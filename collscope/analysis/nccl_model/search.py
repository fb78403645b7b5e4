"""An approximation of NCCL's topology search: the graphs (channels x per-channel bandwidth) its model reads.

NCCL (``src/graph/search.cc``, nccl-facts 1.3) tries per-channel speeds from a list, highest first, and keeps the
graph with the most ``nChannels x bw``; it stops when that reaches the GPU's total bandwidth. Here, instead of
searching paths, a channel count is derived from bandwidth budgets:

* **Totals in NCCL's units**: NVLink per GPU = links x NCCL's per-link constant (A100 12 x 20 = 240, H100
  18 x 20.6 = 370.8 GB/s; ``GpuGeneration.nccl_nvlink_link_gbps``), else the GPU's PCIe link in NCCL's model
  (Gen3/4/5/6 x16 = 12/24/48/96). The NIC path is min(NIC rate, GPU PCIe link).
* **Ring** (and Tree, which NCCL searches with the Ring's channel count; taken equal here but for its intra-node
  speed, below): for each speed s of the list (intra-node list on one node, inter-node list across nodes, per
  sm) with s <= the largest path bandwidth, ``nCh(s) = min(32, floor(total / s), NICs x floor(NIC path / s))``
  (the NIC term across nodes only), and across nodes also ``ppn x floor(GPU PCIe link / s)``: a channel reaches
  a NIC through its GPU's own PCIe link, so a node of fewer GPUs than NICs carries no more than its GPUs' links
  (one H100 per node of eight 400G NICs: 48 GB/s, not 8 x 48; the reporter of nccl-tests#232 saw about 50 GB/s
  with one H100 and four NICs, and NVIDIA's answer in nccl#412 is that a NIC helps only through a PCI switch of a
  GPU);
  keep the best nCh x s, highest speed first on ties; stop when it reaches the total or when the next speed is
  below 0.49 x the best's (NCCL's pass-1 rule). Then the duplication rule (``ncclTopoDupChannels``): if
  s >= 25 and not (sm > 80 and s < 50 and nCh > 4), double the channels (up to 32) and halve s. Then pass 2
  raises s while nCh x s still fits. For a tree, pass 2 raises only ``bwIntra``, up to twice ``bwInter``, while
  the same channels fit the GPU's links (:func:`_tree_intra`); NCCL's tuning reads it on one or two nodes, so a
  tree over two nodes whose NICs bound the ring gets up to twice the ring's speed inside the node (2 x 4 H100 on
  4 x 200G: ring 4 x 24, tree 4 x 48/24; a 2-node NCCL 2.22 log of this shape reads 156 GB/s busbw, which no
  ring over these NICs can carry).
  On a direct NVLink mesh (no NVSwitch) the largest path is one pair's links, total / (ppn - 1).
* **NVLS** (sm90+, NVSwitch, NVLink): nCh = ppn (at most 32); each channel's head GPU carries 2 s and the others
  s, so s is the largest speed with (ppn + 1) s <= total; NCCL's pass 2 then raises ``bwInter`` while it is
  below 2 x ``bwIntra`` (on one node nothing else bounds it; across nodes the NIC path does).
  Example: 8 x H100: 9 s <= 370.8 -> s = 40, bwInter 60; NVLS busBw = 8 x min(2 x 40 x 0.85 x 7/8, 60) = 476.
* Path types: NVL inside a node with NVLink, PXB with PCIe only; PIX to the NIC. CPU vendor Intel.

Worked results (see tests): 8 x H100 ring 6 x 60 -> duplicated 12 x 30 = 360 GB/s; 8 x A100 ring 6 x 40 ->
12 x 20 = 240 GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass

from collscope.analysis.model_types import LinkParams
from collscope.analysis.nccl_model.constants import NCCL_PCI_X16_GBPS, speed_list
from collscope.analysis.nccl_model.model import NcclGraph, NcclGraphInputs
from collscope.errors import ConfigError
from collscope.topo.gpus import GpuGeneration, gpu_generation

__all__ = ["graph_inputs_from_topology", "search_channels", "MAX_CHANNELS", "NVLS_MAX_HEADS", "GRACE_GPUS"]

MAX_CHANNELS = 32
"""Ring graph maxChannels = MAXCHANNELS / 2 (src/init.cc, MAXCHANNELS 64); NVLS arity at most 32."""

NVLS_MAX_HEADS = {"2.30": 32, "2.19": 8}
"""NVLS graph maxChannels = min(NCCL_MAX_NVLS_ARITY, GPUs) (src/graph/search.cc ncclTopoCompute);
NCCL_MAX_NVLS_ARITY is 32 in 2.30.7 and 8 in 2.19.4 (src/include/device.h)."""

GRACE_GPUS = frozenset({"GH200", "GB200", "GB300"})
"""GPUs of Grace superchips: the CPU NCCL sees is an Arm Grace (NVIDIA Grace Hopper / Grace Blackwell superchip
specs), so NCCL's x86-only rules do not apply: getNetOverhead's 1.0 us for non-x86 and no NVLSTree tree correction
(src/graph/tuning.cc getNetOverhead, ncclTopoGetAlgoTime: ``cpuArch == NCCL_TOPO_CPU_ARCH_X86``)."""


@dataclass(frozen=True, slots=True)
class _Found:
    n_channels: int
    bw: float


def search_channels(speeds: tuple[float, ...], *, max_bw: float, total_bw: float, sm: int, nics: int = 0,
                    nic_path_bw: float | None = None, duplicate: bool = True, gpus: int = 0,
                    gpu_pci_bw: float | None = None) -> tuple[int, float]:
    """(nChannels, per-channel GB/s) of a ring-like graph by the budget rule in the module doc; across nodes
    ``gpus`` x ``gpu_pci_bw``, the GPUs' own PCIe links, bound the channels that reach the NICs too."""

    def channels(s: float) -> int:
        n = min(MAX_CHANNELS, int(total_bw / s + 1e-9))
        if nic_path_bw is not None:
            n = min(n, nics * int(nic_path_bw / s + 1e-9))
        if gpu_pci_bw is not None and gpus > 0:
            n = min(n, gpus * int(gpu_pci_bw / s + 1e-9))
        return n

    i = 0
    while i < len(speeds) - 1 and speeds[i] > max_bw:
        i += 1
    best: _Found | None = None
    while True:
        s = speeds[i]
        n = channels(s)
        if n >= 1 and (best is None or n * s > best.n_channels * best.bw + 1e-9):
            best = _Found(n, s)
        if best is not None and best.n_channels * best.bw >= total_bw - 1e-9:
            break
        if i + 1 < len(speeds) and (best is None or speeds[i + 1] / best.bw > 0.49):
            i += 1
        else:
            break
    if best is None:
        return 0, 0.0
    n_ch, bw = best.n_channels, best.bw
    if duplicate and bw >= 25.0 and not (sm > 80 and bw < 50.0 and n_ch > 4):
        dup = min(2 * n_ch, MAX_CHANNELS)
        bw /= -(-dup // n_ch)
        n_ch = dup
    # pass 2: raise the speed while the same channel count still fits
    higher = [s for s in speeds if s > bw]
    for s in sorted(higher):
        if s <= max_bw and n_ch * s <= total_bw + 1e-9 and channels(s) >= n_ch:
            bw = s
        else:
            break
    return n_ch, bw


def _nvls_graph(speeds: tuple[float, ...], ppn: int, total: float, max_bw: float,
                inter_cap: float | None, *, max_heads: int = MAX_CHANNELS, nics: int = 0) -> NcclGraph | None:
    # heads: min(NCCL_MAX_NVLS_ARITY, GPUs) (search.cc ncclTopoCompute); across domains each head is a NIC:GPU
    # pair, "NVLS search only tries to find NIC:GPU combinations" while nChannels < netCount (search.cc
    # ncclTopoSearchRecNet), so a domain has at most as many heads as NICs
    # Not NCCL's: across nodes NCCL's pass 1 starts below system->maxBw, the GPU->NIC path (search.cc
    # ncclTopoSearchInit), and skips NICs slower than bwInter (ncclTopoSearchRecNet), so its NVLS graph of 2 x 8
    # B200 on 400G NICs is 8 x 48/48. The intra speed here comes from the NVLink budget alone (80): with NCCL's
    # cap the scorecard's 2-node B200 rows (GCP A4, Lambda: 677-684 GB/s at 8 GiB) are predicted at 492 and
    # all rows within 15% drop from 215 to 198 of 348. The graph's bandwidth ranks algorithms; it is not what
    # the NVLS kernels reach.
    n_ch = min(ppn, max_heads)
    if inter_cap is not None and nics > 0:
        n_ch = min(n_ch, nics)
    fits = [s for s in speeds if s <= max_bw and (n_ch + 1) * s <= total + 1e-9]
    if n_ch < 2 or not fits:
        return None
    intra = fits[0]
    inter = intra
    for s in sorted(s for s in speeds if s > intra):
        if inter < 2 * intra and (inter_cap is None or s <= inter_cap):
            inter = s
        else:
            break
    return NcclGraph(n_channels=n_ch, bw_intra=intra, bw_inter=inter, type_intra="NVL", pattern="nvls",
                     same_channels=False)


def _tree_intra(speeds: tuple[float, ...], n_ch: int, bw: float, intra_max: float, total: float) -> float:
    """The tree graph's ``bwIntra``: NCCL's search pass 2 raises it for trees ("increase bwIntra for trees (2 nodes
    or collnet)", src/graph/search.cc ncclTopoCompute) from the speed list while it is below twice ``bwInter`` and
    the same channels still fit the GPU's links; NCCL's tuning reads it for Tree on one or two nodes
    (src/graph/tuning.cc: ``bw = nNodes <= 2 || collnet ? bwIntra : bwInter``)."""
    intra = bw
    for s in sorted(s for s in speeds if s > bw):
        if intra < 2 * bw and s <= intra_max and n_ch * s <= total + 1e-9:
            intra = s
        else:
            break
    return intra


def graph_inputs_from_topology(params: LinkParams, generation: GpuGeneration | str | None = None, *,
                               collnet: bool = False, version: str = "2.30") -> NcclGraphInputs:
    """NCCL's graph inputs for the ranks of ``params`` (see the module doc for the approximation).

    ``generation`` overrides ``params.gpu``; ConfigError when neither names a GPU (CPU ranks have no NCCL model).
    An NVLink domain larger than a node (``params.nvl_domain``, MNNVL) is one NCCL node: NCCL numbers its nodes by
    the first rank of each node's ring (src/init.cc "Determine nNodes, firstRanks"; ``initNvlDomainInfo``:
    ``nNvlDomains = comm->nNodes``), and the domain's NICs are all its trays' NICs.
    """
    gen = gpu_generation(generation) if isinstance(generation, str) else generation
    if gen is None and params.gpu:
        gen = gpu_generation(params.gpu)
    if gen is None:
        raise ConfigError("NCCL's model needs the GPU generation: pass --gpu NAME (e.g. H100) or a topology "
                          "whose capture names the GPU model")
    # A multi-node NVLink domain (MNNVL, nvl_domain larger than a node) is one node to NCCL's graphs: its GPUs
    # reach each other over NVLink, only the domains are joined by the NICs.
    sm, ppn, nodes = gen.sm, params.domain_ranks, params.ndomains
    multi = nodes > 1
    notes: list[str] = []
    nvlink = params.intra_link == "nvlink" and gen.nccl_nvlink_link_gbps > 0
    if nvlink:
        links = params.nvlinks_per_gpu or gen.nvlink_links
        total = links * gen.nccl_nvlink_link_gbps
        max_bw = total if params.nvswitch or ppn <= 2 else total / max(1, ppn - 1)
        type_intra = "NVL"
        src = f"NVLink {links} x {gen.nccl_nvlink_link_gbps:g} GB/s (NCCL's SM{sm} constant) = {total:g} GB/s"
    else:
        pcie_gen = params.pcie_gen or gen.pcie_gen
        total = NCCL_PCI_X16_GBPS.get(pcie_gen, 12.0)
        max_bw = total
        type_intra = "PXB"
        src = f"PCIe Gen{pcie_gen} x16 = {total:g} GB/s (NCCL's PCI model)"
    intra_max = max_bw
    nic_path = gpu_pci = None
    if multi:
        if params.nic_gbps is None or params.nics_per_node == 0:
            nic_path = params.bw_gbps
            nics = 1
            notes.append("no NIC in the topology: one NIC at the ring bandwidth assumed")
        else:
            gpu_pci = NCCL_PCI_X16_GBPS.get(params.pcie_gen or gen.pcie_gen, 12.0)
            nic_path = min(params.nic_gbps, gpu_pci)
            if params.nics_per_node > params.ppn:
                src += (f"; {params.ppn} GPU(s) per node for {params.nics_per_node} NICs: each GPU's own PCIe "
                        f"link ({gpu_pci:g} GB/s) carries its channels to any NIC")
            # every tray of a multi-node NVLink domain brings its NICs to the fused topology
            # (src/graph/search.cc ncclTopoSelectNets: MNNVL sorts the domain's NICs by GPU)
            nics = params.nics_per_node * max(1, ppn // params.ppn)
        src += f"; NIC path {nic_path:g} GB/s x {nics} NIC(s)" + (f" at {params.nic_path}" if params.nic_path else "")
        max_bw = min(max_bw, nic_path)
    else:
        nics = 0
    speeds = speed_list(sm, multi_node=multi)
    n_ch, bw = search_channels(speeds, max_bw=max_bw, total_bw=total, sm=sm, nics=nics, nic_path_bw=nic_path,
                               gpus=ppn, gpu_pci_bw=gpu_pci)
    if n_ch == 0:
        raise ConfigError(f"no NCCL channel fits these links ({src})")
    type_inter = params.nic_path or "PIX"
    ring = NcclGraph(n_channels=n_ch, bw_intra=bw, bw_inter=bw, type_intra=type_intra, type_inter=type_inter)
    tree = NcclGraph(n_channels=n_ch, bw_intra=_tree_intra(speeds, n_ch, bw, intra_max, total), bw_inter=bw,
                     type_intra=type_intra, type_inter=type_inter, pattern="balanced_tree")
    nvls = None
    if nvlink and params.nvswitch and sm >= 90 and ppn >= 2:
        nvls = _nvls_graph(speeds, ppn, total, total, nic_path, max_heads=NVLS_MAX_HEADS.get(version, MAX_CHANNELS),
                           nics=nics)
    chain = direct = None
    if collnet:
        chain = NcclGraph(n_channels=n_ch, bw_intra=tree.bw_intra, bw_inter=bw, type_intra=type_intra,
                          pattern="tree")
        direct = NcclGraph(n_channels=min(ppn, MAX_CHANNELS), bw_intra=bw, bw_inter=bw, type_intra=type_intra,
                           pattern="collnet_direct")
        notes.append("CollNet graphs approximated by the ring's channels and speed")
    src += f"; ring/tree {n_ch} x {bw:g} GB/s"
    if nvls is not None:
        src += f"; NVLS {nvls.n_channels} x {nvls.bw_intra:g}/{nvls.bw_inter:g} GB/s"
    grace = gen.name in GRACE_GPUS
    if grace:
        src += "; CPU Arm (Grace)"
    return NcclGraphInputs(nranks=params.nranks, nnodes=nodes, sm=sm, ring=ring, tree=tree, nvls=nvls,
                           collnet_direct=direct, collnet_chain=chain, collnet_enabled=collnet,
                           nvswitch=params.nvswitch, net_bw_gbps=nic_path or 0.0,
                           cpu_vendor="other" if grace else "intel", source=src,
                           notes=tuple(notes))
