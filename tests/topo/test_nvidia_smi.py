"""Tests of the nvidia-smi parsers: own fixtures, the shared corpus of real captures, and hypothesis."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.topo.nvidia_smi.queries import (
    GpuInfo,
    NvLink,
    TopoMatrix,
    looks_like_gpu_query_csv,
    looks_like_nvlink_status,
    looks_like_topo_matrix,
    parse_gpu_query_csv,
    parse_nvlink_status,
    parse_topo_matrix,
)
from tests.corpus import CORPUS

NVSMI_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
NVSMI_CORPUS = CORPUS / "nvidia-smi-topo"
_CORPUS_COMMENT = re.compile(r"# (?:source|what|note):")


def _fixture(name: str) -> str:
    return (NVSMI_FIXTURES / name).read_text()


def _corpus_text(path: Path) -> str:
    """The capture with its ``# source:``/``# what:``/``# note:`` lines blanked (line numbers kept)."""
    return "\n".join("" if _CORPUS_COMMENT.match(line) else line for line in path.read_text().split("\n"))


def _assert_consistent(m: TopoMatrix) -> None:
    assert list(m.paths) == list(m.devices)
    for row, cols in m.paths.items():
        assert list(cols) == list(m.devices)
        assert cols[row] == "X"
        assert all(v in {"SYS", "NODE", "PHB", "PXB", "PIX"} or re.fullmatch(r"NV[1-9][0-9]*", v)
                   for c, v in cols.items() if c != row)
    assert set(m.gpus).isdisjoint(m.nics) and len(m.gpus) + len(m.nics) == len(m.devices)


# --- own fixtures: topo -m ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["topo-tab-4gpu-nv18-4nic-legend-gpu-numa-id.txt",
                                  "topo-spaces-4gpu-nv18-4nic-legend-gpu-numa-id.txt"])
def test_topo_nic_legend_tab_and_spaces(name: str) -> None:
    m = parse_topo_matrix(_fixture(name), name)
    _assert_consistent(m)
    assert m.gpus == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert m.nics == ("NIC0", "NIC1", "NIC2", "NIC3")
    assert [m.nic_name(n) for n in m.nics] == ["mlx5_1", "mlx5_0", "mlx5_bond_0", "rocep49s0"]
    assert m.nic_name("GPU0") == "GPU0"
    assert m.columns == ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
    assert m.paths["GPU0"]["GPU3"] == "NV18"
    assert m.paths["GPU0"]["NIC0"] == "PIX" and m.paths["NIC0"]["GPU0"] == "PIX"
    assert m.paths["GPU2"]["NIC2"] == "PXB"
    assert m.paths["GPU3"]["NIC3"] == "PHB"
    assert m.paths["NIC2"]["NIC3"] == "NODE"
    assert m.cpu_affinity == {"GPU0": "0-47,96-143", "GPU1": "0-47,96-143",
                              "GPU2": "48-95,144-191", "GPU3": "48-95,144-191"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "1", "GPU3": "1"}
    assert m.gpu_numa_id == dict.fromkeys(m.gpus, "N/A")


def test_topo_spaces_no_nic_real_gpu_numa_ids() -> None:
    m = parse_topo_matrix(_fixture("topo-spaces-4gpu-pcie-no-nic-numa-ids.txt"))
    _assert_consistent(m)
    assert len(m.gpus) == 4 and m.nics == () and m.nic_legend == {}
    assert m.paths["GPU0"]["GPU1"] == "PIX" and m.paths["GPU0"]["GPU2"] == "PXB"
    assert m.paths["GPU3"]["GPU0"] == "SYS"
    assert m.cpu_affinity["GPU3"] == "32-63"
    assert m.numa_affinity["GPU3"] == "1"
    assert m.gpu_numa_id == {"GPU0": "2", "GPU1": "2", "GPU2": "2", "GPU3": "10"}


