"""Tests of the per-host InfiniBand parsers (ibstat, ibstatus, ibv_devinfo, ibv_devices, ibdev2netdev)."""

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
from collscope.topo.naming import natural_key
from tests.corpus import CORPUS, corpus_params, strip_corpus_header

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "infiniband"
CORPUS_IBSTAT = CORPUS / "ibstat"

PARSERS: dict[str, Callable[..., Any]] = {
    "ibstat": ib.parse_ibstat,
    "ibstatus": ib.parse_ibstatus,
    "ibv_devinfo": ib.parse_ibv_devinfo,
    "ibv_devices": ib.parse_ibv_devices,
    "ibdev2netdev": netdev.parse_ibdev2netdev,
    "ibnetdiscover": nd.parse_ibnetdiscover,
    "iblinkinfo": nd.parse_iblinkinfo,
}
SNIFFERS: dict[str, Callable[[str], bool]] = {
    "ibstat": ib.looks_like_ibstat,
    "ibstatus": ib.looks_like_ibstatus,
    "ibv_devinfo": ib.looks_like_ibv_devinfo,
    "ibv_devices": ib.looks_like_ibv_devices,
    "ibdev2netdev": netdev.looks_like_ibdev2netdev,
    "ibnetdiscover": nd.looks_like_ibnetdiscover,
    "iblinkinfo": nd.looks_like_iblinkinfo,
}



def tool_of(path: Path) -> str:
    """The tool a capture comes from, from its file name prefix (``ibstat-...``, ``ibv_devinfo-...``)."""
    return path.name.split("-", 1)[0]


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def ports(listing: ib.HcaListing) -> dict[tuple[str, int], ib.IbPort]:
    return {(h.name, p.port): p for h in listing.hcas for p in h.ports}


# ------------------------------------------------------------------------------------ own fixtures


def test_ibstat_tabs_dualport_and_roce() -> None:
    listing = ib.parse_ibstat(fixture("ibstat-tabs-vpi-dualport-roce.txt"))
    assert listing.error is None
    assert [h.name for h in listing.hcas] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_2"]  # as printed
    assert sorted((h.name for h in listing.hcas), key=natural_key) == [
        "mlx5_0",
        "mlx5_1",
        "mlx5_2",
        "mlx5_10",
    ]
    hca0 = listing.hcas[0]
    assert (hca0.ca_type, hca0.firmware, hca0.node_guid) == ("MT4123", "20.35.2000", "0x1070fd0300a1b2c0")
    p = ports(listing)
    assert p["mlx5_0", 1] == ib.IbPort(
        1, "Active", "LinkUp", 200.0, "InfiniBand", 12, sm_lid=1, port_guid="0x1070fd0300a1b2c0"
    )
    down = p["mlx5_0", 2]
    assert (down.state, down.physical_state, down.rate_gbps, down.lid, down.is_up) == (
        "Down",
        "Polling",
        10.0,
        65535,
        False,
    )
    assert p["mlx5_10", 1].state == "Initializing"
    roce = p["mlx5_2", 1]
    assert roce.is_roce and roce.is_up and roce.lid == 0 and roce.rate_gbps == 100.0
    assert not p["mlx5_1", 1].is_roce and p["mlx5_1", 1].rate_gbps == 400.0


def test_ibstat_spaces_trimmed_ibpanic() -> None:
    listing = ib.parse_ibstat(fixture("ibstat-spaces-trimmed-ibpanic.txt"))
    assert [h.name for h in listing.hcas] == ["mlx5_0", "mlx5_1"]
    assert listing.error is not None and listing.error.startswith("ibpanic:") and "'mlx5_2'" in listing.error
    assert all(h.firmware is None and h.node_guid is None and h.ca_type == "MT4124" for h in listing.hcas)
    assert [p.state for p in ports(listing).values()] == ["Active", "Armed"]


