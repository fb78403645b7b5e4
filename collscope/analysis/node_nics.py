"""The compute NICs of a node as the models count them, and how a job's NCCL variables change them: the active
NICs of the fastest rate, each at most its PCIe link's rate in NCCL's model (:func:`node_nics`); those
``NCCL_IB_HCA`` leaves NCCL (:func:`nics_left_by_ib_hca`); where the graphs cross nodes when no capture gives the
GPU-NIC paths (:func:`crossing_without_capture`). :func:`.params.link_params` reads them.
"""

from __future__ import annotations

from typing import Any

from collscope.analysis.model_types import NetSettings
from collscope.errors import ConfigError
from collscope.topo.gdr import gdr_level
from collscope.topo.model import NodeTopology
from collscope.topo.naming import natural_key
from collscope.vocab.knob_values import ib_hca_exact_names, ib_hca_listed_names, ib_hca_permits

__all__ = ["crossing_without_capture", "nics_left_by_ib_hca", "node_nics"]


def crossing_without_capture(net: NetSettings) -> tuple[str | None, str]:
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


def nics_left_by_ib_hca(node: NodeTopology | None, spec: str, nics: int, nic_src: str, *,
                        given: bool) -> tuple[int, str]:
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


def node_nics(node: NodeTopology) -> tuple[int, float | None, str]:
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
