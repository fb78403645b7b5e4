"""collscope: what is my GPU topology, how fast are my collectives, which NCCL settings should I use.

The names a notebook needs::

    from collscope import load_captures, build_node, load_cluster, sample_path
    node = build_node(load_captures([sample_path()]))
    node.bandwidth_matrix()
"""

__version__ = "0.1.0"

from collscope.errors import CollscopeError, ConfigError, LaunchError, ParseError
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
    "build_node",
    "load_captures",
    "load_cluster",
    "sample_path",
    "__version__",
]
