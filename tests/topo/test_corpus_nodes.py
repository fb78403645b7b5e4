"""Real captures of many machines through detection and the model, as `topo show --from FILE` sees them.

Every corpus capture either builds a node or fails with a one-line ParseError; for most, the model's
answers (GPU/NIC counts, NVSwitch, nearest NICs and their path, warnings) are asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.errors import ParseError
from collscope.topo.detect import add_capture
from collscope.topo.node import NodeCaptures, build_node
from tests.corpus import CORPUS, corpus_params, skip_reason, strip_corpus_header

DIRS = ("nvidia-smi-topo", "ibstat", "nccl-topo-xml", "ibnetdiscover")
FILES = sorted(p for d in DIRS for p in (CORPUS / d).glob("*.txt")) if CORPUS.is_dir() else []

# file -> (format, GPUs, NICs, NVSwitch, {GPU: (nearest NICs, path)}, substrings expected in the warnings)
EXPECTED: dict[str, tuple] = {
    "h100-8gpu-nv18-12nic-numa-off-clean.txt": (
        "nvidia-smi-topo", 8, 12, True,
        {"GPU0": (["mlx5_0"], "PIX"), "GPU3": (["mlx5_5"], "PIX"), "GPU7": (["mlx5_11"], "PIX")}, []),
    "dgx1-v100-nv1-nv2-hybrid-cube-mesh-mlx5_0-spaces.txt": (
        "nvidia-smi-topo", 8, 1, False,
        {"GPU0": (["mlx5_0"], "NODE"), "GPU2": (["mlx5_0"], "PIX"), "GPU4": (["mlx5_0"], "SYS")},
        ["GPU4: nearest NIC (mlx5_0) is only reachable across the SMP interconnect", "1 usable NIC(s) for 8 GPUs"]),
    "a100-8gpu-nv12-nic0-3-nic-legend-gpu-numa-id.txt": (
        "nvidia-smi-topo", 8, 4, True,
        {"GPU0": (["mlx5_0", "mlx5_1"], "PXB"), "GPU2": (["mlx5_2", "mlx5_3"], "PXB")},
        ["GPU7: nearest NIC (mlx5_0, mlx5_1, mlx5_2, mlx5_3) is only reachable"]),
    "a100-8gpu-nv12-nic0-9-nic-legend.txt": (
        "nvidia-smi-topo", 8, 10, True, {"GPU6": (["mlx5_6", "mlx5_7"], "PXB")}, []),
    "a100-4gpu-nv12-roce-nic-legend-trailing-tabs.txt": (
        "nvidia-smi-topo", 4, 1, True, {"GPU0": (["rocep49s0"], "SYS")}, ["GPU3: nearest NIC (rocep49s0)"]),
    "polaris-a100-4gpu-nv4-2mlx5-mangled-header-spaces.txt": (
        "nvidia-smi-topo", 4, 2, False, {"GPU1": (["mlx5_1"], "PHB"), "GPU3": (["mlx5_0"], "PHB")},
        ["GPU0: nearest NIC (mlx5_0, mlx5_1)"]),
    "aws-p4d-a100-nv12-no-nic-gpu-numa-id.txt": ("nvidia-smi-topo", 8, 0, True, {"GPU0": ([], None)}, []),
    "8x-rtx4090-pcie-node-sys-no-nvlink-no-nic.txt": (
        "nvidia-smi-topo", 8, 0, False, {}, ["no NVLink between any GPUs: all 8 GPUs"]),
    "rtx-a6000-3gpu-nv4-pair-plus-node.txt": (
        "nvidia-smi-topo", 3, 0, False, {}, ["GPUs without NVLink peers: GPU2"]),
    "hgx-a100-4gpu-nv4-mlx5_0-della.txt": (
        "nvidia-smi-topo", 4, 1, False, {"GPU0": (["mlx5_0"], "NODE"), "GPU2": (["mlx5_0"], "SYS")}, []),
    "ibstat-h100-cx7-ndr400-plus-cx6dx-roce-some-down.txt": (
        "ibstat", 0, 12, False, {},
        ["mlx5_2 (port 1 Down, rate 40 Gb/s)", "mlx5_1 (front-end: Ethernet 100 Gb/s", "NCCL_IB_HCA=^=mlx5_1 "]),
    "ibstat-a100-azure-hdr200-failed-ibpanic-exit255.txt": ("ibstat", 0, 8, False, {}, []),
    "ibstatus-a100-azure-hdr200-8x-plus-ethernet.txt": (
        "ibstatus", 0, 9, False, {}, ["mlx5_8 (front-end: Ethernet 40 Gb/s", "NCCL_IB_HCA=^=mlx5_8 "]),
    "ibv_devinfo-cx5-edr-ib.txt": ("ibv_devinfo", 0, 1, False, {}, []),
    "azure-ndv5-h100-topo-nccl_topo_file.xml.txt": (
        "nccl-topo-xml", 8, 8, False, {"GPU0": (["NIC:0101:00:00.0"], "PIX")}, []),
    "azure-ndv4-a100-topo-nccl_topo_file.xml.txt": (
        "nccl-topo-xml", 8, 8, False, {"GPU7": (["NIC:0107:00:00.0", "NIC:0108:00:00.0"], "PIX")}, []),
    "azure-ncv4-a100-pcie-nvlink-pairs-topo-with-gpu-nic.xml.txt": (
        "nccl-topo-xml", 4, 1, False, {"GPU0": (["eth0"], "NODE"), "GPU1": (["eth0"], "SYS")}, []),
    "ibnetdiscover-manpage-example-voltaire-sdr-3hops-indented.txt": ("ibnetdiscover", 0, 0, False, {}, []),
    "4gpu-nv4-nic0-odd-affinity-timestamped.txt": (
        "nvidia-smi-topo", 4, 1, False, {"GPU3": (["mlx5_0"], "PHB"), "GPU0": (["mlx5_0"], "SYS")}, []),
    "h100-8gpu-nv18-vllm-collect-env-indented.txt": (
        "nvidia-smi-topo", 8, 1, True, {"GPU5": (["mlx5_0"], "SYS")}, ["1 usable NIC(s) for 8 GPUs"]),
    "h100-8gpu-nv18-rhel-ai-single-numa-no-nic.txt": ("nvidia-smi-topo", 8, 0, True, {}, []),
    "dgx1-v100-gpu-numa-id-spaces-no-nic.txt": ("nvidia-smi-topo", 8, 0, False, {}, []),
    "rtx3090-2gpu-nvlink-bridge-nv4.txt": ("nvidia-smi-topo", 2, 0, False, {}, []),
    "rtx5090-2gpu-phb-no-nvlink.txt": ("nvidia-smi-topo", 2, 0, False, {}, ["no NVLink between any GPUs"]),
    "ibdev2netdev-column-t-h100-annotated-by-author.txt": ("ibdev2netdev", 0, 12, False, {}, []),
    "ibdev2netdev-mixed-roce-ib-8dev.txt": ("ibdev2netdev", 0, 8, False, {}, []),
    "ibdev2netdev-v-cx4-ib-sriov-vfs.txt": ("ibdev2netdev", 0, 6, False, {}, ["mlx5_5 (port 1 Down)"]),
    "ibv_devices-cx5-single.txt": ("ibv_devices", 0, 1, False, {}, []),
}
FAILS = {
    "8gpu-pcie-pix-pairs-REWRAPPED-by-clang-format-comment.txt": ":",
    "h100-8gpu-nv18-12nic-numa-off-MANGLED-pixnode.txt": ":7: expected a path class",
    "h100-vm-topo-dump-host_hash-numaid-minus1-nvswitch-TRUNCATED.xml.txt": ":13: expected closing tags",
}


@pytest.mark.parametrize("path", corpus_params(FILES))
def test_corpus_capture_builds_a_node_or_fails_cleanly(path: Path) -> None:
    captures = NodeCaptures(host="corpus")
    try:
        fmt = add_capture(captures, strip_corpus_header(path.read_text()), path.name)
    except ParseError as exc:
        assert path.name in FAILS, f"unexpected ParseError: {exc}"
        assert str(exc).startswith(path.name + FAILS[path.name])
        return
    assert path.name not in FAILS, "expected this damaged capture to be rejected"
    node = build_node(captures)
    expected = EXPECTED.get(path.name)
    if expected is None:
        return
    want_fmt, n_gpus, n_nics, nvswitch, nearest, warn_parts = expected
    assert fmt == want_fmt
    assert (len(node.gpus), len(node.nics), node.has_nvswitch) == (n_gpus, n_nics, nvswitch)
    for gpu, (nics, path_class) in nearest.items():
        assert node.nearest_nics(gpu) == (nics, path_class)
    warnings = "\n".join(node.warnings())
    for part in warn_parts:
        assert part in warnings


def test_most_corpus_files_have_asserted_answers() -> None:
    if not FILES:
        pytest.skip(skip_reason())
    names = {p.name for p in FILES}
    assert len((set(EXPECTED) | set(FAILS)) & names) >= len(names) * 0.6


@pytest.mark.parametrize("name", sorted(FAILS))
def test_cli_rejects_damaged_corpus_capture_with_one_line(tmp_path: Path, name: str) -> None:
    src = next((p for p in FILES if p.name == name), None)
    if src is None:
        pytest.skip(skip_reason())
    copy = tmp_path / name
    copy.write_text(strip_corpus_header(src.read_text()))
    result = CliRunner().invoke(main, ["topo", "show", "--from", str(copy), "--json"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1 and str(copy) in result.stderr
