"""Tests of the fabric parsers (ibnetdiscover topology files, iblinkinfo)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.topo.infiniband import fabric as nd
from collscope.topo.infiniband import host as ib
from collscope.topo.infiniband import netdev
from tests.corpus import CORPUS, corpus_params, strip_corpus_header

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "infiniband"
CORPUS_FABRIC = CORPUS / "ibnetdiscover"

SPINE, LEAF1, LEAF2 = "0x98039b0300a15000", "0x98039b0300a15100", "0x98039b0300a15200"
NODE01, NODE02, NODE03 = "0x1070fd0300a1c000", "0x1070fd0300a1d000", "0x1070fd0300a1e000"



def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def link_between(fabric: nd.IbFabric, a: str, a_port: int, b: str, b_port: int) -> nd.IbLink:
    for link in fabric.links:
        ends = {(link.a_guid, link.a_port), (link.b_guid, link.b_port)}
        if ends == {(a, a_port), (b, b_port)}:
            return link
    raise AssertionError(f"no link {a}[{a_port}] - {b}[{b_port}]")


# ------------------------------------------------------------------------------------ own fixtures


def test_ibnetdiscover_two_leaves_one_spine() -> None:
    fabric = nd.parse_ibnetdiscover(fixture("ibnetdiscover-2leaf-1spine-hdr.txt"))
    assert [n.guid for n in fabric.switches()] == [SPINE, LEAF1, LEAF2]
    assert [(n.name, n.nports, n.lid) for n in fabric.cas()] == [
        ("node01 mlx5_0", 2, 10), ("node02 mlx5_0", 1, 12), ("node03 mlx5_0", 1, 14)]  # fmt: skip
    assert all(n.from_record for n in fabric.nodes)
    assert fabric.switches()[0].name == "MF0;spine-01:MQM8790/U1" and fabric.switches()[0].nports == 40
    assert len(fabric.links) == 8  # every cable printed from both ends, kept once
    assert link_between(fabric, SPINE, 4, LEAF2, 40) == nd.IbLink(SPINE, 4, LEAF2, 40, "2x", "HDR", 100.0)
    assert link_between(fabric, LEAF2, 1, NODE01, 2).rate_gbps == 100.0  # 4xEDR
    assert link_between(fabric, LEAF1, 1, NODE01, 1).rate_gbps == 200.0  # 4xHDR
    assert fabric.leaf_of(NODE01) == LEAF1  # lowest port wins for the dual-homed CA
    assert fabric.leaf_of("1070fd0300a1e000") == LEAF2  # bare hex accepted
    assert fabric.leaf_of(SPINE) is None  # only defined for CAs
    assert fabric.leaf_of("0xdeadbeef") is None
    assert fabric.node(NODE02) is not None and fabric.to_dict()["links"][0]["width"] == "4x"


def test_ibnetdiscover_far_ends_without_records() -> None:
    text = fixture("ibnetdiscover-2leaf-1spine-hdr.txt")
    only_spine = text.split("\n\n")[0] + "\n\n" + text.split("\n\n")[1]  # header + the spine record
    fabric = nd.parse_ibnetdiscover(only_spine)
    leaf1 = fabric.node(LEAF1)
    assert leaf1 is not None and not leaf1.from_record and leaf1.nports == 40 and leaf1.kind == "switch"
    assert leaf1.name == "MF0;leaf-01:MQM8790/U1" and leaf1.lid == 2
    assert len(fabric.links) == 4


def test_iblinkinfo_one_leaf() -> None:
    fabric = nd.parse_iblinkinfo(fixture("iblinkinfo-one-leaf.txt"))
    assert [n.name for n in fabric.cas()] == ["node01 HCA-1", "node02 HCA-1"]
    (leaf,) = fabric.switches()
    assert (leaf.guid, leaf.lid, leaf.nports) == (LEAF1, 2, 5)
    # node04 / node05 have no block of their own (no GUID): their links are left out; port 4 is down
    assert {(lk.a_guid, lk.b_port, lk.speed, lk.rate_gbps) for lk in fabric.links} == {
        (NODE01, 1, "HDR", 200.0),
        (NODE02, 2, "EDR", 100.0),
    }
    assert fabric.leaf_of(NODE02) == LEAF1


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (nd.parse_ibnetdiscover, ""),
        (nd.parse_ibnetdiscover, "#\n# Topology file: generated on Mon\n#\n"),
        (nd.parse_ibnetdiscover, '[1]\t"H-0001"[1]\t\t# "x" lid 1 4xHDR\n'),  # port before any record
        (nd.parse_ibnetdiscover, 'Switch\t8 "S-0002"\t\t# "sw"\n[9]\t"H-0001"[1]\t\t# "x" lid 1 4xHDR\n'),
        (nd.parse_ibnetdiscover, 'Switch\t8 "S-0002"\t\t# "sw"\nthis is not a topology line\n'),
        (nd.parse_iblinkinfo, ""),
        (nd.parse_iblinkinfo, "CA: host HCA-1:\n     garbage\n"),
        (
            nd.parse_iblinkinfo,
            '  3  1[  ] ==( 4X 53.125 Gbps Active/  LinkUp)==>  1  1[  ] "h" ( )\n',
        ),  # no header
    ],
)
def test_bad_input_raises_parse_error(parser: Callable[..., Any], text: str) -> None:
    with pytest.raises(ParseError) as info:
        parser(text, source="fabric.txt")
    assert info.value.source == "fabric.txt"


def test_sniffers() -> None:
    topo = fixture("ibnetdiscover-2leaf-1spine-hdr.txt")
    links = fixture("iblinkinfo-one-leaf.txt")
    assert nd.looks_like_ibnetdiscover(topo) and not nd.looks_like_iblinkinfo(topo)
    assert nd.looks_like_iblinkinfo(links) and not nd.looks_like_ibnetdiscover(links)
    for other in FIXTURES.glob("ib[sdv]*.txt"):  # ibstat*, ibstatus*, ibdev2netdev*, ibv_*
        text = other.read_text()
        assert not nd.looks_like_ibnetdiscover(text) and not nd.looks_like_iblinkinfo(text), other.name
    assert not any(
        sniff(topo) or sniff(links) for sniff in (ib.looks_like_ibstat, netdev.looks_like_ibdev2netdev)
    )


# ------------------------------------------------------------------------------------------ corpus

# file name -> (switches, CAs, links, nodes without a record, {CA guid: leaf guid})
FABRICS: dict[str, tuple[int, int, int, int, dict[str, str | None]]] = {
    "ibnetdiscover-manpage-example-voltaire-sdr-3hops-indented.txt": (
        2,
        4,
        7,
        0,
        {"0x0008f10403960984": "0x0008f10400410015", "0x0008f10403960558": "0x005442ba00003080"},
    ),
    "ibnetdiscover-ndr-superpod-leaf-spine-EXCERPT-first-2-switches.txt": (
        10,
        35,
        67,
        43,
        {"0xe09d7303007a4bd8": "0x2c5eab0300b87b40", "0x2c5eab0300b87bd0": "0x2c5eab0300b87bc0"},
    ),
    "ibnetdiscover-gb200-single-ca-no-switch-bad.txt": (0, 1, 0, 0, {"0xb8e92403009ca838": None}),
    "iblinkinfo-v100-roce-hdr-mqm8700-single-switch-PARTIAL.txt": (
        1,
        4,
        4,
        0,
        {"0xb88303ffff7f61c4": "0x0c42a10300b95bfa", "0x0c42a10300b95c02": "0x0c42a10300b95bfa"},
    ),
}


def corpus_files() -> list[Path]:
    return sorted(CORPUS_FABRIC.glob("*.txt"))


def parse_corpus(path: Path) -> nd.IbFabric:
    text = strip_corpus_header(path.read_text())
    parser = nd.parse_iblinkinfo if path.name.startswith("iblinkinfo") else nd.parse_ibnetdiscover
    return parser(text, source=path.name)


def test_corpus_present_or_skip() -> None:
    if not CORPUS_FABRIC.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS_FABRIC}")
    assert {p.name for p in corpus_files()} >= set(FABRICS)


@pytest.mark.parametrize("path", corpus_params(corpus_files()))
def test_corpus_fabric(path: Path) -> None:
    text = strip_corpus_header(path.read_text())
    is_linkinfo = path.name.startswith("iblinkinfo")
    assert (
        nd.looks_like_iblinkinfo(text) is is_linkinfo and nd.looks_like_ibnetdiscover(text) is not is_linkinfo
    )
    fabric = parse_corpus(path)
    if path.name not in FABRICS:
        assert fabric.nodes
        return
    switches, cas, links, unrecorded, leaves = FABRICS[path.name]
    assert (len(fabric.switches()), len(fabric.cas()), len(fabric.links)) == (switches, cas, links)
    assert sum(not n.from_record for n in fabric.nodes) == unrecorded
    assert {ca: fabric.leaf_of(ca) for ca in leaves} == leaves


def test_corpus_manpage_degraded_link_and_names() -> None:
    path = CORPUS_FABRIC / "ibnetdiscover-manpage-example-voltaire-sdr-3hops-indented.txt"
    if not path.exists():
        pytest.skip(f"shared corpus not found at {CORPUS_FABRIC}")
    fabric = parse_corpus(path)
    slow = link_between(fabric, "0x005442ba00003080", 10, "0x0008f10400410015", 1)
    assert (slow.width, slow.speed, slow.rate_gbps) == ("1x", "SDR", 2.5)
    assert {link.rate_gbps for link in fabric.links} == {2.5, 10.0}
    assert [(n.name, n.nports, n.lid) for n in fabric.switches()] == [
        ("ISR9024 Voltaire", 24, 6),
        ("SW-6IB4 Voltaire", 8, 3),
    ]


def test_corpus_ndr_excerpt() -> None:
    path = CORPUS_FABRIC / "ibnetdiscover-ndr-superpod-leaf-spine-EXCERPT-first-2-switches.txt"
    if not path.exists():
        pytest.skip(f"shared corpus not found at {CORPUS_FABRIC}")
    fabric = parse_corpus(path)
    assert {(lk.width, lk.speed, lk.rate_gbps) for lk in fabric.links} == {("4x", "NDR", 400.0)}
    leaf = fabric.switches()[0]
    assert (leaf.name, leaf.nports, leaf.lid) == ("MF0;A09-P1-IBLEAF-04-04:MQM9701/U1", 65, 73)
    names = {n.name for n in fabric.cas()}
    assert {"a08-p1-dgx-04-c01 mlx5_5", "MT4129 ConnectX7   Mellanox Technologies"} <= names
    spine = fabric.node("2c5eab0300c26280")
    assert spine is not None and spine.kind == "switch" and spine.nports == 32 and not spine.from_record
    uplinks = [
        lk for lk in fabric.links if lk.a_guid == leaf.guid and fabric.node(lk.b_guid).kind == "switch"
    ]  # type: ignore[union-attr]
    assert sorted(lk.a_port for lk in uplinks) == list(range(35, 51))


def test_corpus_iblinkinfo_partial() -> None:
    path = CORPUS_FABRIC / "iblinkinfo-v100-roce-hdr-mqm8700-single-switch-PARTIAL.txt"
    if not path.exists():
        pytest.skip(f"shared corpus not found at {CORPUS_FABRIC}")
    fabric = parse_corpus(path)
    (switch,) = fabric.switches()
    assert (switch.name, switch.lid) == ("MF0;ibswitch254:MQM8700/U1", 3)
    assert sorted((lk.speed, lk.rate_gbps) for lk in fabric.links) == [("EDR", 100.0)] * 3 + [("HDR", 200.0)]


# -------------------------------------------------------------------------------------- hypothesis

VALID_TEXTS = [fixture("ibnetdiscover-2leaf-1spine-hdr.txt"), fixture("iblinkinfo-one-leaf.txt")]
PARSERS = [nd.parse_ibnetdiscover, nd.parse_iblinkinfo]


def only_parse_errors(text: str) -> None:
    for parser in PARSERS:
        try:
            parser(text)
        except ParseError:
            pass


@settings(max_examples=150, deadline=None)
@given(text=st.text())
def test_arbitrary_text_raises_only_parse_error(text: str) -> None:
    only_parse_errors(text)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_fixtures_raise_only_parse_error(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(VALID_TEXTS))
    lines = text.splitlines(keepends=True)
    dropped = data.draw(st.sets(st.integers(0, len(lines) - 1), max_size=4))
    mutated = "".join(line for i, line in enumerate(lines) if i not in dropped)
    mutated = mutated[: data.draw(st.integers(0, len(mutated)))]
    inserted = data.draw(st.text(max_size=20))
    position = data.draw(st.integers(0, len(mutated)))
    only_parse_errors(mutated[:position] + inserted + mutated[position:])
