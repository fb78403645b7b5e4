"""collscope: what is my GPU topology, how fast are my collectives, which NCCL settings should I use.

The names a notebook needs::

    from collscope import load_captures, build_node, load_cluster, sample_path
    node = build_node(load_captures([sample_path()]))
    node.bandwidth_matrix()

    from collscope import load_results, analyze, recommend
    df = load_results(["results/"])

Everything but the errors is imported on first use (PEP 562), so ``import collscope`` and the small
modules a benchmark rank or a sweep's reaper process needs (``collscope.proc``) load no pandas,
networkx or matplotlib. Each sub-package (``collscope.topo``, ``collscope.collectives``,
``collscope.sweeps``, ``collscope.analysis``) names its own public API the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collscope._lazy import lazy_exports
from collscope._version import __version__
from collscope.errors import CollscopeError, ConfigError, LaunchError, ParseError

if TYPE_CHECKING:
    from collscope.analysis.compare import analyze
    from collscope.analysis.load import load_results
    from collscope.analysis.predict import predict
    from collscope.analysis.recommend.core import recommend
    from collscope.topo.cluster import Cluster, load_cluster
    from collscope.topo.detect import load_captures
    from collscope.topo.model import NodeTopology
    from collscope.topo.node import NodeCaptures, build_node
    from collscope.topo.samples import sample_path

__all__ = [
    "Cluster",
    "CollscopeError",
    "ConfigError",
    "LaunchError",
    "NodeCaptures",
    "NodeTopology",
    "ParseError",
    "analyze",
    "build_node",
    "load_captures",
    "load_cluster",
    "load_results",
    "predict",
    "recommend",
    "sample_path",
    "__version__",
]

if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error for it
    __getattr__, __dir__ = lazy_exports(__name__, {
        "collscope.analysis.compare": ["analyze"],
        "collscope.analysis.load": ["load_results"],
        "collscope.analysis.predict": ["predict"],
        "collscope.analysis.recommend.core": ["recommend"],
        "collscope.topo.cluster": ["Cluster", "load_cluster"],
        "collscope.topo.detect": ["load_captures"],
        "collscope.topo.model": ["NodeTopology"],
        "collscope.topo.node": ["NodeCaptures", "build_node"],
        "collscope.topo.samples": ["sample_path"],
    })
