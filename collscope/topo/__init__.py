"""Topology: one node's hardware as a networkx graph (NodeTopology), clusters and rails, captures.

Parsers live in the sub-packages ``collscope.topo.nvidia_smi``, ``collscope.topo.infiniband`` and
``collscope.topo.nccl_xml``. Names load on first use: importing a parser module loads no networkx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.topo.advice import topology_warnings
    from collscope.topo.capture import NoGpuToolsError, capture_raw, captures_from_raw, collect_to_dir
    from collscope.topo.cluster import Cluster, Rail, build_cluster, load_cluster
    from collscope.topo.detect import FORMATS, add_capture, detect_format, load_captures, read_capture_text
    from collscope.topo.draw import draw_png, write_dot, write_graphml
    from collscope.topo.gpus import GpuGeneration, gpu_generation
    from collscope.topo.model import NodeTopology
    from collscope.topo.node import NodeCaptures, build_node
    from collscope.topo.paths import PATH_MEANING, PATH_ORDER, is_nvlink, nvlink_count, path_rank
    from collscope.topo.render import node_summary_text, node_to_json
    from collscope.topo.samples import DEFAULT_SAMPLE, sample_names, sample_path

__all__ = [
    "Cluster",
    "DEFAULT_SAMPLE",
    "FORMATS",
    "GpuGeneration",
    "NoGpuToolsError",
    "NodeCaptures",
    "NodeTopology",
    "PATH_MEANING",
    "PATH_ORDER",
    "Rail",
    "add_capture",
    "build_cluster",
    "build_node",
    "capture_raw",
    "captures_from_raw",
    "collect_to_dir",
    "detect_format",
    "draw_png",
    "gpu_generation",
    "is_nvlink",
    "load_captures",
    "load_cluster",
    "node_summary_text",
    "node_to_json",
    "nvlink_count",
    "path_rank",
    "read_capture_text",
    "sample_names",
    "sample_path",
    "topology_warnings",
    "write_dot",
    "write_graphml",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.topo.advice": ["topology_warnings"],
        "collscope.topo.capture": ["NoGpuToolsError", "capture_raw", "captures_from_raw", "collect_to_dir"],
        "collscope.topo.cluster": ["Cluster", "Rail", "build_cluster", "load_cluster"],
        "collscope.topo.detect": ["FORMATS", "add_capture", "detect_format", "load_captures", "read_capture_text"],
        "collscope.topo.draw": ["draw_png", "write_dot", "write_graphml"],
        "collscope.topo.model": ["NodeTopology"],
        "collscope.topo.node": ["NodeCaptures", "build_node"],
        "collscope.topo.paths": ["PATH_MEANING", "PATH_ORDER", "is_nvlink", "nvlink_count", "path_rank"],
        "collscope.topo.gpus": ["GpuGeneration", "gpu_generation"],
        "collscope.topo.render": ["node_summary_text", "node_to_json"],
        "collscope.topo.samples": ["DEFAULT_SAMPLE", "sample_names", "sample_path"],
    })