def test_ibstatus_matches_ibstat_values() -> None:
    listing = ib.parse_ibstatus(fixture("ibstatus-dualport-roce.txt"))
    assert listing.error is None
    assert [(h.name, len(h.ports)) for h in listing.hcas] == [("mlx5_0", 2), ("mlx5_1", 1)]
    p = ports(listing)
    assert (p["mlx5_0", 1].state, p["mlx5_0", 1].rate_gbps, p["mlx5_0", 1].lid) == ("Active", 200.0, 12)
    assert (p["mlx5_0", 2].state, p["mlx5_0", 2].physical_state, p["mlx5_0", 2].lid) == (
        "Down",
        "Polling",
        0xFFFF,
    )
    assert p["mlx5_1", 1].is_roce and p["mlx5_1", 1].rate_gbps == 100.0
    assert listing.hcas[0].ca_type is None  # ibstatus does not print it


def test_ibv_devinfo_plain_two_hcas() -> None:
    listing = ib.parse_ibv_devinfo(fixture("ibv_devinfo-two-hcas-ib-roce.txt"))
    assert [(h.name, h.ca_type, h.firmware, h.node_guid) for h in listing.hcas] == [
        ("mlx5_0", "MT4123", "20.35.2000", "0x1070fd0300a1b2c0"),
        ("mlx5_1", "MT4125", "22.38.1002", "0x0c42a10300d4e5f6"),
    ]
    p = ports(listing)
    assert (p["mlx5_0", 2].state, p["mlx5_0", 2].lid, p["mlx5_0", 2].rate_gbps) == ("Down", 65535, None)
    assert p["mlx5_1", 1].is_roce and p["mlx5_1", 1].physical_state is None


def test_ibv_devinfo_verbose_rate_and_phys_state() -> None:
    (hca,) = ib.parse_ibv_devinfo(fixture("ibv_devinfo-verbose-ndr.txt")).hcas
    (port,) = hca.ports
    assert (hca.name, hca.ca_type, hca.node_guid) == ("mlx5_3", "MT4129", "0xa088c20300f0e030")
    assert (port.state, port.physical_state, port.rate_gbps, port.lid, port.sm_lid) == (
        "Active",
        "LinkUp",
        400.0,
        31,
        1,
    )


def test_ibv_devices() -> None:
    assert ib.parse_ibv_devices(fixture("ibv_devices-three.txt")) == [
        ("mlx5_0", "0x1070fd0300a1b2c0"),
        ("mlx5_1", "0xa088c20300f0e010"),
        ("mlx5_bond_0", "0x0c42a10300d4e5f6"),
    ]


def test_ibdev2netdev_plain_and_merge() -> None:
    maps = netdev.parse_ibdev2netdev(fixture("ibdev2netdev-plain.txt"))
    assert [(m.ca, m.port, m.netdev, m.netdev_state) for m in maps][:2] == [
        ("mlx5_0", 1, "ib0", "Up"),
        ("mlx5_0", 2, "ib1", "Down"),
    ]
    assert all(m.pci_bus_id is None and m.port_state is None for m in maps)
    merged = netdev.merge_netdevs(ib.parse_ibstat(fixture("ibstat-tabs-vpi-dualport-roce.txt")).hcas, maps)
    assert [(h.name, [p.netdev for p in h.ports]) for h in merged] == [
        ("mlx5_0", ["ib0", "ib1"]),
        ("mlx5_1", ["ibp41s0"]),
        ("mlx5_10", ["ibp220s0"]),
        ("mlx5_2", ["ens1f0np0"]),
    ]
    assert netdev.merge_netdevs(merged, [])[0].ports[0].netdev == "ib0"  # nothing new: kept


def test_ibdev2netdev_verbose_with_vf_and_padding() -> None:
    pf, down, vf = netdev.parse_ibdev2netdev(fixture("ibdev2netdev-v-vf.txt"))
    assert (pf.pci_bus_id, pf.ca, pf.firmware, pf.port_state, pf.netdev, pf.netdev_state) == (
        "0000:41:00.0",
        "mlx5_0",
        "20.35.2000",
        "Active",
        "ib0",
        "Up",
    )
    assert pf.description is not None and pf.description.endswith("dual-port QSFP56")  # padding collapsed
    assert down.port_state == "Down"
    assert (vf.description, vf.port_state, vf.netdev) == ("(MT4124 - NA)", "Initializing", "ib2")


