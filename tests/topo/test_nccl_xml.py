"""NCCL/RCCL topology XML and graph XML: parsers, NCCL's bandwidth model, and the graph builder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.topo.nccl_xml import (
    NcclTopoXml,
    inter_cpu_gbps,
    looks_like_nccl_graph_xml,
    looks_like_nccl_topo_xml,
    nvlink_gbps_per_link,
    parse_nccl_graph_xml,
    parse_nccl_topo_xml,
    pci_link_gbps,
    xgmi_gbps_per_link,
)
from collscope.topo.nccl_xml.graph import add_xml_topology
from tests.corpus import CORPUS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl-xml"
TOPO_FIXTURES = sorted(p.name for p in FIXTURES.glob("*topo*.xml"))
GRAPH_FIXTURES = sorted(p.name for p in FIXTURES.glob("*graph*.xml"))


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text()


def parse_fixture(name: str) -> NcclTopoXml:
    return parse_nccl_topo_xml(fixture_text(name), name)


def build(topo: NcclTopoXml, source: str = "test") -> nx.Graph:
    graph = nx.Graph()
    add_xml_topology(graph, topo, source=source)
    return graph


def kinds(graph: nx.Graph) -> dict[str, int]:
    return dict(Counter(kind for _, kind in graph.nodes(data="kind")))


def edge_kinds(graph: nx.Graph) -> dict[str, int]:
    return dict(Counter(kind for _, _, kind in graph.edges(data="kind")))


# ------------------------------------------------------------------------------------------ NCCL model


@pytest.mark.parametrize(
    ("speed", "width", "expected"),
    [
        ("8 GT/s", 16, 12.0),
        ("8.0 GT/s PCIe", 16, 12.0),
        ("16 GT/s", 16, 24.0),
        ("16.0 GT/s PCIe", 16, 24.0),
        ("32.0 GT/s PCIe", 16, 48.0),
        ("32 GT/s", 8, 24.0),
        ("64.0 GT/s PCIe", 16, 96.0),
        ("2.5 GT/s", 1, 0.1875),
        ("5 GT/s", 4, 1.5),
        ("", 0, None),
        ("", 16, None),
        (None, 16, None),
        ("16 GT/s", 0, None),
        ("16 GT/s", None, None),
        ("Unknown", 16, None),
        ("128.0 GT/s PCIe", 16, None),
    ],
)
def test_pci_link_gbps(speed: str | None, width: int | None, expected: float | None) -> None:
    assert pci_link_gbps(speed, width) == expected


@pytest.mark.parametrize(
    ("sm", "expected"),
    [(60, 18.0), (61, 18.0), (70, 20.0), (75, 20.0), (80, 20.0), (86, 12.0), (89, 20.0), (90, 20.6),
     (100, 40.1), (120, 40.1), (50, 20.0)],
)  # fmt: skip
def test_nvlink_gbps_per_link(sm: int, expected: float) -> None:
    assert nvlink_gbps_per_link(sm) == expected


def test_xgmi_gbps_per_link() -> None:
    assert xgmi_gbps_per_link("gfx942") == 48.0
    assert xgmi_gbps_per_link("gfx942:sramecc+:xnack-") == 48.0
    assert xgmi_gbps_per_link("gfx950") == 48.0
    assert xgmi_gbps_per_link("gfx90a") == 36.0
    assert xgmi_gbps_per_link("gfx1100") is None
    assert xgmi_gbps_per_link(None) is None


# ------------------------------------------------------------------------------------------ sniffers


@pytest.mark.parametrize(
    "text",
    [
        '<system version="1">\n</system>',
        '  \n\t<system version="1"/>',
        '<?xml version="1.0" encoding="UTF-8"?>\n<system>',
        '\ufeff<?xml version="1.0"?><!-- dumped by NCCL --><system version="1">',
        '<!-- a\n multi-line comment --> <!DOCTYPE system>\n<system\n version="1">',
        '<!DOCTYPE system [<!ENTITY e "x">]>\n<system>&e;</system>',
    ],
)
def test_looks_like_topo_xml(text: str) -> None:
    assert looks_like_nccl_topo_xml(text)
    assert not looks_like_nccl_graph_xml(text)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "system", "<systemd/>", "<graph id='0'/>", "GPU0 X NV18", "<!-- <system> -->", "<"],
)
def test_sniffers_reject(text: str) -> None:
    assert not looks_like_nccl_topo_xml(text)
    assert not looks_like_nccl_graph_xml(text)


def test_looks_like_graph_xml() -> None:
    assert looks_like_nccl_graph_xml(fixture_text("h100-2node-graph-dump.xml"))
    assert looks_like_nccl_graph_xml('<?xml version="1.0"?>\n<!-- x -->\n<graphs version="1">')
    for name in TOPO_FIXTURES:
        assert looks_like_nccl_topo_xml(fixture_text(name)), name
        assert not looks_like_nccl_graph_xml(fixture_text(name)), name


# ------------------------------------------------------------------------------------------ fixtures: records


def test_h100_dump_records() -> None:
    topo = parse_fixture("h100-8gpu-nvswitch-topo-dump.xml")
    assert topo.version == "1"
    assert topo.flavour == "nccl"
    assert not topo.truncated
    assert [c.numaid for c in topo.cpus] == [0, 1]
    assert topo.cpus[0].host_hash == "0x7c3f0e21a9d45b18"
    assert (topo.cpus[0].familyid, topo.cpus[0].modelid) == (6, 143)
    assert topo.gpu_count == 8
    gpus = [pci for _, pci in topo.pcis() if pci.gpu is not None]
    assert [p.gpu.dev for p in gpus if p.gpu] == list(range(8))
    assert {p.gpu.sm for p in gpus if p.gpu} == {90}
    first = gpus[0]
    assert first.busid == "0000:18:00.0" and first.is_gpu and not first.is_bridge
    assert first.gpu is not None
    assert [(lk.target, lk.count, lk.tclass) for lk in first.gpu.links] == [
        ("0000:05:00.0", 4, "0x068000"),
        ("0000:06:00.0", 4, "0x068000"),
        ("0000:07:00.0", 5, "0x068000"),
        ("0000:08:00.0", 5, "0x068000"),
    ]
    assert all(lk.to_nvswitch and lk.kind == "nvlink" for lk in first.gpu.links)
    nets = topo.nets
    assert [n.name for n in nets] == [f"mlx5_{i}" for i in range(8)]
    assert {n.speed_mbps for n in nets} == {400000.0}
    assert nets[0].bw_gbps == 50.0 and nets[0].rate_gbitps == 400.0
    assert nets[0].gdr is True and nets[0].port == 1 and nets[0].attrs["coll"] == "1"
    bridges = [pci for _, pci in topo.pcis() if pci.is_bridge]
    assert len(bridges) == 4 and bridges[0].link_gbps == 48.0
    nic_pci = bridges[0].children[1]
    assert nic_pci.is_nic and nic_pci.pci_class == "0x020700"


def test_ndv4_style_records() -> None:
    topo = parse_fixture("ndv4-style-bridges-topo-file.xml")
    assert topo.gpu_count == 8 and topo.nets == ()
    assert [(c.numaid, c.vendor, c.familyid, c.modelid) for c in topo.cpus] == [
        (0, "AuthenticAMD", 23, 49),
        (1, "AuthenticAMD", 23, 49),
    ]
    busids = [pci.busid for _, pci in topo.pcis()]
    assert "000b:00:00.0" in busids  # written 000B, kept lower case
    assert all(pci.gpu is None for _, pci in topo.pcis())
    assert sum(pci.is_bridge for _, pci in topo.pcis()) == 4
    assert sum(pci.is_nic for _, pci in topo.pcis()) == 4


def test_pcie_pair_records() -> None:
    topo = parse_fixture("pcie-4gpu-nvlink-pair-topo-dump.xml")
    gpus = {pci.gpu.dev: pci for _, pci in topo.pcis() if pci.gpu is not None}
    assert list(gpus) == [0, 1, 2, 3]
    assert gpus[0].gpu is not None and gpus[2].gpu is not None
    assert [(lk.target, lk.count) for lk in gpus[0].gpu.links] == [("0000:42:00.0", 12)]
    assert gpus[2].gpu.links == ()
    assert (gpus[2].link_speed, gpus[2].link_width, gpus[2].link_gbps) == ("", 0, None)
    assert [n.name for n in topo.nets] == ["mlx5_0"] and topo.nets[0].bw_gbps == 12.5


def test_rccl_records() -> None:
    topo = parse_fixture("rccl-mi300x-4gpu-xgmi-topo-dump.xml")
    assert topo.flavour == "rccl"
    gpus = [pci.gpu for _, pci in topo.pcis() if pci.gpu is not None]
    assert len(gpus) == 4
    assert {g.arch for g in gpus} == {"gfx942"}
    assert gpus[0].attrs["arch"] == "169983"
    assert [(lk.kind, lk.count) for lk in gpus[0].links] == [("xgmi", 1)] * 3
    assert not any(lk.to_nvswitch for lk in gpus[0].links)
    assert [n.name for n in topo.nets] == ["mlx5_0", "mlx5_1"]


# ------------------------------------------------------------------------------------------ fixtures: graph


def test_h100_dump_graph() -> None:
    graph = build(parse_fixture("h100-8gpu-nvswitch-topo-dump.xml"), "h100.xml")
    assert kinds(graph) == {"numa": 2, "gpu": 8, "nic": 8, "pcie_switch": 4, "nvswitch": 1}
    assert edge_kinds(graph) == {"host": 4, "pcie": 16, "nvlink": 8, "smp": 1}
    assert (graph.number_of_nodes(), graph.number_of_edges()) == (23, 29)
    gpu0 = graph.nodes["GPU0"]
    assert (gpu0["index"], gpu0["pci_bus_id"], gpu0["sm"]) == (0, "0000:18:00.0", 90)
    assert (gpu0["numa"], gpu0["numa_id"]) == ("NUMA0", 0)
    assert graph.nodes["GPU7"]["numa"] == "NUMA1"
    nvl = graph.edges["GPU0", "NVSwitch"]
    assert nvl["kind"] == "nvlink" and nvl["nlinks"] == 18
    assert nvl["bw_gbps"] == pytest.approx(450.0)  # NVLink4 data rate 18 x 25; NCCL's model kept beside it
    assert nvl["bw_source"] == "assumed: table rate NVLink4 25 GB/s per link per direction x 18 (H100 class from sm=90)"
    assert nvl["nccl_bw_gbps"] == pytest.approx(370.8)
    assert nvl["nccl_bw_source"] == "NCCL topo.h SM90_NVLINK_BW 20.6 x 18"
    assert not any(graph.has_edge(f"GPU{a}", f"GPU{b}") for a in range(8) for b in range(8))
    nic = graph.nodes["mlx5_3"]
    assert nic["kind"] == "nic" and nic["rate_gbps"] == 400.0 and nic["pci_bus_id"] == "0000:4d:00.0"
    assert nic["label"] is None
    nic_edge = graph.edges["mlx5_3", "PCIe:0000:3a:00.0"]
    assert (nic_edge["kind"], nic_edge["bw_gbps"], nic_edge["pcie_bw_gbps"]) == ("pcie", 50.0, 48.0)
    gpu_edge = graph.edges["GPU0", "PCIe:0000:16:00.0"]
    assert gpu_edge["bw_gbps"] == 48.0 and gpu_edge["bw_source"].startswith("captured: link_speed=32.0 GT/s")
    assert graph.edges["PCIe:0000:16:00.0", "NUMA0"]["kind"] == "host"
    smp = graph.edges["NUMA0", "NUMA1"]
    assert (smp["kind"], smp["bw_gbps"], smp["bw_source"]) == ("smp", 22.0, "assumed: NCCL topo.h SRP_QPI_BW")
    numa = graph.nodes["NUMA1"]
    assert numa["cpu_affinity"] == "ffffffff,ffff0000,00000000,00000000"
    assert (numa["arch"], numa["vendor"]) == ("x86_64", "GenuineIntel")
    for _, _, data in graph.edges(data=True):
        assert data["bw_gbps"] is not None and data["bw_source"].startswith(("captured:", "assumed:"))


def test_ndv4_style_graph_assumes_gpu_order() -> None:
    graph = build(parse_fixture("ndv4-style-bridges-topo-file.xml"))
    assert kinds(graph) == {"numa": 2, "gpu": 8, "nic": 4, "pcie_switch": 4}
    assert edge_kinds(graph) == {"host": 4, "pcie": 12, "smp": 1}
    by_bus = {d["pci_bus_id"]: n for n, d in graph.nodes(data=True) if d["kind"] == "gpu"}
    assert by_bus == {
        "0001:00:00.0": "GPU0",
        "0002:00:00.0": "GPU1",
        "0003:00:00.0": "GPU2",
        "0004:00:00.0": "GPU3",
        "000b:00:00.0": "GPU4",
        "000c:00:00.0": "GPU5",
        "000d:00:00.0": "GPU6",
        "000e:00:00.0": "GPU7",
    }
    assert graph.nodes["GPU0"]["index_source"].startswith("assumed:")
    assert graph.nodes["GPU0"]["sm"] is None
    assert graph.has_edge("GPU0", "PCIe:ffff:ff:02.0")
    assert graph.has_edge("NIC:0101:00:00.0", "PCIe:ffff:ff:02.0")
    assert graph.edges["GPU0", "PCIe:ffff:ff:02.0"]["bw_gbps"] == 24.0
    assert graph.edges["NUMA0", "NUMA1"]["bw_gbps"] == 16.0


def test_pcie_pair_graph() -> None:
    graph = build(parse_fixture("pcie-4gpu-nvlink-pair-topo-dump.xml"))
    assert kinds(graph) == {"numa": 1, "gpu": 4, "nic": 1, "pcie_switch": 2}
    assert edge_kinds(graph) == {"host": 3, "pcie": 4, "nvlink": 1}
    pair = graph.edges["GPU0", "GPU1"]
    # NVLink3 data rate 12 x 25 GB/s (NCCL's model: 12 x 20)
    assert (pair["nlinks"], pair["bw_gbps"], pair["fabric"]) == (12, 300.0, "nvlink")
    assert "NVSwitch" not in graph
    empty = graph.edges["GPU2", "PCIe:0000:80:01.1"]
    assert empty["bw_gbps"] == 12.0 and empty["bw_source"].startswith("assumed: NCCL default PCI Gen3 x16")
    nic = graph.edges["mlx5_0", "NUMA0"]
    assert (nic["kind"], nic["bw_gbps"], nic["pcie_bw_gbps"]) == ("host", 12.5, 24.0)


def test_rccl_graph() -> None:
    graph = build(parse_fixture("rccl-mi300x-4gpu-xgmi-topo-dump.xml"))
    assert kinds(graph) == {"numa": 2, "gpu": 4, "nic": 2, "pcie_switch": 4}
    assert edge_kinds(graph) == {"host": 4, "pcie": 6, "nvlink": 6, "smp": 1}
    xgmi = graph.edges["GPU0", "GPU3"]
    assert (xgmi["fabric"], xgmi["nlinks"], xgmi["bw_gbps"]) == ("xgmi", 1, 48.0)
    assert graph.nodes["GPU2"]["arch"] == "gfx942"


def test_numaid_minus_one_and_c2c() -> None:
    text = """<system version="1">
  <cpu numaid="-1" arch="arm64" vendor="" host_hash="0x1">
    <pci busid="0009:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
        <c2c bw="45000" count="10"/>
      </gpu>
    </pci>
  </cpu>
  <cpu arch="arm64" host_hash="0x1"/>
