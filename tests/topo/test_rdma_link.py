"""``rdma link`` (iproute2) read into the same CA/port records as ibstat and ibdev2netdev (issue 23 item 4).

Fixtures (tests/fixtures/topo/rdma-link-*), our own, in the shapes people publish:
- ``rdma-link-ib-mixed-roce.txt``: IB ports with subnet_prefix/lid/sm_lid/lmc (some DOWN/DISABLED, one INIT, one
  without netdev, as when IPoIB is not loaded) beside RoCE ports (no LID fields, ``netdev ens2f0np0``)
  (openshift/sriov-network-operator#635);
- ``rdma-link-roce-prompt-trailing-space.txt``: the shell prompt line kept above and below, a trailing blank on
  every line, a soft-RoCE ``rxe`` device (deepseek-ai/3FS#263, #283);
- ``rdma-link-old-iproute2.txt``: the first releases' ``1/1: mlx5_0/1: ...`` lines (iproute2 rdma/link.c history);
- ``rdma-link-details-caps.txt``: ``rdma -d link`` (``netdev_index`` and a ``caps: <...>`` line);
- ``rdma-link-j.json`` / ``rdma-link-jp-pretty-old-ifname.json``: ``rdma -j link`` and ``-j -p`` (the first
  releases' ``"ifname": "mlx5_0/1"``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ParseError
from collscope.topo.detect import detect_format, load_captures
from collscope.topo.infiniband.rdma_link import looks_like_rdma_link, parse_rdma_link
from tests.cli_timeout import one_error_line

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
RDMA_LINK_FILES = sorted(FIXTURES.glob("rdma-link-*"))


def ports(path: Path) -> dict[tuple[str, int], tuple]:
    captures = load_captures([path])
    return {(h.name, p.port): (p.state, p.physical_state, p.link_layer, p.lid, p.netdev)
            for h in captures.hcas for p in h.ports}


@pytest.mark.parametrize("path", RDMA_LINK_FILES, ids=lambda p: p.name)
def test_every_rdma_link_shape_is_detected_and_read(path: Path) -> None:
    text = path.read_text()
    assert detect_format(text) in ("rdma-link", None)  # None: the prompt line first, split off (test below)
    assert ports(path), path.name


def test_ib_and_roce_ports_state_lid_netdev() -> None:
    got = ports(FIXTURES / "rdma-link-ib-mixed-roce.txt")
    assert got == {
        ("mlx5_0", 1): ("Active", "LinkUp", "InfiniBand", 41, "ibp24s0"),
        ("mlx5_1", 1): ("Down", "Disabled", "InfiniBand", 65535, "ibp41s0"),
        ("mlx5_2", 1): ("Active", "LinkUp", "InfiniBand", 58, None),
        ("mlx5_3", 1): ("Initializing", "LinkUp", "InfiniBand", 65535, "ibp92s0"),
        ("mlx5_4", 1): ("Active", "LinkUp", "Ethernet", None, "ens2f0np0"),
        ("mlx5_5", 1): ("Down", "Disabled", "Ethernet", None, "ens2f1np1"),
    }


def test_prompt_lines_and_trailing_blanks() -> None:
    got = ports(FIXTURES / "rdma-link-roce-prompt-trailing-space.txt")
    assert got == {("mlx5_0", 1): ("Active", "LinkUp", "Ethernet", None, "ens1f0np0"),
                   ("mlx5_1", 1): ("Active", "LinkUp", "Ethernet", None, "ens1f1np1"),
                   ("rxe_eth2", 1): ("Active", "LinkUp", "Ethernet", None, "eth2")}


def test_first_release_lines_group_ports_of_one_device() -> None:
    listing = parse_rdma_link((FIXTURES / "rdma-link-old-iproute2.txt").read_text())
    assert [h.name for h in listing.hcas] == ["mlx5_0", "mlx5_1"]
    dual = listing.hcas[1]
    assert [(p.port, p.state, p.physical_state, p.link_layer, p.netdev) for p in dual.ports] == [
        (1, "Down", "Polling", "InfiniBand", "ib1"), (2, "Active", "LinkUp", "Ethernet", "enp5s0f1")]


def test_details_caps_line_and_netdev_index() -> None:
    got = ports(FIXTURES / "rdma-link-details-caps.txt")
    assert got == {("mlx5_0", 1): ("Active", "LinkUp", "InfiniBand", 12, "ibs10"),
                   ("mlx5_1", 1): ("Active", "LinkUp", "Ethernet", None, "enp65s0f0np0")}


def test_json_compact_and_pretty_with_old_ifname() -> None:
    compact = ports(FIXTURES / "rdma-link-j.json")
    assert compact[("mlx5_1", 1)] == ("Down", "Polling", "InfiniBand", 65535, "ibp13s0")
    assert compact[("mlx5_bond_0", 1)] == ("Active", "LinkUp", "Ethernet", None, "bond0")
    pretty = ports(FIXTURES / "rdma-link-jp-pretty-old-ifname.json")
    assert pretty == {("mlx5_0", 1): ("Active", "LinkUp", "InfiniBand", 21, None),
                      ("mlx5_1", 1): ("Down", "Disabled", "Ethernet", None, "enp134s0f1")}


def test_rdma_link_feeds_the_same_nic_records_as_ibstat(tmp_path: Path) -> None:
    """rdma link's netdevs join ibstat's rates in the NIC records of ``topo show --json``."""
    result = CliRunner().invoke(main, ["topo", "show", "--json", "--from",
                                       str(FIXTURES / "pasted-ibdev2netdev-then-ibstat.txt"),
                                       "--from", str(FIXTURES / "rdma-link-cx7-node12.txt")])
    assert result.exit_code == 0, result.output
    nics = {n["name"]: n for n in json.loads(result.stdout)["nics"]}
    assert nics["mlx5_0"]["ports"][0]["rate_gbps"] == 400 and nics["mlx5_0"]["ports"][0]["netdev"] == "ibp26s0"
    assert nics["mlx5_3"]["ports"][0]["netdev"] == "enp157s0f0np0"  # only rdma link knows mlx5_3
    assert nics["mlx5_3"]["ports"][0]["link_layer"] == "Ethernet"
    assert nics["mlx5_2"]["role"] == "down"


@pytest.mark.parametrize(("text", "line", "expected"), [
    ("link mlx5_0/1 state ACTIVE physical_state LINK_UP\nlink mlx5_1/1 state\n", 2, "'key value' pairs"),
    ("link mlx5_0/1 lid x state ACTIVE\n", 1, "a decimal number after 'lid'"),
    ("link mlx5_0/1 physical_state LINK_UP netdev ib0\n", 1, "a 'state' for mlx5_0/1"),
    ("link mlx5_0/1 state ACTIVE\nmlx5_1 1 ACTIVE\n", 2, "an 'rdma link' line"),
])
def test_damaged_lines_name_the_line(text: str, line: int, expected: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_rdma_link(text, "rdma.txt")
    assert err.value.line == line and expected in err.value.expected


@pytest.mark.parametrize("text", ['[{"ifname": "mlx5_0", "state": "ACTIVE"}]',
                                  '[{"port": 1, "state": "ACTIVE"}]', '[]', '[{"ifname": "mlx5_0", "port": 1'])
def test_damaged_json_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_rdma_link(text, "rdma.json")


def test_cli_names_file_and_line_of_a_damaged_rdma_link(tmp_path: Path) -> None:
    bad = tmp_path / "rdma link.txt"
    bad.write_text("link mlx5_0/1 state ACTIVE physical_state LINK_UP\nlink mlx5_1/1 state ACTIVE lid\n")
    result = CliRunner().invoke(main, ["topo", "show", "--from", str(bad)])
    assert f"{bad}:2:" in one_error_line(result)


def test_sniffer_is_linear_on_long_lines() -> None:
    line = "link mlx5_0/1 " + "state " * 20_000 + "x" * 40_000
    start = time.monotonic()
    assert looks_like_rdma_link(line) in (True, False)
    with pytest.raises(ParseError):
        parse_rdma_link(line)
    assert time.monotonic() - start < 2.0


def test_not_rdma_link() -> None:
    assert not looks_like_rdma_link("mlx5_0 port 1 ==> ib0 (Up)\n")
    assert not looks_like_rdma_link('[{"ifname": "eth0", "operstate": "UP"}]')
    assert not looks_like_rdma_link("CA 'mlx5_0'\n\tCA type: MT4129\n")


OTHER_CAPTURES = sorted(p for d in ("infiniband", "nvidia-smi", "nccl-xml", "netif")
                        for p in (FIXTURES.parent / d).glob("*") if p.is_file())


@pytest.mark.parametrize("path", OTHER_CAPTURES, ids=lambda p: p.name)
def test_no_other_capture_looks_like_rdma_link(path: Path) -> None:
    assert not looks_like_rdma_link(path.read_text(errors="replace"))