@pytest.mark.parametrize(
    ("raw", "state"),
    [
        ("4: ACTIVE", "Active"),
        ("PORT_ACTIVE (4)", "Active"),
        ("1: DOWN", "Down"),
        ("PORT_INIT (2)", "Initializing"),
        ("3: ARMED", "Armed"),
        ("Active", "Active"),
        ("PORT_ACTIVE_DEFER (5)", "Active/Defer"),
    ],
)
def test_state_normalisation(raw: str, state: str) -> None:
    text = f"Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t{raw}\n"
    assert ib.parse_ibstatus(text).hcas[0].ports[0].state == state


def test_guid_normalisation() -> None:
    assert ib.normalize_guid("043f:7203:00da:2130") == "0x043f720300da2130"
    assert ib.normalize_guid("0x946DAE0300CDE72C") == "0x946dae0300cde72c"
    assert ib.normalize_guid("8f10403960985") == "0x0008f10403960985"
    assert ib.normalize_guid("unknown") is None


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (ib.parse_ibstat, ""),
        (ib.parse_ibstat, "\tCA type: MT4129\n"),  # no CA header
        (ib.parse_ibstat, "CA 'mlx5_0'\n\tPort 1:\n\t\tRate: 400\n"),  # a port without State
        (ib.parse_ibstat, "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: fast\n"),
        (
            ib.parse_ibstatus,
            "Infiniband device 'mlx5_0' port 1 status:\n\tbase lid: 0xzz\n\tstate: 4: ACTIVE\n",
        ),
        (ib.parse_ibv_devinfo, "\tport:\t1\n"),
        (ib.parse_ibv_devices, "mlx5_0 0x1\n"),
        (ib.parse_ibv_devices, "    device    node GUID\n    mlx5_0    not-a-guid\n"),
        (netdev.parse_ibdev2netdev, "mlx5_0 ==> ib0\n"),
        (netdev.parse_ibdev2netdev, "# only a comment\n"),
    ],
)
def test_bad_input_raises_parse_error(parser: Callable[..., Any], text: str) -> None:
    with pytest.raises(ParseError) as info:
        parser(text, source="capture.txt")
    assert info.value.source == "capture.txt"


def test_error_only_output_is_an_empty_listing() -> None:
    listing = ib.parse_ibv_devinfo("No IB devices found\n")
    assert listing == ib.HcaListing((), "No IB devices found")


def test_records_are_frozen_and_serialisable() -> None:
    listing = ib.parse_ibstat(fixture("ibstat-spaces-trimmed-ibpanic.txt"))
    with pytest.raises(AttributeError):
        listing.hcas[0].name = "x"  # type: ignore[misc]
    assert listing.to_dict()["hcas"][0]["ports"][0]["rate_gbps"] == 200.0


# -------------------------------------------------------------------------------------- sniffers

NVIDIA_SMI_TABLE = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV18\tPXB\t0-55\t0\t\tN/A\nGPU1\tNV18\t X \tSYS\t0-55\t0\t\tN/A\n"
    "NIC0\tPXB\tSYS\t X \n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)
NCCL_XML = (
    '<system version="1">\n  <cpu numaid="0" affinity="ffff" arch="x86_64">\n'
    '    <nic>\n      <net name="mlx5_0" dev="0" speed="200000" port="1" guid="0x1"/>\n    </nic>\n'
    "  </cpu>\n</system>\n"
)


def own_fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.txt"))


@pytest.mark.parametrize("path", own_fixture_files(), ids=lambda p: p.name)
def test_each_sniffer_accepts_only_its_own_tool(path: Path) -> None:
    text = path.read_text()
    assert {name for name, sniff in SNIFFERS.items() if sniff(text)} == {tool_of(path)}