</system>"""
    topo = parse_nccl_topo_xml(text)
    assert topo.cpus[0].numaid == -1 and topo.cpus[1].numaid is None
    graph = build(topo)
    assert sorted(n for n, k in graph.nodes(data="kind") if k == "numa") == ["NUMA?", "NUMA?#1"]
    assert graph.nodes["GPU0"]["numa"] == "NUMA?" and graph.nodes["GPU0"]["numa_id"] is None
    c2c = graph.edges["GPU0", "NUMA?"]
    assert (c2c["kind"], c2c["bw_gbps"], c2c["nlinks"]) == ("c2c", 450.0, 10)
    assert graph.edges["GPU0", "NVSwitch"]["bw_gbps"] == pytest.approx(450.0)
    assert graph.edges["NUMA?", "NUMA?#1"]["bw_gbps"] == 6.0  # ARM_BW


@pytest.mark.parametrize(
    ("arch", "vendor", "family", "model", "expected"),
    [
        ("x86_64", "GenuineIntel", 6, 79, 6.0),
        ("x86_64", "GenuineIntel", 6, 85, 10.0),
        ("x86_64", "GenuineIntel", 6, 143, 22.0),
        ("x86_64", "GenuineIntel", 6, 207, 40.0),
        ("x86_64", "AuthenticAMD", 25, 1, 16.0),
        ("ppc64", None, None, None, 32.0),
        ("arm64", None, None, None, 6.0),
        ("x86_64", "CentaurHauls", 7, 59, 6.0),
        (None, None, None, None, None),
        ("x86_64", "SomethingElse", None, None, None),
    ],
)
def test_inter_cpu_gbps(
    arch: str | None, vendor: str | None, family: int | None, model: int | None, expected: float | None
) -> None:
    pairs = [("arch", arch), ("vendor", vendor), ("familyid", family), ("modelid", model)]
    attrs = "".join(f' {k}="{v}"' for k, v in pairs if v is not None)
    cpu = parse_nccl_topo_xml(f'<system><cpu numaid="0"{attrs}/></system>').cpus[0]
    assert inter_cpu_gbps(cpu)[0] == expected


# ------------------------------------------------------------------------------------------ graph XML


def test_graph_fixture() -> None:
    graphs = parse_nccl_graph_xml(fixture_text("h100-2node-graph-dump.xml"), "graph.xml")
    assert graphs.version == "1"
    assert [(g.id, g.kind, g.pattern, g.nchannels) for g in graphs.graphs] == [
        (0, "ring", 4, 2),
        (1, "tree", 1, 1),
        (3, "nvls", 5, 1),
    ]
    ring = graphs.by_kind("ring")[0]
    assert ring.pattern_name == "ring"
    assert (ring.speed_intra, ring.speed_inter) == (40.0, 40.0)
    assert (ring.type_intra, ring.type_inter) == ("NVL", "PIX")
    assert (ring.crossnic, ring.same_channels, ring.latency_inter) == (0, 0, 0.0)
    assert len(ring.channels) == 2
    assert ring.channels[0] == (("net", 0),) + tuple(("gpu", i) for i in range(8)) + (("net", 7),)
    assert [dev for kind, dev in ring.channels[1] if kind == "gpu"] == [1, 0, 3, 2, 5, 4, 7, 6]
    assert ring.channel_ranks[0] == (None,) * 10
    nvls = graphs.by_kind("nvls")[0]
    assert (nvls.speed_intra, nvls.speed_inter, nvls.pattern_name) == (120.0, 48.0, "nvls")
    assert all(kind == "gpu" for kind, _ in nvls.channels[0])


def test_graph_ranks_unknown_ids_and_missing_nchannels() -> None:
    text = """<graphs version="1">
  <graph id="4" pattern="6" bwintra="24">
    <channel><gpu dev="2" rank="10"/><gpu dev="3"/></channel>
  </graph>
  <graph id="9"><comment/></graph>
