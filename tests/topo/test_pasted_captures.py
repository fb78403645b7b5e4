"""Several tool outputs pasted into one file are split by content, each part read by its own parser, the CA facts
merged and disagreements named (issue 23 item 4).

Fixtures (tests/fixtures/topo/), our own, in the shapes people publish:
- ``pasted-ibstat-then-ibv_devinfo-prompts.txt``: ``root@host:~# ibstat`` then ``root@host:~# ibv_devinfo`` in one
  block (deepseek-ai/DeepEP#60 pasted ``nvidia-smi topo -mp`` and ``ibv_devinfo`` together; perplexityai/pplx-garden#2
  ``[root@01 ~/]$ ibstat`` with its prompt); ibv_devinfo, taken later, lists a RoCE CA ibstat's paste left out
  and reports mlx5_1 down where ibstat had it Active;
- ``pasted-ibdev2netdev-then-ibstat.txt``: ibdev2netdev lines, a blank line, then ibstat, no prompts
  (imbue-ai/cluster-health#4 showed ibdev2netdev and ibstat of one node together);
- ``bond-h20-matrix-ibdev2netdev-ibstat-pasted.txt``: ``nvidia-smi topo -m``, ibdev2netdev and ibstat under
  ``[user@host ~]$`` prompts (stepfun-ai/StepMesh#15, pplx-garden#2).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.detect import add_capture, load_captures
from collscope.topo.infiniband import host as ib
from collscope.topo.node import NodeCaptures
from collscope.topo.pasted import split_pasted
from tests.cli_timeout import one_error_line
from tests.corpus import CORPUS, corpus_params, skip_reason, strip_corpus_header

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "topo"
IBSTAT_DEVINFO = FIXTURES / "pasted-ibstat-then-ibv_devinfo-prompts.txt"
NETDEV_IBSTAT = FIXTURES / "pasted-ibdev2netdev-then-ibstat.txt"
BOND = FIXTURES / "bond-h20-matrix-ibdev2netdev-ibstat-pasted.txt"


def test_ibstat_then_ibv_devinfo_each_part_read_and_merged() -> None:
    captures = NodeCaptures()
    assert add_capture(captures, IBSTAT_DEVINFO.read_text(), str(IBSTAT_DEVINFO)) == "ibstat+ibv_devinfo"
    hcas = {h.name: h for h in captures.hcas}
    assert sorted(hcas) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]  # mlx5_3: only ibv_devinfo lists it
    assert hcas["mlx5_3"].ca_type == "MT4125" and hcas["mlx5_3"].ports[0].link_layer == "Ethernet"
    assert hcas["mlx5_3"].ports[0].state == "Active" and hcas["mlx5_3"].ports[0].rate_gbps is None
    assert hcas["mlx5_0"].ports[0].rate_gbps == 400  # ibstat's rate kept beside ibv_devinfo's facts
    assert hcas["mlx5_1"].ports[0].state == "Active"  # read first (ibstat), the disagreement named below
    (note,) = captures.errors
    assert note.startswith("mlx5_1 port 1 disagrees between")
    assert f"{IBSTAT_DEVINFO} (lines 2-52: ibstat)" in note and f"{IBSTAT_DEVINFO} (lines 54-128: ibv_devinfo)" in note
    assert "state 'Active' vs 'Down'" in note and "lid 218 vs 65535" in note


def test_the_cli_shows_the_disagreement_as_a_note() -> None:
    result = CliRunner().invoke(main, ["topo", "show", "--json", "--from", str(IBSTAT_DEVINFO)])
    assert result.exit_code == 0, result.output
    notes = [ln for ln in result.stderr.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and "mlx5_1 port 1 disagrees" in notes[0]
    nics = {n["name"]: n for n in json.loads(result.stdout)["nics"]}
    assert list(nics) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert nics["mlx5_3"]["ports"][0]["link_layer"] == "Ethernet" and nics["mlx5_0"]["speed_gbps"] == 400


def test_ibdev2netdev_then_ibstat_without_prompts() -> None:
    captures = load_captures([NETDEV_IBSTAT])
    assert [m.netdev for m in captures.netdevs] == ["ibp26s0", "ibp60s0", "ibp77s0"]
    assert [h.ports[0].rate_gbps for h in captures.hcas] == [400, 400, 10]
    assert captures.errors == []
    result = CliRunner().invoke(main, ["topo", "show", "--json", "--from", str(NETDEV_IBSTAT)])
    assert result.exit_code == 0, result.output
    nics = {n["name"]: n for n in json.loads(result.stdout)["nics"]}
    assert nics["mlx5_1"]["netdev"] == "ibp60s0" and nics["mlx5_1"]["speed_gbps"] == 400


def test_matrix_ibdev2netdev_ibstat_split_at_prompts() -> None:
    parts = split_pasted(BOND.read_text())
    assert parts is not None
    assert [(p.fmt, p.command) for p in parts] == [
        ("nvidia-smi-topo", "nvidia-smi topo -m"), ("ibdev2netdev", "ibdev2netdev"), ("ibstat", "ibstat")]
    assert parts[0].first_line == 2 and parts[1].text.startswith("mlx5_bond_0 port 1 ==> bond0 (Up)")


@pytest.mark.parametrize("name", ["ibstat-tabs-vpi-dualport-roce.txt", "ibv_devinfo-verbose-ndr.txt",
                                  "ibdev2netdev-plain.txt", "ibstatus-dualport-roce.txt"])
def test_one_tool_output_is_left_whole(name: str) -> None:
    text = (FIXTURES.parent / "infiniband" / name).read_text()
    assert split_pasted(text) is None


def test_markdown_fences_and_prose_kept_with_their_block() -> None:
    text = "```\n" + NETDEV_IBSTAT.read_text() + "```\n"
    parts = split_pasted(text)
    assert parts is not None and [p.fmt for p in parts] == ["ibdev2netdev", "ibstat"]
    assert parts[0].first_line == 2


def test_error_in_a_part_names_the_file_line(tmp_path: Path) -> None:
    lines = IBSTAT_DEVINFO.read_text().splitlines()
    lines.insert(59, "garbage without the shape")  # becomes line 60, inside the ibv_devinfo part
    bad = tmp_path / "node 12.txt"
    bad.write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(main, ["topo", "show", "--from", str(bad)])
    assert f"{bad}:60:" in one_error_line(result)


def test_merge_names_each_differing_ca_field() -> None:
    from collscope.topo.infiniband.merge import merge_hcas

    port = ib.IbPort(1, "Active", "LinkUp", 200.0, "InfiniBand", 5)
    a = ib.Hca("mlx5_0", "MT4123", "20.1", "0x1", (port,))
    b = ib.Hca("mlx5_0", "MT4123", "20.2", None, (ib.IbPort(1, "Active", None, 200.0, None, 5, netdev="ib0"),))
    origins: dict[str, str] = {}
    merged, notes = merge_hcas((), origins, (a,), "one")
    merged, notes = merge_hcas(merged, origins, (b,), "two")
    assert merged[0].firmware == "20.1" and merged[0].node_guid == "0x1" and merged[0].ports[0].netdev == "ib0"
    assert notes == ["mlx5_0 disagrees between one and two: firmware '20.1' vs '20.2'; kept the first "
                     "(the values read first)"]


# ------------------------------------------------------------------- real captures, pasted as people paste them
CORPUS_IBSTAT = CORPUS / "ibstat"
CORPUS_HOST_FILES = sorted(p for p in CORPUS_IBSTAT.glob("*.txt") if not p.name.startswith("ibv_devices"))


def _facts(captures: NodeCaptures) -> tuple:
    return (tuple((h.name, h.ports) for h in captures.hcas), tuple(captures.netdevs))


@pytest.mark.parametrize("path", corpus_params(CORPUS_HOST_FILES))
def test_corpus_capture_behind_a_prompt_reads_the_same(path: Path) -> None:
    """Each real ibstat/ibstatus/ibv_devinfo/ibdev2netdev capture, pasted under its prompt line and followed by an
    empty prompt, gives the same CAs and netdevs as the capture alone."""
    text = strip_corpus_header(path.read_text())
    alone, pasted = NodeCaptures(), NodeCaptures()
    add_capture(alone, text, "alone")
    tool = path.name.split("-", 1)[0]
    add_capture(pasted, f"[user@gpu-a01 ~]$ {tool}\n{text.rstrip()}\n[user@gpu-a01 ~]$\n", "pasted")
    assert _facts(pasted) == _facts(alone)


def test_corpus_ibdev2netdev_then_ibstat_pasted_together() -> None:
    netdev = CORPUS_IBSTAT / "ibdev2netdev-column-t-h100-annotated-by-author.txt"
    ibstat = CORPUS_IBSTAT / "ibstat-h100-cx7-ndr400-plus-cx6dx-roce-some-down.txt"
    if not (netdev.is_file() and ibstat.is_file()):
        pytest.skip(skip_reason(CORPUS_IBSTAT))
    texts = [strip_corpus_header(p.read_text()).rstrip() for p in (netdev, ibstat)]
    captures = NodeCaptures()
    assert add_capture(captures, texts[0] + "\n\n" + texts[1] + "\n", "paste") == "ibdev2netdev+ibstat"
    assert len(captures.hcas) == 12 and len(captures.netdevs) == 12


HOST_OUTPUTS = {
    "ibstat": FIXTURES.parent / "infiniband" / "ibstat-tabs-vpi-dualport-roce.txt",
    "ibstatus": FIXTURES.parent / "infiniband" / "ibstatus-dualport-roce.txt",
    "ibv_devinfo": FIXTURES.parent / "infiniband" / "ibv_devinfo-two-hcas-ib-roce.txt",
    "ibdev2netdev": FIXTURES.parent / "infiniband" / "ibdev2netdev-plain.txt",
    "rdma-link": FIXTURES / "rdma-link-ib-mixed-roce.txt",
}


@pytest.mark.parametrize(("first", "second"), [(a, b) for a in HOST_OUTPUTS for b in HOST_OUTPUTS if a != b])
def test_any_two_host_outputs_pasted_read_as_the_two_files(first: str, second: str, tmp_path: Path) -> None:
    """Pasted one after the other (a blank line between, no prompt), two tools' outputs give the same CAs and
    netdevs as the same two files passed on their own, and the parts are named in the order pasted."""
    texts = [HOST_OUTPUTS[name].read_text().rstrip() for name in (first, second)]
    pasted = NodeCaptures()
    assert add_capture(pasted, texts[0] + "\n\n" + texts[1] + "\n", "paste") == f"{first}+{second}"
    separate = load_captures([HOST_OUTPUTS[first], HOST_OUTPUTS[second]])
    assert _facts(pasted) == _facts(separate)
    assert len(pasted.errors) == len(separate.errors)