@pytest.mark.parametrize("text", [NVIDIA_SMI_TABLE, NCCL_XML, "", "hello\nworld\n"])
def test_sniffers_reject_other_formats(text: str) -> None:
    assert not any(sniff(text) for sniff in SNIFFERS.values())


def test_sniffers_reject_corpus_nvidia_smi_and_xml() -> None:
    others = sorted((CORPUS / "nvidia-smi-topo").glob("*")) + sorted((CORPUS / "nccl-topo-xml").glob("*"))
    if not others:
        pytest.skip(f"shared corpus not found at {CORPUS}")
    for path in others:
        text = strip_corpus_header(path.read_text(errors="replace"))
        assert not any(sniff(text) for sniff in SNIFFERS.values()), path.name


# ------------------------------------------------------------------------------------------ corpus

# file name -> (CA names in printed order, (CA, port) -> (state, rate_gbps, link_layer, lid), error start)
IBSTAT_FAMILY: dict[
    str, tuple[int, dict[tuple[str, int], tuple[str, float | None, str, int]], str | None]
] = {
    "ibstat-a100-azure-hdr200-failed-ibpanic-exit255.txt": (
        8,
        {
            ("mlx5_0", 1): ("Active", 200.0, "InfiniBand", 13247),
            ("mlx5_7", 1): ("Active", 200.0, "InfiniBand", 13305),
        },
        "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed",
    ),
    "ibstat-h100-cx7-ndr400-plus-cx6dx-roce-some-down.txt": (
        12,
        {
            ("mlx5_0", 1): ("Active", 400.0, "InfiniBand", 75),
            ("mlx5_1", 1): ("Active", 100.0, "Ethernet", 0),
            ("mlx5_2", 1): ("Down", 40.0, "Ethernet", 0),
            ("mlx5_9", 1): ("Active", 400.0, "InfiniBand", 771),
        },
        None,
    ),
    "ibstat-h20-cx6lx-roce-down-trimmed.txt": (
        2,
        {("mlx5_0", 1): ("Down", 40.0, "Ethernet", 0), ("mlx5_1", 1): ("Down", 40.0, "Ethernet", 0)},
        None,
    ),
    "ibstatus-a100-azure-hdr200-8x-plus-ethernet.txt": (
        9,
        {
            ("mlx5_0", 1): ("Active", 200.0, "InfiniBand", 0x33BF),
            ("mlx5_8", 1): ("Active", 40.0, "Ethernet", 0),
        },
        None,
    ),
    "ibv_devinfo-cx5-edr-ib.txt": (1, {("mlx5_0", 1): ("Active", None, "InfiniBand", 25606)}, None),
}
NETDEV_FAMILY: dict[str, tuple[int, dict[str, tuple[str, str]]]] = {
    "ibdev2netdev-column-t-h100-annotated-by-author.txt": (
        12,
        {"mlx5_0": ("ibp26s0", "Down"), "mlx5_1": ("enp27s0f0np0", "Up"), "mlx5_11": ("ibp220s0", "Down")},
    ),
    "ibdev2netdev-mixed-roce-ib-8dev.txt": (8, {"mlx5_5": ("ib0", "Up"), "mlx5_7": ("ens6f2", "Down")}),
    "ibdev2netdev-v-cx4-ib-sriov-vfs.txt": (6, {"mlx5_0": ("ib0", "Up"), "mlx5_5": ("ib5", "Down")}),
}


def corpus_files() -> list[Path]:
    return sorted(CORPUS_IBSTAT.glob("*.txt"))


def corpus_text(path: Path) -> str:
    return strip_corpus_header(path.read_text())


def test_corpus_present_or_skip() -> None:
    if not CORPUS_IBSTAT.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS_IBSTAT}")
    assert {p.name for p in corpus_files()} >= set(IBSTAT_FAMILY) | set(NETDEV_FAMILY)


