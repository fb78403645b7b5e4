"""Link parameters for the models, from a topology, a GPU name, or explicit alpha and bandwidth.

Precedence, per number: an explicit value (``alpha_us``, ``bw_gbps``) wins; else the topology graph (NVLink per
GPU from its edges, else the PCIe bottleneck between GPUs; NICs x NIC rate per node across nodes); else the GPU
generation's table rates (:mod:`collscope.topo.gpus`). Every number says where it came from in
``LinkParams.source``.

Default latencies are NCCL's per-hop hardware latencies of the Ring algorithm with the Simple protocol, the
protocol that reaches the bandwidth term (``hwLatencies``, nccl-facts 1.2): NVLink 3.4 us, PCIe 5.7 us, network
14.0 us.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.partition_domain import partition_domain
from collscope.errors import ConfigError
from collscope.topo.cluster import Cluster, hosts_text
from collscope.topo.crossing import inter_socket_link, ll128_crossing_note, node_crossing
from collscope.topo.gdr import gdr_level
from collscope.topo.gpus import GpuGeneration, gpu_generation
from collscope.topo.model import NodeTopology
from collscope.topo.naming import natural_key
from collscope.topo.rates import pcie_gbps
from collscope.topo.systems import SYSTEMS
from collscope.topo.unmodelled_gpus import unknown_gpu_message
from collscope.vocab.knob_values import ib_hca_exact_names, ib_hca_listed_names, ib_hca_permits

__all__ = ["link_params", "unstated_domain_note", "DEFAULT_ALPHA_US", "NO_PARAMS_HINT"]

DEFAULT_ALPHA_US = {"nvlink": 3.4, "pcie": 5.7, "net": 14.0}
"""NCCL hwLatencies[NVLINK|PCI|NET][Ring][Simple] (nccl-facts 1.2)."""
_ALPHA_SOURCE = "NCCL hwLatencies[{hw}][Ring][Simple] (nccl-facts 1.2)"

NO_PARAMS_HINT = ("pass --topo PATH (captures or `topo show --json` output), --gpu NAME (e.g. H100), "
                  "or --alpha-us A --bw-gbps B")


def _generation(topology: NodeTopology | None, gpu: str | None) -> GpuGeneration | None:
    if gpu:
        gen = gpu_generation(gpu)
        if gen is None:
            raise ConfigError(unknown_gpu_message(gpu))
        return gen
    if topology is None:
        return None
    for name in topology.gpus:
        attrs = topology.graph.nodes[name]
        for key in ("generation", "model"):
            if attrs.get(key):
                found = gpu_generation(str(attrs[key]))
                if found is not None:
                    return found
        if attrs.get("sm"):
            found = gpu_generation(sm=int(attrs["sm"]))
            if found is not None:
                return found
    return None


def _nvlink_total(node: NodeTopology, gpu: str, peers: Sequence[str]) -> tuple[float | None, int, str]:
    """Per-direction NVLink bandwidth of ``gpu`` towards the NVSwitch and the peers, links, and the edge source."""
    g = node.graph
    total, links, source = 0.0, 0, ""
    for other in g.neighbors(gpu):
        d = g.edges[gpu, other]
        if d.get("kind") != "nvlink":
            continue
        if g.nodes[other].get("kind") != "nvswitch" and other not in peers:
            continue
        if d.get("bw_gbps") is None:
            return None, 0, ""
        total += float(d["bw_gbps"])
        links += int(d.get("nlinks") or 1)
        source = source or str(d.get("bw_source", ""))
    return (total or None), links, source


def _intra_from_topology(node: NodeTopology, ppn: int, gen: GpuGeneration | None
                         ) -> tuple[float | None, str, int, str]:
    """(GB/s per GPU, link kind, NVLinks per GPU, source) for the first ``ppn`` GPUs of the node."""
    gpus = node.gpus
    if ppn > len(gpus):
        raise ConfigError(f"{node.host} has {len(gpus)} GPU(s) but {ppn} ranks per node were asked; "
                          "pass --nnodes so that nranks / nnodes fits the node")
    used = gpus[:ppn]
    not_described = node.graph.graph.get("nvlink_not_described")  # topo.nccl_xml.undescribed
    if not_described and gen is None and ppn > 1 and not any(len(d) > 1 for d in node.nvlink_domains()):
        raise ConfigError(str(not_described))
    in_one_domain = any(set(used) <= set(d) for d in node.nvlink_domains())
    if in_one_domain:
        totals = [_nvlink_total(node, gpu, [p for p in used if p != gpu]) for gpu in used]
        if all(t[0] is not None for t in totals):
            bw, links, source = min(totals, key=lambda t: t[0] or 0.0)
            return bw, "nvlink", links, f"NVLink per GPU from the topology ({source})"
    pairs = [node.gpu_bandwidth_gbps(a, b) for a in used for b in used if a != b]
    known = [bw for bw in pairs if bw is not None]
    if known and len(known) == len(pairs):
        return min(known), "pcie", 0, "PCIe bottleneck between the node's GPUs from the topology"
    if gen is not None and pcie_gbps(gen.pcie_gen) is not None:
        return pcie_gbps(gen.pcie_gen), "pcie", 0, f"PCIe Gen{gen.pcie_gen} x16 of {gen.name} (table rate)"
    return None, "unknown", 0, ""


def _intra_from_generation(gen: GpuGeneration, ppn: int) -> tuple[float | None, str, int, str]:
    bridge = gen.nvlink_fabric == "bridge"  # topo.gpus: NVLink bridges join pairs of PCIe cards only
    if gen.nvlink_links and (not bridge or ppn <= 2):
        bw = gen.nvlink_links * gen.nvlink_link_gbps
        where = "the pair's NVLink bridge" if bridge else "all GPUs of a node assumed on one NVSwitch"
        return bw, "nvlink", gen.nvlink_links, (f"{gen.name}: {gen.nvlink_links} NVLinks x {gen.nvlink_link_gbps:g} "
                                                f"GB/s (table rate, {where})")
    why = f"; its NVLink bridges join pairs only, {ppn} GPUs meet over PCIe" if gen.nvlink_links and bridge else ""
    return pcie_gbps(gen.pcie_gen), "pcie", 0, f"{gen.name}: PCIe Gen{gen.pcie_gen} x16 (table rate{why})"


def _crossing_without_capture(net: NetSettings) -> tuple[str | None, str]:
    """(the graphs' path type, what to say) for ``net``'s crossing variables when no capture gives the GPU-NIC
    paths: a level of LOC turns GPUDirect RDMA off for every GPU, so every network path goes through the GPU's
    CPU (PHB at the closest; paths.cc ncclTopoCheckGdr, then addInterStep) and no GPU can relay for another (PXN
    needs GPUDirect RDMA at the relay); any other setting depends on paths the input does not give."""
    if net.gdr_level is not None and gdr_level(net.gdr_level) == "LOC":
        return "PHB", (f"{net.crossing_text()}: GPUDirect RDMA off for every GPU, so NCCL's graphs cross nodes at PHB "
                       "or beyond, through each GPU's CPU (src/graph/paths.cc ncclTopoCheckGdr, addInterStep); the "
                       "model takes PHB")
    return None, (f"{net.crossing_text()} set: what it changes depends on the GPU-NIC paths, which the input does not "
                  "give (pass --topo with an nvidia-smi topo -m capture); the model takes NCCL's default crossing")


def _ib_hca_nics(node: NodeTopology | None, spec: str, nics: int, nic_src: str, *, given: bool) -> tuple[int, str]:
    """(NICs, source) of the ``nics`` compute NICs that NCCL_IB_HCA ``spec`` leaves NCCL
    (:func:`collscope.vocab.knob_values.ib_hca_permits`): by the node's NIC names when a capture gives them (and
    the NICs were not given by ``--nic-gbit``), else by the names an exact list (``=mlx5_0,mlx5_1``) holds or a
    prefix list spells out whole (``mlx5_0,mlx5_1``, :func:`~collscope.vocab.knob_values.ib_hca_listed_names`).
    The list only narrows: how many NICs a GPU's graphs reach is the topology's (one GPU of NVIDIA/nccl#1357's
    node crosses at its one PIX NIC whatever else the list names), so never more than ``nics``. ConfigError for a
    family prefix (``mlx5``) or an exclusion without names, or a list that leaves none."""
    names = _nic_rates(node)[3] if node is not None and not given else []
    if node is not None and names:
        kept = [n for n in names if _permitted(spec, node, n)]
        if not kept:
            raise ConfigError(f"NCCL_IB_HCA={spec} leaves none of the node's compute NICs ({', '.join(names)})")
        return len(kept), f"{nic_src}; NCCL_IB_HCA={spec} leaves {len(kept)} of them ({', '.join(kept)})"
    exact = ib_hca_exact_names(spec)
    if exact is not None:
        kept_n = min(nics, len(exact))
        return kept_n, f"{nic_src}; NCCL_IB_HCA={spec} names {len(exact)}: {kept_n} NIC(s) per node"
    listed = ib_hca_listed_names(spec)
    if listed is None:
        raise ConfigError(f"NCCL_IB_HCA={spec} picks NICs by a family prefix or an exclusion: how many it leaves "
                          "needs the node's NIC names (--topo with ibstat/ibv_devinfo captures, collscope topo "
                          "collect)")
    kept_n = min(nics, len(listed))
    return kept_n, (f"{nic_src}; NCCL_IB_HCA={spec} spells out {len(listed)} device name(s): {kept_n} NIC(s) per "
                    "node, assuming none prefixes a longer name (NCCL matches each as a name prefix: mlx5_1 would "
                    "also take an mlx5_10; --topo with the node's NIC names settles it)")


def _permitted(spec: str, node: NodeTopology, nic: str) -> bool:
    ports = [str(p.get("port")) for p in node.graph.nodes[nic].get("ports") or [] if p.get("port") is not None]
    return ib_hca_permits(spec, nic) or any(ib_hca_permits(spec, f"{nic}:{port}") for port in ports)


def _nic_rates(node: NodeTopology) -> tuple[dict[str, float], dict[str, float], float | None, list[str]]:
    """(rate per NIC in Gb/s as NCCL takes it, the port rates a PCIe link caps, the fastest, the NICs at it): the
    active NICs of the fastest rate are the ones NCCL would use."""
    g = node.graph
    rates: dict[str, float] = {}
    for nic in node.nics:
        ports = g.nodes[nic].get("ports") or []
        active = [p.get("rate_gbps") for p in ports if p.get("state") == "Active" and p.get("rate_gbps")]
        if active:
            rates[nic] = float(max(active))
        elif not ports and g.nodes[nic].get("speed_gbps"):
            rates[nic] = float(g.nodes[nic]["speed_gbps"])
    if not rates:
        return rates, {}, None, []
    capped = {}
    for nic, rate in rates.items():
        pcie = _nic_pcie_gbps(g, nic)
        if pcie is not None and rate / 8.0 > pcie * _PCIE_SIGNAL_OVER_NCCL:
            capped[nic], rates[nic] = rate, pcie * 8.0
    fastest = max(rates.values())
    return rates, capped, fastest, sorted((n for n, r in rates.items() if r == fastest), key=natural_key)


def _nics(node: NodeTopology) -> tuple[int, float | None, str]:
    """(NICs, GB/s per NIC, source): the active NICs of the fastest rate (the ones NCCL would use)."""
    _, capped, fastest, names = _nic_rates(node)
    if fastest is None:
        return 0, None, ""
    if any(n in capped for n in names):
        ports = "/".join(f"{p:g}" for p in sorted({capped[n] for n in names if n in capped}))
        return len(names), fastest / 8.0, (
            f"{len(names)} active NIC(s) at {fastest / 8:g} GB/s each ({', '.join(names)}; slower NICs ignored): "
            f"{ports} Gb/s ports on PCIe links that carry less, taken at the link's rate in NCCL's model (NCCL XML "
            "link_speed x link_width, width * speed / 80), as NCCL's path search takes them")
    return len(names), fastest / 8.0, (f"{len(names)} active NIC(s) at {fastest:g} Gb/s = {fastest / 8:g} GB/s each "
                                       f"({', '.join(names)}; slower NICs ignored)")


# NCCL's PCIe figure (width * speed / 80: Gen5 x16 48 GB/s, src/graph/topo.cc) is 3/4 of the link's signalling rate
# (32 GT/s x 16 lanes / 8 = 64 GB/s). A NIC port faster than its link's signalling rate cannot run at the port rate:
# a 200G port on a Gen5 x4 link (GB10), 400G on Gen4 x16, 200G on Gen3 x16. There NCCL's path bandwidth is the PCIe
# link's, and so is collscope's; a 400G port on Gen5 x16 keeps its 50 GB/s.
_PCIE_SIGNAL_OVER_NCCL = 4.0 / 3.0


def _nic_pcie_gbps(graph: Any, nic: str) -> float | None:
    """NCCL's bandwidth of the PCIe link a NIC hangs on (an NCCL XML capture's ``link_speed``/``link_width``),
    ``None`` when no capture gives it."""
    rates = [d["pcie_bw_gbps"] for _, _, d in graph.edges(nic, data=True) if d.get("pcie_bw_gbps")]
    return min(rates) if rates else None


def _captures_lack(topology: NodeTopology | Cluster | None, what: str, tool: str) -> str:
    """``the captures in topo/ (4 nodes) have no GPUs (nvidia-smi not found or failing on all 4 nodes)``: what a
    ``--topo`` lacks and, where its capture notes say, why."""
    if isinstance(topology, Cluster):
        hosts = topology.hosts_noting(tool)
        where = f"in {topology.root}" if topology.root is not None else "of the cluster"
        why = (f"{tool} not found or failing on {hosts_text(hosts, list(topology.nodes))}" if hosts
               else f"no {tool} capture noted missing: check the node directories")
        return f"the captures {where} ({len(topology.nodes)} nodes) have no {what} ({why})"
    if topology is None:
        return f"no topology gives the {what}"
    sources = ", ".join(topology.sources[:4]) + (", ..." if len(topology.sources) > 4 else "")
    return (f"the topology of {topology.host}{f' ({sources})' if sources else ''} has no {what} (no {tool} capture "
            "among its sources)")


def unstated_domain_note(nranks: int, nnodes: int, partition_source: str) -> str:
    """The caveat of parameters whose NVLink domain the captures' partition gave (no option, no input said it)."""
    return (f"nvl_domain for {nranks} ranks on {nnodes} node(s), which neither the input nor --nvl-domain gives: "
            f"{partition_source}")


