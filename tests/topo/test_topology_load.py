"""The one topology loader: captures, a cluster directory, `topo show --json`, a sample, or live."""

from __future__ import annotations

import json
import shutil

import pytest

from collscope.errors import ConfigError, ParseError
from collscope.topo import load as topo_load
from collscope.topo.capture import NoGpuToolsError
from collscope.topo.cluster import Cluster
from collscope.topo.load import load_node, load_one_node, load_topology
from collscope.topo.model import NodeTopology
from collscope.topo.render import node_to_json
from collscope.topo.samples import DEFAULT_SAMPLE, sample_path


def _cluster(root, names=("node1", "node2")):
    """A cluster directory: the bundled sample copied once per node, each with its own host name."""
    for name in names:
        shutil.copytree(sample_path(), root / name)
        meta = json.loads((root / name / "meta.json").read_text())
        (root / name / "meta.json").write_text(json.dumps({**meta, "host": name}))
    return root


def test_captures_json_and_cluster_directories(tmp_path):
    node = load_topology([sample_path()])
    assert isinstance(node, NodeTopology) and len(node.gpus) == 8
    doc = tmp_path / "node.json"
    doc.write_text(json.dumps(node_to_json(node), default=str))
    again = load_topology([doc])
    assert isinstance(again, NodeTopology) and sorted(again.gpus) == sorted(node.gpus)
    _cluster(tmp_path / "cluster")
    assert isinstance(load_topology([tmp_path / "cluster"]), Cluster)
    with pytest.raises(ConfigError, match="not a cluster directory"):
        load_one_node([tmp_path / "cluster"])
    assert isinstance(load_one_node([doc]), NodeTopology)


def test_damaged_json_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"graph": ')
    with pytest.raises(ParseError, match="bad.json"):
        load_topology([bad])
    nograph = tmp_path / "nograph.json"
    nograph.write_text('{"host": "x"}')
    with pytest.raises(ParseError, match='"graph" key'):
        load_topology([nograph])
    with pytest.raises(ConfigError, match="no topology"):
        load_topology([])


def test_load_node_from_captures_or_a_sample():
    loaded = load_node([str(sample_path())])
    assert loaded.source == "captures" and loaded.node.sample is None
    sample = load_node(sample=DEFAULT_SAMPLE)
    assert sample.source == f"sample {DEFAULT_SAMPLE}" and sample.node.sample == DEFAULT_SAMPLE
    with pytest.raises(ConfigError, match="not both"):
        load_node([str(sample_path())], sample=DEFAULT_SAMPLE)


def test_live_without_nvidia_smi_falls_back_to_the_labelled_sample(monkeypatch):
    def no_tools(timeout_s: float = 60.0):
        raise NoGpuToolsError("nvidia-smi not found on this machine (h)")

    monkeypatch.setattr(topo_load, "capture_live", no_tools)
    loaded = load_node()
    assert loaded.source == f"sample {DEFAULT_SAMPLE}" and loaded.node.sample == DEFAULT_SAMPLE
    assert "NOT this machine" in loaded.notes[0] and "nvidia-smi not found" in loaded.notes[0]