@pytest.mark.parametrize("path", corpus_params(corpus_files()))
def test_corpus_file_parses_and_is_sniffed(path: Path) -> None:
    text = corpus_text(path)
    assert {name for name, sniff in SNIFFERS.items() if sniff(text)} == {tool_of(path)}
    result = PARSERS[tool_of(path)](text, source=path.name)
    if path.name in IBSTAT_FAMILY:
        count, expected, error = IBSTAT_FAMILY[path.name]
        assert len(result.hcas) == count
        got = ports(result)
        assert {
            key: (got[key].state, got[key].rate_gbps, got[key].link_layer, got[key].lid) for key in expected
        } == expected
        assert (result.error is None) if error is None else result.error.startswith(error)
    elif path.name in NETDEV_FAMILY:
        count, expected_maps = NETDEV_FAMILY[path.name]
        assert len(result) == count
        by_ca = {m.ca: (m.netdev, m.netdev_state) for m in result}
        assert {ca: by_ca[ca] for ca in expected_maps} == expected_maps
    else:
        assert path.name == "ibv_devices-cx5-single.txt"
        assert result == [("mlx5_0", "0x043f720300da2130")]


def test_corpus_h100_lexical_order_and_roce_down() -> None:
    path = CORPUS_IBSTAT / "ibstat-h100-cx7-ndr400-plus-cx6dx-roce-some-down.txt"
    if not path.exists():
        pytest.skip(f"shared corpus not found at {CORPUS_IBSTAT}")
    listing = ib.parse_ibstat(corpus_text(path))
    assert [h.name for h in listing.hcas][:5] == ["mlx5_0", "mlx5_1", "mlx5_10", "mlx5_11", "mlx5_2"]
    assert sum(p.is_roce for h in listing.hcas for p in h.ports) == 4
    assert sorted(h.name for h in listing.hcas for p in h.ports if p.is_roce and not p.is_up) == [
        "mlx5_2",
        "mlx5_7",
        "mlx5_8",
    ]
    assert {h.ca_type for h in listing.hcas} == {"MT4129", "MT4125"}


def test_corpus_ibstat_and_ibstatus_agree_on_lids() -> None:
    a = CORPUS_IBSTAT / "ibstat-a100-azure-hdr200-failed-ibpanic-exit255.txt"
    b = CORPUS_IBSTAT / "ibstatus-a100-azure-hdr200-8x-plus-ethernet.txt"
    if not (a.exists() and b.exists()):
        pytest.skip(f"shared corpus not found at {CORPUS_IBSTAT}")
    lids_a = {k: p.lid for k, p in ports(ib.parse_ibstat(corpus_text(a))).items()}
    lids_b = {k: p.lid for k, p in ports(ib.parse_ibstatus(corpus_text(b))).items()}
    assert lids_a == {k: v for k, v in lids_b.items() if k[0] != "mlx5_8"}


# -------------------------------------------------------------------------------------- hypothesis

HCA_PARSERS = [
    ib.parse_ibstat,
    ib.parse_ibstatus,
    ib.parse_ibv_devinfo,
    ib.parse_ibv_devices,
    netdev.parse_ibdev2netdev,
]
VALID_TEXTS = [p.read_text() for p in own_fixture_files()]


def only_parse_errors(parser: Callable[..., Any], text: str) -> None:
    try:
        parser(text)
    except ParseError:
        pass


@settings(max_examples=150, deadline=None)
@given(text=st.text())
def test_arbitrary_text_raises_only_parse_error(text: str) -> None:
    for parser in HCA_PARSERS:
        only_parse_errors(parser, text)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_fixtures_raise_only_parse_error(data: st.DataObject) -> None:
    text = data.draw(st.sampled_from(VALID_TEXTS))
    lines = text.splitlines(keepends=True)
    dropped = data.draw(st.sets(st.integers(0, max(len(lines) - 1, 0)), max_size=4))
    mutated = "".join(line for i, line in enumerate(lines) if i not in dropped)
    mutated = mutated[: data.draw(st.integers(0, len(mutated)))]
    inserted = data.draw(st.text(max_size=20))
    position = data.draw(st.integers(0, len(mutated)))
    mutated = mutated[:position] + inserted + mutated[position:]
    for parser in HCA_PARSERS:
        only_parse_errors(parser, mutated)
