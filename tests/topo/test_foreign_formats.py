"""Outputs that are not topology captures get an error naming what they are and what to capture instead
(collscope/topo/foreign.py), never a parser's complaint about their first odd cell; no capture collscope reads is
taken for one of them.

Fixtures, written in the shapes published (GitHub READMEs and guides quoting ``nvidia-smi topo -p2p``): a 4-GPU
read matrix under a ``P2P Connectivity Matrix`` title with CNS across GPU pairs and the newer legend's ``DR``; one
GPU with a shell prompt and the legend only; a 2-GPU PCIe matrix with the ANSI-underlined header and no legend;
an excerpt of hwloc's ``lstopo --of xml`` of an aarch64 host (the kind aws-ofi-nccl ships next to NCCL files).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.foreign import foreign_format

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
P2P = sorted((FIXTURES / "nvidia-smi").glob("topo-p2p-*.txt"))
HWLOC = FIXTURES / "topo" / "hwloc-lstopo-aarch64-excerpt.xml"


def test_the_p2p_fixtures_are_there():
    assert len(P2P) == 3


@pytest.mark.parametrize("path", P2P, ids=lambda p: p.name)
def test_a_p2p_matrix_is_named_and_topo_m_asked_for(path):
    result = CliRunner().invoke(main, ["topo", "show", "--from", str(path)])
    assert result.exit_code == 2
    assert "`nvidia-smi topo -p2p` output" in result.output and "`nvidia-smi topo -m`" in result.output
    assert "Traceback" not in result.output


def test_an_hwloc_xml_is_named_and_nccls_dump_asked_for():
    result = CliRunner().invoke(main, ["topo", "show", "--from", str(HWLOC)])
    assert result.exit_code == 2
    assert "hwloc topology" in result.output and "NCCL_TOPO_DUMP_FILE" in result.output


CAPTURES = sorted([*(FIXTURES / "nvidia-smi").glob("topo-tab-*.txt"), *(FIXTURES / "nvidia-smi").glob("topo-spaces-*"),
                   *(FIXTURES / "nvidia-smi").glob("topo-indented-*"), *(FIXTURES / "nccl-xml").glob("*.xml"),
                   *(FIXTURES / "nvidia-smi").glob("nvlink-s-*.txt"), *(FIXTURES / "topo").glob("*.txt")])


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_no_capture_is_taken_for_a_foreign_output(path):
    assert foreign_format(path.read_text(errors="replace")) is None


def test_a_topo_matrix_followed_by_a_p2p_legend_is_still_a_topo_matrix():
    """A paste of ``topo -m`` then ``topo -p2p``'s legend: the NV# cells say it is the topology."""
    text = next(p for p in CAPTURES if p.name.startswith("topo-tab-4gpu-nv18")).read_text()
    assert foreign_format(text + "\nLegend:\n  CNS  = Chipset not supported\n") is None