</graphs>"""
    graphs = parse_nccl_graph_xml(text)
    direct, other = graphs.graphs
    assert (direct.kind, direct.nchannels, direct.speed_intra, direct.pattern_name) == (
        "collnet_direct",
        1,
        24.0,
        "collnet_direct",
    )
    assert direct.channels == ((("gpu", 2), ("gpu", 3)),) and direct.channel_ranks == ((10, None),)
    assert (other.kind, other.nchannels, other.channels, other.pattern) == ("unknown", 0, (), None)


# ------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ("", 1, "<system> root element"),
        ("   \n\n", 3, "<system> root element"),
        ('<graphs version="1">\n</graphs>', 1, "<system> root element"),
        ("<system>\n  <cpu>\n  </pci>\n</system>", 3, "well-formed NCCL topology XML"),
        ('<system>\n<cpu numaid="zero"/>\n</system>', 2, "an integer numaid="),
        ('<system><cpu>\n<pci class="0x030200"/></cpu></system>', 2, "a busid= attribute on <pci>"),
        ('<system><cpu><pci busid="0:0:0.0" link_width="x16"/></cpu></system>', 1, "an integer link_width="),
        ('<system><cpu><pci busid="a">\n<gpu>\n<nvlink count="2"/></gpu></pci></cpu></system>', 3, "target="),
        ('<system><cpu><nic>\n<net speed="100000"/></nic></cpu></system>', 2, "a name= attribute on <net>"),
        ('<system><cpu><nic>\n<net name="e" speed="fast"/></nic></cpu></system>', 2, "a number speed="),
        ("<system>\n<cpu>\n", 3, "closing tags </cpu></system>"),
        ("not xml at all", 1, "well-formed NCCL topology XML"),
        ("<system></system>\n<system/>", 2, "well-formed"),
        ("<system><cpu>\n" + '<pci busid="a">' * 300, 2, "at most 200 nested elements"),
    ],
)
def test_topo_parse_errors(text: str, line: int, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nccl_topo_xml(text, "bad.xml")
    assert info.value.source == "bad.xml"
    assert info.value.line == line
    assert expected in info.value.expected


@pytest.mark.parametrize(
    ("text", "line", "expected"),
    [
        ('<system version="1"/>', 1, "<graphs> root element"),
        ('<graphs>\n<graph pattern="4"/>\n</graphs>', 2, "an id= attribute on <graph>"),
        ('<graphs>\n<graph id="0">\n<channel>\n<gpu rank="1"/>', 4, "closing tags"),
        ('<graphs><graph id="0"><channel>\n<gpu rank="1"/></channel></graph></graphs>', 2, "a dev="),
        ('<graphs><graph id="0" speedintra="n/a"/></graphs>', 1, "a number speedintra="),
    ],
)
def test_graph_parse_errors(text: str, line: int, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_nccl_graph_xml(text, "g.xml")
    assert info.value.line == line
    assert expected in info.value.expected


def test_truncated_fixture_strict_and_recovered() -> None:
    text = fixture_text("h100-8gpu-nvswitch-topo-dump.xml")
    cut = "\n".join(text.split("\n")[:20])  # ends inside GPU1's <nvlink> list
    with pytest.raises(ParseError) as info:
        parse_nccl_topo_xml(cut, "cut.xml")
    assert info.value.line == 20
    assert "</gpu></pci></pci></cpu></system>" in info.value.expected
    topo = parse_nccl_topo_xml(cut, "cut.xml", allow_truncated=True)
    assert topo.truncated and topo.gpu_count == 2 and [n.name for n in topo.nets] == ["mlx5_0"]
    graph = build(topo)
    assert kinds(graph) == {"numa": 1, "pcie_switch": 1, "gpu": 2, "nic": 1, "nvswitch": 1}


# ------------------------------------------------------------------------------------------ hypothesis

_XML_BITS = [
    "<system", "<system>", "</system>", '<cpu numaid="0">', "</cpu>", '<pci busid="0000:01:00.0"',
    ' class="0x030200"', ' class="0x060400"', ' link_speed="16 GT/s" link_width="16"', ">", "/>", "</pci>",
    '<gpu dev="0" sm="90">', "</gpu>", '<nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>',
    '<xgmi target="0000:01:00.0" count="x"/>', "<nic>", "</nic>", '<net name="mlx5_0" speed="400000"/>',
    '<graphs version="1">', "</graphs>", '<graph id="0" nchannels="1">', "</graph>", "<channel>",
    "</channel>", '<gpu dev="1"/>', '<net dev="0"/>', "<!-- c -->", "<?xml version='1.0'?>", "&amp;",
    "&bogus;",
    "\n", " ", '"', "<", "&", "]]>", "<![CDATA[x]]>", '<!DOCTYPE system [<!ENTITY e "x">]>', "&e;",
]  # fmt: skip
xml_soup = st.lists(st.sampled_from(_XML_BITS), max_size=40).map("".join)
any_text = st.one_of(st.text(max_size=300), xml_soup)


def _only_parse_errors(fn: Any, text: str, **kwargs: Any) -> Any:
    try:
        return fn(text, "h.xml", **kwargs)
    except ParseError as exc:
        assert exc.source == "h.xml"
        assert exc.line is None or exc.line >= 1
        return None


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(any_text)
def test_parsers_raise_only_parse_error(text: str) -> None:
    topo = _only_parse_errors(parse_nccl_topo_xml, text)
    recovered = _only_parse_errors(parse_nccl_topo_xml, text, allow_truncated=True)
    if recovered is not None:
        build(recovered)
    if topo is not None:
        build(topo)
    _only_parse_errors(parse_nccl_graph_xml, text)
    looks_like_nccl_topo_xml(text)
    looks_like_nccl_graph_xml(text)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(TOPO_FIXTURES + GRAPH_FIXTURES), st.floats(0.0, 1.0))
def test_truncated_fixtures_raise_only_parse_error(name: str, fraction: float) -> None:
    text = fixture_text(name)
    cut = text[: int(len(text) * fraction)]
    if name in GRAPH_FIXTURES:
        _only_parse_errors(parse_nccl_graph_xml, cut)
        return
    strict = _only_parse_errors(parse_nccl_topo_xml, cut)
    if cut.strip() != text.strip():
        assert strict is None  # a cut dump is never taken for a whole one
    recovered = _only_parse_errors(parse_nccl_topo_xml, cut, allow_truncated=True)
    if recovered is not None:
        graph = build(recovered)
        assert graph.number_of_nodes() <= build(parse_fixture(name)).number_of_nodes()


# ------------------------------------------------------------------------------------------ shared corpus

CORPUS_FILES = [
    "nccl-topo-xml/azure-ncv4-a100-pcie-graph-nccl_graph_file.xml.txt",
    "nccl-topo-xml/azure-ncv4-a100-pcie-nvlink-pairs-topo-with-gpu-nic.xml.txt",
    "nccl-topo-xml/azure-ndv2-v100-topo-nccl_topo_file.xml.txt",
    "nccl-topo-xml/azure-ndv4-a100-topo-nccl_topo_file.xml.txt",
    "nccl-topo-xml/azure-ndv5-h100-topo-nccl_topo_file.xml.txt",
    "nccl-topo-xml/h100-vm-topo-dump-host_hash-numaid-minus1-nvswitch-TRUNCATED.xml.txt",
    "from-nccl-research/nccl-tests-256_h200_topo_dump_excerpt.xml.txt",
]

# Per file: GPUs, NUMA nodes, net names, graph node kinds, graph edge kinds, and a few edge values.
CORPUS_EXPECTED: dict[str, dict[str, Any]] = {
    "azure-ncv4-a100-pcie-nvlink-pairs-topo-with-gpu-nic.xml.txt": {
        "gpus": 4, "cpus": 4, "nets": ["eth0"],
        "kinds": {"numa": 4, "gpu": 4, "nic": 1},
        "edges": {"host": 5, "smp": 6, "nvlink": 2},
        "values": {("GPU0", "GPU1"): 300.0, ("GPU2", "GPU3"): 300.0, ("GPU0", "NUMA0"): 12.0,
                   ("eth0", "NUMA0"): 12.5, ("NUMA0", "NUMA3"): 16.0},
    },
    "azure-ndv2-v100-topo-nccl_topo_file.xml.txt": {
        "gpus": 8, "cpus": 2, "nets": [],
        "kinds": {"numa": 2, "gpu": 8, "nic": 1},
        "edges": {"host": 9, "smp": 1},
        "values": {("GPU0", "NUMA0"): 24.0, ("GPU4", "NUMA1"): 24.0, ("NIC:0101:00:00.0", "NUMA0"): 24.0,
                   ("NUMA0", "NUMA1"): 10.0},
    },
    "azure-ndv4-a100-topo-nccl_topo_file.xml.txt": {
        "gpus": 8, "cpus": 4, "nets": [],
        "kinds": {"numa": 4, "pcie_switch": 4, "gpu": 8, "nic": 8},
        "edges": {"host": 4, "pcie": 16, "smp": 6},
        "values": {("GPU0", "PCIe:ffff:ff:02.0"): 24.0, ("GPU2", "PCIe:ffff:ff:01.0"): 24.0,
                   ("PCIe:ffff:ff:01.0", "NUMA0"): 24.0, ("NUMA1", "NUMA2"): 16.0},
    },
    "azure-ndv5-h100-topo-nccl_topo_file.xml.txt": {
        "gpus": 8, "cpus": 2, "nets": [],
        "kinds": {"numa": 2, "pcie_switch": 8, "gpu": 8, "nic": 8},
        "edges": {"host": 8, "pcie": 16, "smp": 1},
        "values": {("GPU0", "PCIe:ffff:ff:01.0"): 48.0, ("GPU3", "PCIe:ffff:ff:04.0"): 48.0,
                   ("NIC:0108:00:00.0", "PCIe:ffff:ff:08.0"): 48.0, ("NUMA0", "NUMA1"): 22.0},
    },
    "h100-vm-topo-dump-host_hash-numaid-minus1-nvswitch-TRUNCATED.xml.txt": {
        "truncated_line": 15,
        "gpus": 1, "cpus": 1, "nets": ["mlx5_0"],
        "kinds": {"numa": 1, "gpu": 1, "nic": 1, "nvswitch": 1},
        "edges": {"host": 2, "nvlink": 1},
        "values": {("GPU0", "NVSwitch"): 450.0, ("GPU0", "NUMA?"): 24.0, ("mlx5_0", "NUMA?"): 50.0},
    },
    "nccl-tests-256_h200_topo_dump_excerpt.xml.txt": {
        "gpus": 1, "cpus": 1, "nets": ["mlx5_0"],
        "kinds": {"numa": 1, "pcie_switch": 1, "gpu": 1, "nic": 1, "nvswitch": 1},
        "edges": {"host": 1, "pcie": 2, "nvlink": 1},
        "values": {("GPU0", "NVSwitch"): 450.0, ("GPU0", "PCIe:0000:16:00.0"): 48.0,
                   ("mlx5_0", "PCIe:0000:16:00.0"): 50.0, ("PCIe:0000:16:00.0", "NUMA0"): 48.0},
    },
}  # fmt: skip


def corpus_text(rel: str) -> str:
    """The corpus file with its ``#`` annotation lines (leading source/what/note, and the trailing
    notes of the H200 excerpt) blanked, so line numbers still match the file."""
    path = CORPUS / rel
    if not path.is_file():
        pytest.skip(f"shared corpus not found at {path}")
    return "\n".join("" if line.startswith("#") else line for line in path.read_text().split("\n"))


def test_corpus_list_is_complete() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    found = {f"nccl-topo-xml/{p.name}" for p in (CORPUS / "nccl-topo-xml").glob("*")}
    assert found <= set(CORPUS_FILES)


@pytest.mark.parametrize("rel", [f for f in CORPUS_FILES if "graph" not in Path(f).name])
def test_corpus_topology(rel: str) -> None:
    text = corpus_text(rel)
    name = Path(rel).name
    want = CORPUS_EXPECTED[name]
    assert looks_like_nccl_topo_xml(text) and not looks_like_nccl_graph_xml(text)
    if "truncated_line" in want:
        with pytest.raises(ParseError) as info:
            parse_nccl_topo_xml(text, name)
        assert info.value.line == want["truncated_line"]
        assert "</cpu></system>" in info.value.expected
        topo = parse_nccl_topo_xml(text, name, allow_truncated=True)
        assert topo.truncated
    else:
        topo = parse_nccl_topo_xml(text, name)
        assert not topo.truncated
    assert topo.flavour == "nccl"
    assert topo.gpu_count == want["gpus"]
    assert len(topo.cpus) == want["cpus"]
    assert [n.name for n in topo.nets] == want["nets"]
    graph = build(topo, name)
    assert kinds(graph) == want["kinds"]
    assert edge_kinds(graph) == want["edges"]
    for (a, b), bw in want["values"].items():
        assert graph.edges[a, b]["bw_gbps"] == pytest.approx(bw), (a, b)


def test_corpus_graph_file() -> None:
    text = corpus_text("nccl-topo-xml/azure-ncv4-a100-pcie-graph-nccl_graph_file.xml.txt")
    assert looks_like_nccl_graph_xml(text) and not looks_like_nccl_topo_xml(text)
    graphs = parse_nccl_graph_xml(text, "ncv4-graph.xml")
    assert [(g.id, g.kind, g.pattern, g.nchannels, len(g.channels)) for g in graphs.graphs] == [
        (0, "ring", 4, 2, 2),
        (1, "tree", 1, 4, 4),
        (2, "collnet", 3, 4, 4),
    ]
    for g in graphs.graphs:
        assert (g.speed_intra, g.speed_inter, g.type_intra, g.type_inter) == (12.0, 12.0, "SYS", "PIX")
        assert (g.crossnic, g.same_channels, g.latency_inter) == (0, 0, 0.0)
    assert graphs.graphs[0].channels[1] == (("gpu", 0), ("gpu", 3), ("gpu", 2), ("gpu", 1))
    assert graphs.graphs[1].channels[3] == (("gpu", 2), ("gpu", 3), ("gpu", 0), ("gpu", 1))
    with pytest.raises(ParseError, match="<system> root element"):
        parse_nccl_topo_xml(text, "ncv4-graph.xml")


def test_a_dump_cut_inside_its_last_gpu_is_not_taken_for_a_hand_written_file() -> None:
    """Two PCIe A100 of an NCCL dump without NVLink: cut just after the last GPU's <pci> opens, before its <gpu>,
    the recovered file must not read as a provider's file whose NVLink NCCL fills in (no NVSwitch appears)."""
    name = "a100-pcie-2socket-one-gpu-each-1nic-socket0-amd-topo-file.xml"
    text = fixture_text(name)
    cut = text[: text.rindex("<gpu ")]
    recovered = parse_nccl_topo_xml(cut, allow_truncated=True)
    assert recovered.truncated
    assert "NVSwitch" not in build(recovered) and "NVSwitch" not in build(parse_fixture(name))