def link_params(topology: NodeTopology | Cluster | None, *, gpu: str | None = None, nranks: int, nnodes: int,
                nvl_domain: int | None = None, alpha_us: float | None = None, bw_gbps: float | None = None,
                gamma_gbps: float | None = None, alpha_inter_us: float | None = None, nic_gbit: float | None = None,
                nics_per_node: int | None = None, net: NetSettings | None = None) -> LinkParams:
    """The :class:`LinkParams` of ``nranks`` ranks on ``nnodes`` nodes like ``topology`` (one node of a Cluster).

    ``nnodes`` has no default: the caller states the job's nodes (its :class:`~collscope.geometry.Geometry`).
    ``nvl_domain``: GPUs one NVLink fabric joins when it is larger than a node (72 on an NVL72 rack): the ranks of
    one domain reach each other over NVLink, only the domains need the NICs (one domain: no NIC at all).
    ``nic_gbit`` / ``nics_per_node``: the compute NICs of each node when no capture gives them (``--nic-gbit``:
    the line rate of one NIC in Gb/s as ibstat prints it; ``--nics-per-node``, default one per GPU of the node,
    the HGX and NVL72-tray reference design); they override the topology's NICs.
    ``net``: the NCCL variables a configuration set that change how the graphs cross nodes: only the NICs
    ``NCCL_IB_HCA`` lets NCCL use count (:func:`_ib_hca_nics`); ``NCCL_NET_GDR_LEVEL`` and ``NCCL_PXN_DISABLE``
    move the capture's crossing (:func:`collscope.topo.crossing.node_crossing`), which without a capture only a
    level that turns GPUDirect RDMA off everywhere (LOC) decides (:func:`_crossing_without_capture`).
    Raises ConfigError when the bandwidth cannot be known, saying what to pass.
    """
    if nic_gbit is not None and not nic_gbit > 0:
        raise ConfigError(f"the NIC rate must be > 0 Gb/s, got {nic_gbit}")
    if nics_per_node is not None and nics_per_node < 1:
        raise ConfigError(f"nics per node must be >= 1, got {nics_per_node}")
    if nics_per_node is not None and nic_gbit is None:
        raise ConfigError("--nics-per-node needs --nic-gbit (the line rate of each NIC, Gb/s)")
    if nnodes < 1 or nranks < 1 or nranks % nnodes:
        raise ConfigError(f"nranks ({nranks}) must be a positive multiple of nnodes ({nnodes})")
    if nvl_domain is not None and nvl_domain < 1:
        raise ConfigError(f"nvl_domain must be >= 1 GPUs, got {nvl_domain}")
    partition_source = partition_caveat = ""
    if nvl_domain is None:
        nvl_domain, partition_source, partition_caveat = partition_domain(topology, nranks=nranks, nnodes=nnodes)
    ppn = nranks // nnodes
    domain = min(nranks, nvl_domain) if nvl_domain is not None and nvl_domain > ppn else ppn
    model_domain, split = nvl_domain, ""
    parts = -(-nranks // domain)
    if (nranks % domain or domain % ppn) and nranks % parts == 0 and (nranks // parts) % ppn == 0 and parts > 1:
        # a job that fills its domains unevenly (128 ranks on two 72-GPU racks): NCCL's tuning sees nNodes domains
        # of nRanks / nNodes ranks each (src/graph/tuning.cc ncclTopoTuneModel: ``ppn = (float)nRanks / nNodes``)
        domain = model_domain = nranks // parts
        split = (f"{nranks} ranks over NVLink domains of {nvl_domain} GPUs: {parts} domains of {domain} ranks "
                 f"({domain // ppn} nodes each) assumed, the split NCCL's model uses (nRanks / nNodes)")
    if nranks % domain or domain % ppn:
        raise ConfigError(f"an NVLink domain of {nvl_domain} GPUs does not split {nranks} ranks of {ppn} per node into "
                          "domains of whole nodes (the model places ranks in blocks): check the NVLink domain size"
                          + (f" (from the captures: {partition_source})"
                             if partition_source else ""))
    ndomains = nranks // domain
    node = None
    if isinstance(topology, Cluster):
        if not topology.nodes:
            raise ConfigError("the cluster has no nodes")
        node = topology.nodes[sorted(topology.nodes, key=natural_key)[0]]
    elif topology is not None:
        node = topology
    if node is not None and not node.gpus:
        node_for_gpus = None
    else:
        node_for_gpus = node
    gen = _generation(node_for_gpus, gpu)
    sources: list[str] = [partition_source] if partition_source else []

    intra, kind, nvlinks, intra_src = None, "unknown", 0, ""
    if node_for_gpus is not None:
        intra, kind, nvlinks, intra_src = _intra_from_topology(node_for_gpus, ppn, gen)
    elif gen is not None:
        intra, kind, nvlinks, intra_src = _intra_from_generation(gen, ppn)
    if bw_gbps is not None:
        intra, intra_src = float(bw_gbps), "given (--bw-gbps)"
    if intra is None:
        if node is not None and not node.gpus:
            raise ConfigError(f"{_captures_lack(topology, 'GPUs', 'nvidia-smi')}: pass --gpu NAME (e.g. H100) for "
                              "the GPU table's rates, or --alpha-us A --bw-gbps B (the links of a CPU cluster)")
        if node_for_gpus is not None:
            raise ConfigError(f"the topology of {node_for_gpus.host} does not give its GPU link bandwidths (no GPU "
                              "model in the capture): pass --gpu NAME (e.g. A100) or --bw-gbps B")
        raise ConfigError(f"no link parameters: {NO_PARAMS_HINT}")
    sources.append(f"intra-node bandwidth {intra:g} GB/s: {intra_src}")

    nics, nic_gbps, nic_src = _nics(node) if node is not None else (0, None, "")
    system = next((s for s in SYSTEMS if gen is not None and s.gpu == gen.name and (s.nic_note or s.nic_cap_gbit)),
                  None)
    if system is not None and system.nic_cap_gbit and nic_gbps is not None and nic_gbps * 8 > system.nic_cap_gbit:
        nic_gbps = system.nic_cap_gbit / 8.0
        nic_src += (f"; each taken at {system.nic_cap_gbit:g} Gb/s = {nic_gbps:g} GB/s, the most one carries on "
                    f"{system.name} (table: the note below)")
    net = net or NetSettings()
    ignored = ""
    if net.gdr_level is not None:
        try:
            gdr_level(net.gdr_level)
        except ConfigError:  # src/graph/paths.cc ncclGetLevel: a value it does not read leaves the level unset
            ignored = (f"NCCL_NET_GDR_LEVEL={net.gdr_level} is not a level NCCL reads (exact upper-case path names "
                       f"or 0-5), so NCCL ignores it and runs at its default; the model does too")
            net = dataclasses.replace(net, gdr_level=None)
    crossing = (node_crossing(node_for_gpus, gpus_per_node=ppn, level=net.gdr_level, pxn=not net.pxn_disable)
                if node_for_gpus is not None and ndomains > 1 else None)
    if nic_gbit is not None:
        nic_gbps = nic_gbit / 8.0
        if nics_per_node is None and crossing is not None and crossing.nics:
            nics = len(crossing.nics)
            nic_src = (f"{nics} NIC(s) per node, the ones the GPUs reach first in the capture "
                       f"({', '.join(crossing.nics)}), at {nic_gbit:g} Gb/s = {nic_gbps:g} GB/s each (given: "
                       "--nic-gbit; --nics-per-node N to change)")
        else:
            nics = nics_per_node or ppn
            nic_src = (f"{nics} NIC(s) per node at {nic_gbit:g} Gb/s = {nic_gbps:g} GB/s each (given: --nic-gbit"
                       + (", --nics-per-node)" if nics_per_node else "; one NIC per GPU of the node assumed, "
                          "--nics-per-node N to change)"))
    rack = next((s for s in SYSTEMS if gen is not None and s.gpu == gen.name and s.mnnvl and s.nic_gbit), None)
    if nic_gbps is None and ndomains > 1 and domain > ppn and rack is not None and rack.nic_gbit is not None:
        nics, nic_gbps = ppn, rack.nic_gbit / 8.0  # one compute NIC per GPU
        nic_src = (f"{nics} NIC(s) per node at {rack.nic_gbit:g} Gb/s = {nic_gbps:g} GB/s each "
                   f"(table: {rack.nic_source})")
    if net.ib_hca and ndomains > 1 and nic_gbps is not None:
        nics, nic_src = _ib_hca_nics(node, net.ib_hca, nics, nic_src, given=nic_gbit is not None)
    nic_note = system.nic_note if system is not None else ""
    inter = nics * nic_gbps if nic_gbps is not None and bw_gbps is None else None
    if domain > ppn:
        sources.append(split or f"NVLink domain of {nvl_domain} GPUs: {domain} of the ranks on one NVLink fabric, "
                       f"{ndomains} domain(s) of {domain // ppn} node(s) each")
    if ndomains > 1:
        if bw_gbps is not None:
            ring = float(bw_gbps)
            sources.append("ring bandwidth: given (--bw-gbps), the same on every link")
        elif inter is None and node is not None:
            lacking = _captures_lack(topology, "NIC rates", "ibstat")
            raise ConfigError(f"{nnodes} nodes need the NIC rates, but {lacking}: pass --nic-gbit R (each compute "
                              "NIC's line rate; --nics-per-node N if not one per GPU), or --bw-gbps B"
                              + (f". {nic_note}" if nic_note else ""))
        elif inter is None:
            raise ConfigError(f"{nnodes} nodes need the NIC rates: pass --nic-gbit R (each compute NIC's line "
                              "rate; --nics-per-node N if not one per GPU), --topo with ibstat/ibv_devinfo "
                              "captures (collscope topo collect), or --bw-gbps B"
                              + (f". {nic_note}" if nic_note else ""))
        else:
            ring = min(intra, inter * (domain // ppn))
            sources.append(f"inter-node {inter:g} GB/s per node: {nic_src}; ring bound min(intra, NICs x NIC) = "
                           f"{ring:g} GB/s")
    else:
        ring = intra

    if alpha_us is None:
        if kind == "unknown":
            raise ConfigError(f"no latency for these links: pass --alpha-us A (and --bw-gbps B), or {NO_PARAMS_HINT}")
        hw = "NVLINK" if kind == "nvlink" else "PCI"
        alpha = DEFAULT_ALPHA_US["nvlink" if kind == "nvlink" else "pcie"]
        sources.append(f"alpha {alpha:g} us: " + _ALPHA_SOURCE.format(hw=hw))
    else:
        alpha = float(alpha_us)
        sources.append(f"alpha {alpha:g} us: given (--alpha-us)")
    alpha_net = alpha_inter_us
    if alpha_net is None and ndomains > 1 and not (alpha_us is not None and bw_gbps is not None):
        alpha_net = DEFAULT_ALPHA_US["net"]
        sources.append(f"alpha between nodes {alpha_net:g} us: " + _ALPHA_SOURCE.format(hw="NET"))
    if gamma_gbps is not None:
        sources.append(f"gamma {gamma_gbps:g} GB/s: given")

    caveats: list[str] = [partition_caveat] if partition_caveat else []
    if ignored and ndomains > 1:
        caveats.append(ignored)
    if partition_source:  # a value no option gave: said with the models' notes (analyze, trace), not only in source
        caveats.append(unstated_domain_note(nranks, nnodes, partition_source))
    if nic_note and ndomains > 1:
        caveats.append(nic_note)
    nic_path = crossing.path if crossing is not None else None
    if crossing is not None and bw_gbps is None:
        moved = f", with {net.crossing_text()}" if net.moves_crossing else ""
        sources.append(f"{crossing.text()}: the capture's GPU-NIC paths{moved}")
        if moved:
            default = node_crossing(node_for_gpus, gpus_per_node=ppn)
            was = (f"at {default.path} without it" if default is not None and default.path != crossing.path
                   else "as without it")
            caveats.append(f"{net.crossing_text()}: NCCL's graphs cross nodes at {crossing.path}, {was} (the "
                           "capture's GPU-NIC paths under the setting, src/graph/paths.cc; each GPU's in the sources)")
        caveats.extend(crossing.notes(gen.name if gen is not None else None, gen.sm if gen is not None else None,
                                      inter_socket_link(node_for_gpus)))
    elif net.moves_crossing and ndomains > 1 and bw_gbps is None:
        nic_path, said = _crossing_without_capture(net)
        caveats.append(said)
        ll128 = ll128_crossing_note(nic_path, gen.name, gen.sm, net.crossing_text()) \
            if nic_path is not None and gen is not None else None
        if ll128:
            caveats.append(ll128)
    racks = [s for s in SYSTEMS if gen is not None and s.gpu == gen.name and s.mnnvl]
    fabric_captured = node is not None and bool(node.gpu_fabric)
    if gen is not None and racks and nvl_domain is None and ndomains > 1 and not fabric_captured:
        shapes = ", ".join(f"{s.name}: up to {s.nvl_domain} GPUs" for s in racks)
        unsaid = " (the captures hold no `nvidia-smi -q`, whose Fabric blocks say it)" if node is not None else ""
        caveats.append(f"{gen.name} nodes can be trays of one multi-node NVLink domain ({shapes}), and the input "
                       f"does not say whether these are{unsaid}: each of the {nnodes} nodes is modelled as its own "
                       "NVLink domain, joined by the NICs; pass --nvl-domain N (the GPUs one NVLink fabric joins) if "
                       "they share one")

    pcie_gen = gen.pcie_gen if gen is not None else None
    if node_for_gpus is not None and node_for_gpus.gpus:
        pcie_gen = node_for_gpus.graph.nodes[node_for_gpus.gpus[0]].get("pcie_gen_max") or pcie_gen
    return LinkParams(
        nranks=nranks, nnodes=nnodes, nvl_domain=model_domain, alpha_us=alpha, alpha_inter_us=alpha_net, bw_gbps=ring,
        gamma_gbps=gamma_gbps, intra_bw_gbps=intra, inter_bw_gbps=inter, nics_per_node=nics, nic_gbps=nic_gbps,
        gpu=gen.name if gen is not None else None, sm=gen.sm if gen is not None else None, intra_link=kind,
        nvlinks_per_gpu=nvlinks if kind == "nvlink" else 0,
        nvswitch=(node_for_gpus.has_nvswitch if node_for_gpus is not None
                  else gen is not None and gen.nvlink_links > 0 and gen.nvlink_fabric == "nvswitch"),
        pcie_gen=int(pcie_gen) if pcie_gen else None, nic_path=nic_path,
        source=" | ".join(sources), caveats=tuple(caveats),
    )
