"""NCCL's topology XML (``NCCL_TOPO_DUMP_FILE``) and graph XML (``NCCL_GRAPH_DUMP_FILE``): records,
parsers, NCCL's link rates, and the graph builder (networkx, loaded only when used).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.topo.nccl_xml.graph import add_xml_topology
    from collscope.topo.nccl_xml.parse import (
        looks_like_nccl_graph_xml,
        looks_like_nccl_topo_xml,
        parse_nccl_graph_xml,
        parse_nccl_topo_xml,
    )
    from collscope.topo.nccl_xml.rates import inter_cpu_gbps, nvlink_gbps_per_link, pci_link_gbps, xgmi_gbps_per_link
    from collscope.topo.nccl_xml.records import (
        GRAPH_KINDS,
        NVSWITCH_FABRIC_TARGET,
        NcclGraph,
        NcclGraphs,
        NcclTopoXml,
        XmlC2c,
        XmlCpu,
        XmlGpu,
        XmlNet,
        XmlNvLink,
        XmlPci,
    )

__all__ = [
    "GRAPH_KINDS",
    "NVSWITCH_FABRIC_TARGET",
    "NcclGraph",
    "NcclGraphs",
    "NcclTopoXml",
    "XmlC2c",
    "XmlCpu",
    "XmlGpu",
    "XmlNet",
    "XmlNvLink",
    "XmlPci",
    "add_xml_topology",
    "inter_cpu_gbps",
    "looks_like_nccl_graph_xml",
    "looks_like_nccl_topo_xml",
    "nvlink_gbps_per_link",
    "parse_nccl_graph_xml",
    "parse_nccl_topo_xml",
    "pci_link_gbps",
    "xgmi_gbps_per_link",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.topo.nccl_xml.graph": ["add_xml_topology"],
        "collscope.topo.nccl_xml.parse": [
            "looks_like_nccl_graph_xml",
            "looks_like_nccl_topo_xml",
            "parse_nccl_graph_xml",
            "parse_nccl_topo_xml",
        ],
        "collscope.topo.nccl_xml.rates": [
            "inter_cpu_gbps",
            "nvlink_gbps_per_link",
            "pci_link_gbps",
            "xgmi_gbps_per_link",
        ],
        "collscope.topo.nccl_xml.records": [
            "GRAPH_KINDS",
            "NVSWITCH_FABRIC_TARGET",
            "NcclGraph",
            "NcclGraphs",
            "NcclTopoXml",
            "XmlC2c",
            "XmlCpu",
            "XmlGpu",
            "XmlNet",
            "XmlNvLink",
            "XmlPci",
        ],
    })
