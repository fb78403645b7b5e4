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

from collscope.analysis.model_types import LinkParams, NetSettings
from collscope.analysis.node_nics import crossing_without_capture, nics_left_by_ib_hca, node_nics
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
    ``NCCL_IB_HCA`` lets NCCL use count (:func:`.node_nics.nics_left_by_ib_hca`); ``NCCL_NET_GDR_LEVEL`` and
    ``NCCL_PXN_DISABLE`` move the capture's crossing (:func:`collscope.topo.crossing.node_crossing`), which without
    a capture only a level that turns GPUDirect RDMA off everywhere (LOC) decides
    (:func:`.node_nics.crossing_without_capture`).
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

    nics, nic_gbps, nic_src = node_nics(node) if node is not None else (0, None, "")
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
        nics, nic_src = nics_left_by_ib_hca(node, net.ib_hca, nics, nic_src, given=nic_gbit is not None)
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
        nic_path, said = crossing_without_capture(net)
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
