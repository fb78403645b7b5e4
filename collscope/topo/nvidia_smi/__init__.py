"""nvidia-smi captures: ``topo -m`` matrix, ``--query-gpu`` CSV, ``nvlink --status``; the graph built from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports

if TYPE_CHECKING:
    from collscope.topo.nvidia_smi.graph import graph_from_matrix, guess_generation_from_links
    from collscope.topo.nvidia_smi.matrix import PATH_CLASSES, TopoMatrix, looks_like_topo_matrix, parse_topo_matrix
    from collscope.topo.nvidia_smi.queries import (
        GPU_QUERY_FIELDS,
        GpuInfo,
        NvLink,
        looks_like_gpu_query_csv,
        looks_like_nvlink_status,
        parse_gpu_query_csv,
        parse_nvlink_status,
    )

__all__ = [
    "GPU_QUERY_FIELDS",
    "GpuInfo",
    "NvLink",
    "PATH_CLASSES",
    "TopoMatrix",
    "graph_from_matrix",
    "guess_generation_from_links",
    "looks_like_gpu_query_csv",
    "looks_like_nvlink_status",
    "looks_like_topo_matrix",
    "parse_gpu_query_csv",
    "parse_nvlink_status",
    "parse_topo_matrix",
]

if not TYPE_CHECKING:  # mypy reads the imports above
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.topo.nvidia_smi.graph": ["graph_from_matrix", "guess_generation_from_links"],
        "collscope.topo.nvidia_smi.matrix": [
            "PATH_CLASSES",
            "TopoMatrix",
            "looks_like_topo_matrix",
            "parse_topo_matrix",
        ],
        "collscope.topo.nvidia_smi.queries": [
            "GPU_QUERY_FIELDS",
            "GpuInfo",
            "NvLink",
            "looks_like_gpu_query_csv",
            "looks_like_nvlink_status",
            "parse_gpu_query_csv",
            "parse_nvlink_status",
        ],
    })
