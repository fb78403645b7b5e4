"""The one topology loader of every command that takes a topology (``--from``, ``--topo``, ``--sample``).

:func:`load_topology` reads what ``--topo`` names: captured files and capture directories (their format detected
from content, merged into one node, as ``topo show --from``), a cluster directory (one capture directory per
node), or the JSON that ``topo show --json`` wrote. :func:`load_node` is ``topo show``'s choice: captures when
given, a bundled sample when asked, else this node live, falling back to the bundled sample (said so in
``notes``) where nvidia-smi is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import networkx as nx

from collscope.errors import ConfigError, ParseError
from collscope.files import read_input_text
from collscope.json_input import load_json
from collscope.topo.capture import NoGpuToolsError, capture_live
from collscope.topo.cluster import Cluster, load_cluster
from collscope.topo.detect import load_captures
from collscope.topo.model import NodeTopology
from collscope.topo.node import build_node
from collscope.topo.samples import DEFAULT_SAMPLE, sample_path

__all__ = ["LoadedNode", "load_node", "load_one_node", "load_topology", "node_from_json"]


@dataclass(frozen=True, slots=True)
class LoadedNode:
    """One node's model and what the user should be told about where it came from."""

    node: NodeTopology
    notes: tuple[str, ...]
    """Capture problems that were not fatal, and a bundled sample shown in place of this machine."""
    source: str
    """``"captures"`` (from files), ``"live"`` (this node's tools) or ``"sample <name>"``."""


def node_from_json(path: Path, doc: dict[str, Any]) -> NodeTopology:
    """The node of a ``topo show --json`` document read from ``path``; ParseError when its graph is damaged."""
    try:
        graph = nx.node_link_graph(doc["graph"], edges="links")
    except (KeyError, TypeError, nx.NetworkXError) as exc:
        raise ParseError(str(path), None, "the \"graph\" of `collscope topo show --json` (networkx node-link data)",
                         found=str(exc)) from exc
    raw = doc.get("links")
    paths: dict[str, dict[str, str]] = {}
    if isinstance(raw, dict):
        paths = {str(a): {str(b): str(c) for b, c in row.items()} for a, row in raw.items() if isinstance(row, dict)}
    return NodeTopology(host=str(doc.get("host") or path.stem), graph=graph, paths=paths, sources=[str(path)],
                        sample=doc.get("sample"))


def load_topology(sources: Sequence[str | Path], *, gpu: str | None = None) -> NodeTopology | Cluster:
    """What ``--topo`` names: captured files and capture directories (as ``topo show --from``, merged into one
    node), a cluster directory (one capture directory per node), or the JSON ``topo show --json`` wrote."""
    paths = [Path(s) for s in sources]
    if not paths:
        raise ConfigError("no topology given")
    if len(paths) == 1 and paths[0].is_file():
        text = read_input_text(paths[0], "a topology: captured tool outputs or `topo show --json` (UTF-8 text)")
        if text.lstrip().startswith("{"):
            doc = load_json(text, str(paths[0]), "JSON written by `collscope topo show --json`")
            if not isinstance(doc, dict) or "graph" not in doc:
                raise ParseError(str(paths[0]), 1, "a `topo show --json` object with a \"graph\" key")
            return node_from_json(paths[0], doc)
    if len(paths) == 1 and paths[0].is_dir() and any(p.is_dir() for p in paths[0].iterdir()):
        return load_cluster(paths[0], gpu=gpu)
    return build_node(load_captures(paths), gpu=gpu)


def load_one_node(sources: Sequence[str | Path], *, gpu: str | None = None) -> NodeTopology:
    """:func:`load_topology` where one node is needed (a sweep's constraints, a drawing): a cluster directory is a
    ConfigError saying so."""
    topology = load_topology(sources, gpu=gpu)
    if not isinstance(topology, NodeTopology):
        raise ConfigError(f"--topo {' '.join(str(s) for s in sources)}: expected one node's topology (its captures "
                          "or `topo show --json`), not a cluster directory")
    return topology


def load_node(sources: Sequence[str | Path] = (), *, sample: str | None = None, gpu: str | None = None,
              timeout_s: float = 60.0) -> LoadedNode:
    """One node: from ``sources`` (captures), else the bundled ``sample``, else this node live.

    Live without nvidia-smi falls back to the default sample, with a note that it is not this machine.
    ``sources`` and ``sample`` together are a ConfigError.
    """
    if sources and sample:
        raise ConfigError("use either captures (--from) or a bundled sample (--sample), not both")
    if sources:
        captures = load_captures([Path(s) for s in sources])
        return LoadedNode(build_node(captures, gpu=gpu), tuple(captures.errors), "captures")
    notes: list[str] = []
    if sample is None:
        try:
            captures = capture_live(timeout_s)
            return LoadedNode(build_node(captures, gpu=gpu), tuple(captures.errors), "live")
        except NoGpuToolsError as exc:
            notes.append(f"{exc}. Showing the bundled sample {DEFAULT_SAMPLE!r} instead: it is NOT this machine.")
            sample = DEFAULT_SAMPLE
    captures = load_captures([sample_path(sample)])
    return LoadedNode(build_node(captures, gpu=gpu, sample=sample), (*notes, *captures.errors), f"sample {sample}")