def test_topo_old_driver_mlx5_columns_soc_becomes_sys() -> None:
    m = parse_topo_matrix(_fixture("topo-tab-2gpu-old-driver-mlx5-columns-soc.txt"))
    _assert_consistent(m)
    assert m.devices == ("GPU0", "GPU1", "mlx5_1", "mlx5_0")
    assert m.nics == ("mlx5_1", "mlx5_0")
    assert m.nic_name("mlx5_1") == "mlx5_1"
    assert m.paths["GPU0"]["GPU1"] == "SYS"
    assert m.paths["GPU0"]["mlx5_1"] == "PIX" and m.paths["GPU1"]["mlx5_0"] == "PXB"
    assert m.columns == ("CPU Affinity",)
    assert m.cpu_affinity == {"GPU0": "0-11,24-35", "GPU1": "12-23,36-47"}
    assert m.numa_affinity == {} and m.gpu_numa_id == {}


def test_topo_without_affinity_columns_or_legend() -> None:
    m = parse_topo_matrix(_fixture("topo-tab-2gpu-nv2-no-affinity-no-legend.txt"))
    assert m.devices == ("GPU0", "GPU1")
    assert m.paths == {"GPU0": {"GPU0": "X", "GPU1": "NV2"}, "GPU1": {"GPU0": "NV2", "GPU1": "X"}}
    assert m.columns == () and m.cpu_affinity == {} and m.numa_affinity == {} and m.gpu_numa_id == {}


@pytest.mark.parametrize("name", ["topo-indented-2gpu-nv6-empty-cpu-affinity.txt",
                                  "topo-spaces-2gpu-nv6-empty-cpu-affinity.txt"])
def test_topo_empty_cpu_affinity_indented_and_spaces(name: str) -> None:
    m = parse_topo_matrix(_fixture(name))
    _assert_consistent(m)
    assert m.gpus == ("GPU0", "GPU1") and m.nics == ("NIC0",)
    assert m.nic_name("NIC0") == "mlx5_2"
    assert m.paths["GPU0"]["GPU1"] == "NV6" and m.paths["NIC0"]["GPU1"] == "PHB"
    assert m.cpu_affinity == {"GPU0": "", "GPU1": ""}
    assert m.numa_affinity == {"GPU0": "0,3-9,11-17", "GPU1": "0,3-9,11-17"}
    assert m.gpu_numa_id == {"GPU0": "N/A", "GPU1": "N/A"}


@pytest.mark.parametrize(("name", "line", "found"), [
    ("topo-damaged-missing-tab-line3.txt", 3, "NV18NODE"),
    ("topo-damaged-truncated-at-line5.txt", 5, None),
    ("topo-damaged-shifted-row-line4.txt", 4, None),
])
def test_topo_damaged_fixture_names_the_line(name: str, line: int, found: str | None) -> None:
    with pytest.raises(ParseError) as info:
        parse_topo_matrix(_fixture(name), name)
    assert info.value.line == line
    assert info.value.source == name
    if found is not None:
        assert info.value.found == found
    assert f"{name}:{line}:" in str(info.value)


@pytest.mark.parametrize(("text", "what"), [
    ("", "header"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tNV4\tNV4\n", "diagonal"),
    ("\tGPU0\tGPU1\nGPU0\tNV4\t X \nGPU1\tNV4\t X \n", "diagonal"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU0\t X \tNV4\nGPU1\tNV4\t X \n", "again"),
    ("\tGPU0\tGPU1\nGPU0\t X \tFOO\nGPU1\tNV4\t X \n", "path class"),
    ("\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV4\t X \n", "2 path values"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\tSYS\nGPU1\tNV4\t X \t0-7\n", "CPU Affinity"),
    ("\tGPU0\tNIC0\tCPU Affinity\nGPU0\t X \tSYS\t0-7\nNIC0\tSYS\t X \t0-7\n", "NIC row"),
    ("\tGPU0\tNIC0\nGPU0\t X \tSYS\nNIC0\tSYS\t X \tSYS\n", "nothing after"),
    ("\tGPU0\tNIC0\nGPU0\t X \tSYS\nNIC0\tSYS\t X \n\nNIC Legend:\n\n  NIC7: mlx5_7\n", "NIC from"),
    ("\tGPU0\tGPU0\nGPU0\t X \tX\n", "once"),
])
def test_topo_rejects_malformed(text: str, what: str) -> None:
    with pytest.raises(ParseError, match=what):
        parse_topo_matrix(text)


def test_topo_single_gpu_and_crlf() -> None:
    m = parse_topo_matrix("\tGPU0\tCPU Affinity\tNUMA Affinity\r\nGPU0\t X \t0-15\tN/A\r\n")
    assert m.devices == ("GPU0",) and m.paths == {"GPU0": {"GPU0": "X"}}
    assert m.cpu_affinity == {"GPU0": "0-15"} and m.numa_affinity == {"GPU0": "N/A"}


def test_topo_to_dict_is_plain_data() -> None:
    d = parse_topo_matrix(_fixture("topo-tab-2gpu-nv2-no-affinity-no-legend.txt")).to_dict()
    assert d["devices"] == ["GPU0", "GPU1"]
    assert d["paths"] == {"GPU0": {"GPU0": "X", "GPU1": "NV2"}, "GPU1": {"GPU0": "NV2", "GPU1": "X"}}


# --- shared corpus of real captures ------------------------------------------------------------------

# filename -> (GPU count, NIC names in column order, {(row, col): path class}, {GPU0 extra values}) or
# the line number of the ParseError the damaged copy must raise.
CORPUS_EXPECTED: dict[str, tuple[int, list[str], dict[tuple[str, str], str], dict[str, str]] | int] = {
    "4gpu-nv4-nic0-odd-affinity-timestamped.txt": (
        4, ["mlx5_0"], {("GPU0", "GPU3"): "NV4", ("GPU3", "NIC0"): "PHB", ("NIC0", "GPU0"): "SYS"},
        {"cpu": "0,64", "numa": "0-3"}),
    "8gpu-pcie-pix-pairs-REWRAPPED-by-clang-format-comment.txt": 3,
    "8x-rtx4090-pcie-node-sys-no-nvlink-no-nic.txt": (
        8, [], {("GPU0", "GPU3"): "NODE", ("GPU0", "GPU4"): "SYS", ("GPU7", "GPU4"): "NODE"},
        {"cpu": "0-63,128-191", "numa": "0"}),
    "a100-4gpu-nv12-roce-nic-legend-trailing-tabs.txt": (
        4, ["rocep49s0"], {("GPU0", "GPU1"): "NV12", ("NIC0", "GPU3"): "SYS"},
        {"cpu": "32-63,96-127", "numa": "1", "gpu_numa": "N/A"}),
    "a100-8gpu-nv12-nic0-3-nic-legend-gpu-numa-id.txt": (
        8, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"],
        {("GPU0", "NIC1"): "PXB", ("NIC2", "NIC3"): "PIX", ("GPU4", "NIC0"): "SYS"},
        {"cpu": "0-31,64-95", "numa": "0", "gpu_numa": "N/A"}),
    "a100-8gpu-nv12-nic0-9-nic-legend.txt": (
        8, [f"mlx5_{i}" for i in range(10)],
        {("GPU6", "NIC7"): "PXB", ("NIC8", "NIC9"): "PIX", ("GPU7", "GPU0"): "NV12"},
        {"cpu": "48-63,176-191", "numa": "3"}),
    "aws-p4d-a100-nv12-no-nic-gpu-numa-id.txt": (
        8, [], {("GPU0", "GPU7"): "NV12"}, {"cpu": "0-23,48-71", "numa": "0", "gpu_numa": "N/A"}),
    "dgx1-v100-gpu-numa-id-spaces-no-nic.txt": (
        8, [], {("GPU0", "GPU1"): "NV1", ("GPU0", "GPU3"): "NV2", ("GPU0", "GPU5"): "SYS"},
        {"cpu": "0-19,40-59", "numa": "0", "gpu_numa": "N/A"}),
    "dgx1-v100-nv1-nv2-hybrid-cube-mesh-mlx5_0-spaces.txt": (
        8, ["mlx5_0"], {("GPU2", "mlx5_0"): "PIX", ("GPU0", "mlx5_0"): "NODE", ("GPU7", "GPU3"): "NV1"},
        {"cpu": "0-11,24-35"}),
    "h100-8gpu-nv18-12nic-numa-off-MANGLED-pixnode.txt": 9,
    "h100-8gpu-nv18-12nic-numa-off-clean.txt": (
        8, [f"mlx5_{i}" for i in range(12)],
        {("GPU3", "NIC5"): "PIX", ("GPU7", "NIC11"): "PIX", ("NIC9", "NIC10"): "PIX",
         ("GPU0", "NIC1"): "NODE"},
        {"cpu": "0-191", "numa": "0", "gpu_numa": "N/A"}),
    "h100-8gpu-nv18-rhel-ai-single-numa-no-nic.txt": (
        8, [], {("GPU0", "GPU7"): "NV18"}, {"cpu": "0-63", "numa": "0", "gpu_numa": "N/A"}),
    "h100-8gpu-nv18-vllm-collect-env-indented.txt": (
        8, ["mlx5_0"], {("GPU4", "GPU5"): "NV18", ("NIC0", "GPU7"): "SYS"},
        {"cpu": "0-103", "numa": "0", "gpu_numa": "N/A"}),
    "hgx-a100-4gpu-nv4-mlx5_0-della.txt": (
        4, ["mlx5_0"], {("GPU1", "mlx5_0"): "NODE", ("mlx5_0", "GPU3"): "SYS"}, {"cpu": "0-23", "numa": "0"}),
    "polaris-a100-4gpu-nv4-2mlx5-mangled-header-spaces.txt": (
        4, ["mlx5_0", "mlx5_1"],
        {("GPU1", "mlx5_1"): "PHB", ("GPU3", "mlx5_0"): "PHB", ("mlx5_0", "mlx5_1"): "SYS"},
        {"cpu": "24-31,56-63", "numa": "3"}),
    "rtx-a6000-3gpu-nv4-pair-plus-node.txt": (
        3, [], {("GPU0", "GPU1"): "NV4", ("GPU2", "GPU0"): "NODE"}, {"cpu": "0-31,64-95", "numa": "0"}),
    "rtx3090-2gpu-nvlink-bridge-nv4.txt": (
        2, [], {("GPU1", "GPU0"): "NV4"}, {"cpu": "0-23", "numa": "0", "gpu_numa": "N/A"}),
    "rtx5090-2gpu-phb-no-nvlink.txt": (
        2, [], {("GPU0", "GPU1"): "PHB"}, {"cpu": "0-63", "numa": "0", "gpu_numa": "N/A"}),
}

_CORPUS_FILES = sorted(NVSMI_CORPUS.glob("*.txt")) if NVSMI_CORPUS.is_dir() else []


@pytest.mark.parametrize("path", _CORPUS_FILES or [None], ids=lambda p: p.name if p else "no-corpus")
def test_corpus_topo_parses_or_raises_parse_error(path: Path | None) -> None:
    if path is None:
        pytest.skip(f"shared corpus not found at {NVSMI_CORPUS}")
    text = _corpus_text(path)
    expected = CORPUS_EXPECTED.get(path.name)
    try:
        m = parse_topo_matrix(text, path.name)
    except ParseError as e:
        assert e.source == path.name
        if expected is not None:
            assert expected == e.line, f"unexpected ParseError: {e}"
        return
    _assert_consistent(m)
    if expected is None:
        return
    assert not isinstance(expected, int), f"{path.name} should have failed at line {expected}"
    n_gpus, nic_names, some_paths, gpu0 = expected
    assert len(m.gpus) == n_gpus
    assert [m.nic_name(n) for n in m.nics] == nic_names
    for (a, b), cls in some_paths.items():
        assert m.paths[a][b] == cls, (a, b)
    assert m.cpu_affinity.get("GPU0") == gpu0.get("cpu")
    assert m.numa_affinity.get("GPU0") == gpu0.get("numa")
    assert m.gpu_numa_id.get("GPU0") == gpu0.get("gpu_numa")
    assert len(m.cpu_affinity) == n_gpus
    assert looks_like_topo_matrix(text)


def test_corpus_is_covered_by_expectations() -> None:
    if not _CORPUS_FILES:
        pytest.skip(f"shared corpus not found at {NVSMI_CORPUS}")
    covered = sum(p.name in CORPUS_EXPECTED for p in _CORPUS_FILES)
    assert covered >= 0.8 * len(_CORPUS_FILES)


# --- query-gpu CSV and nvlink -s ---------------------------------------------------------------------

def test_query_csv_h100_with_header() -> None:
    gpus = parse_gpu_query_csv(_fixture("query-gpu-h100x8.csv"))
    assert len(gpus) == 8
    assert gpus[0] == GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0",
                              pcie_gen_max=5, pcie_width_max=16)
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[7].pci_bus_id == "00000000:DB:00.0"
    assert all(g.pcie_gen_max == 5 and g.pcie_width_max == 16 for g in gpus)
    assert gpus[3].to_dict()["pcie_width_max"] == 16


def test_query_csv_a100_noheader_not_available_is_none() -> None:
    gpus = parse_gpu_query_csv(_fixture("query-gpu-a100-vm-noheader-nounits.csv"))
    assert [(g.index, g.pcie_gen_max, g.pcie_width_max) for g in gpus] == [(0, None, None), (1, 4, None)]
    assert gpus[1].name == "NVIDIA A100-SXM4-40GB"


def test_query_csv_header_by_name_with_units_and_extra_columns() -> None:
    text = ("pci.bus_id, index, memory.total [MiB], name\n"
            "00000000:07:00.0, 1, 81559 MiB, NVIDIA A100-SXM4-80GB\n")
    (g,) = parse_gpu_query_csv(text)
    assert (g.index, g.pci_bus_id, g.name, g.pcie_gen_max, g.pcie_width_max) == (
        1, "00000000:07:00.0", "NVIDIA A100-SXM4-80GB", None, None)
    assert parse_gpu_query_csv("index, name, pci.bus_id\n") == []


@pytest.mark.parametrize(("text", "line"), [
    ("", None),
    ("No devices were found\n", 1),
    ("index, name, pci.bus_id, pcie.link.gen.max, pcie.link.width.max\n0, H100, 00000000:18:00.0, 5\n", 2),
    ("0, NVIDIA H100, 00000000:18:00.0, five, 16\n", 1),
    ("0, NVIDIA H100, not-a-bus-id, 5, 16\n", 1),
    ("x, NVIDIA H100, 00000000:18:00.0, 5, 16\n", 1),
    ("0, NVIDIA H100, 00000000:18:00.0, 5, 16\n0, NVIDIA H100, 00000000:2A:00.0, 5, 16\n", None),
])
def test_query_csv_rejects(text: str, line: int | None) -> None:
    with pytest.raises(ParseError) as info:
        parse_gpu_query_csv(text, "q.csv")
    assert info.value.line == line


def test_nvlink_h100_18_links() -> None:
    links = parse_nvlink_status(_fixture("nvlink-s-h100x8.txt"))
    assert len(links) == 8 * 18
    assert links[0] == NvLink(gpu_index=0, link=0, speed_gbps=26.562, active=True)
    assert {lk.gpu_index for lk in links} == set(range(8))
    assert all(lk.active and lk.speed_gbps == pytest.approx(26.562) for lk in links)
    assert links[-1].link == 17 and links[-1].to_dict()["gpu_index"] == 7


def test_nvlink_inactive_and_notice() -> None:
    links = parse_nvlink_status(_fixture("nvlink-s-a100-some-inactive.txt"))
    assert len(links) == 24
    gpu1 = [lk for lk in links if lk.gpu_index == 1]
    assert sum(lk.active for lk in gpu1) == 8
    assert gpu1[-1] == NvLink(gpu_index=1, link=11, speed_gbps=None, active=False)
    assert gpu1[0].speed_gbps == 25.0
    assert not any(lk.gpu_index == 2 for lk in links)


@pytest.mark.parametrize(("text", "line"), [
    ("\t Link 0: 26.562 GB/s\n", 1),
    ("GPU 0: H100\n\t Link 0: fast\n", 2),
    ("GPU 0: H100\n\t Link 0: 26.562 GB/s\n\t Link 0: 26.562 GB/s\n", 3),
    ("GPU 0: H100\nsomething else\n", 2),
])
def test_nvlink_rejects(text: str, line: int) -> None:
    with pytest.raises(ParseError) as info:
        parse_nvlink_status(text)
    assert info.value.line == line


# --- sniffers ------------------------------------------------------------------------------------------

_ALL_FIXTURES = sorted(p.name for p in NVSMI_FIXTURES.iterdir())
_OTHER_FORMATS = [
    "CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Active\n\t\tRate: 200\n",
    '<system version="1">\n  <cpu numaid="0" affinity="ffff">\n    <pci busid="0000:18:00.0"/>\n',
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5c3f9a2e-8d41-4b7a-9e0c-1f2d3a4b5c6d)\n",
    "#  out-of-place  in-place\n#  size  count  type  redop  root  time  algbw  busbw\n",
    "",
]


@pytest.mark.parametrize("name", _ALL_FIXTURES)
def test_sniffers_recognise_only_their_format(name: str) -> None:
    text = _fixture(name)
    kind = name.split("-")[0]
    assert looks_like_gpu_query_csv(text) == (kind == "query")
    assert looks_like_nvlink_status(text) == (kind == "nvlink")
    if kind != "topo":
        assert not looks_like_topo_matrix(text)
    elif "damaged" not in name:
        assert looks_like_topo_matrix(text)


@pytest.mark.parametrize("text", _OTHER_FORMATS)
def test_sniffers_reject_other_formats(text: str) -> None:
    assert not looks_like_topo_matrix(text)
    assert not looks_like_gpu_query_csv(text)
    assert not looks_like_nvlink_status(text)


# --- hypothesis: only ParseError, whatever the input ------------------------------------------------

_PARSERS = (parse_topo_matrix, parse_gpu_query_csv, parse_nvlink_status)
_SNIFFERS = (looks_like_topo_matrix, looks_like_gpu_query_csv, looks_like_nvlink_status)


def _only_parse_errors(text: str) -> None:
    for parse in _PARSERS:
        try:
            parse(text)
        except ParseError:
            pass
    for sniff in _SNIFFERS:
        assert isinstance(sniff(text), bool)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parsers_raise_only_parse_error_on_any_text(text: str) -> None:
    _only_parse_errors(text)


_TABLE_ALPHABET = st.sampled_from(["\t", " ", "  ", "\n", " X ", "GPU0", "GPU1", "NIC0", "NV4", "SYS", "PIX",
                                   "CPU Affinity", "NUMA", "Affinity", "GPU NUMA ID", "0-7", "N/A", ",",
                                   "Link 0: 26.562 GB/s", "GPU 0: H100", "NIC Legend:", "NIC0: mlx5_0",
                                   "00000000:18:00.0", "[N/A]", "5", "index", "pci.bus_id"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_TABLE_ALPHABET, max_size=60).map("".join))
def test_parsers_raise_only_parse_error_on_table_like_text(text: str) -> None:
    _only_parse_errors(text)


_MUTATION_SOURCES = ["topo-tab-4gpu-nv18-4nic-legend-gpu-numa-id.txt",
                     "topo-spaces-2gpu-nv6-empty-cpu-affinity.txt",
                     "query-gpu-h100x8.csv", "nvlink-s-a100-some-inactive.txt"]


@st.composite
def _mutated_fixture(draw: st.DrawFn) -> tuple[str, str]:
    name = draw(st.sampled_from(_MUTATION_SOURCES))
    lines = _fixture(name).splitlines()
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "tabs", "cut"]))
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "tabs":
            lines[i] = lines[i].replace("\t", draw(st.sampled_from([" ", "  ", "    "])))
        else:
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    if draw(st.booleans()):
        lines = [line.replace("\t", " ") for line in lines]
    return name, "\n".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_fixture())
def test_parsers_raise_only_parse_error_on_mutated_fixtures(case: tuple[str, str]) -> None:
    name, text = case
    _only_parse_errors(text)
    if not name.startswith("topo-"):
        return
    try:
        m = parse_topo_matrix(text)
    except ParseError:
        return
    # Whatever survived the damage is either rejected or read into the right cells: never shifted.
    _assert_consistent(m)
    original = parse_topo_matrix(_fixture(name))
    assert m.devices == original.devices
    assert m.paths == original.paths
    for got, want in [(m.cpu_affinity, original.cpu_affinity), (m.numa_affinity, original.numa_affinity),
                      (m.gpu_numa_id, original.gpu_numa_id)]:
        assert all(want[gpu].startswith(value) for gpu, value in got.items())
