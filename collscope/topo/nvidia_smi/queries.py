"""Parsers for nvidia-smi outputs: pure functions from captured text to typed records.

* ``nvidia-smi topo -m`` -> :class:`TopoMatrix` (:func:`parse_topo_matrix`, in :mod:`.nvidia_smi_matrix`)
* ``nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max --format=csv``
  (with or without ``noheader`` / ``nounits``) -> list of :class:`GpuInfo`
* ``nvidia-smi nvlink -s`` -> list of :class:`NvLink`

The ``looks_like_*`` sniffers are cheap content checks for format detection; they do not validate.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from collscope.errors import ParseError
from collscope.topo.nvidia_smi.matrix import PATH_CLASSES, TopoMatrix, looks_like_topo_matrix, parse_topo_matrix

__all__ = [
    "PATH_CLASSES",
    "GPU_QUERY_FIELDS",
    "TopoMatrix",
    "GpuInfo",
    "NvLink",
    "parse_topo_matrix",
    "parse_gpu_query_csv",
    "parse_nvlink_status",
    "looks_like_topo_matrix",
    "looks_like_gpu_query_csv",
    "looks_like_nvlink_status",
]

GPU_QUERY_FIELDS = ("index", "name", "pci.bus_id", "pcie.link.gen.max", "pcie.link.width.max")
"""The ``--query-gpu`` fields :func:`parse_gpu_query_csv` reads, in the order a ``noheader`` run prints."""

NOT_AVAILABLE = re.compile(r"\[?(?:N/A|Not Supported|Unknown Error|Insufficient Permissions)\]?", re.I)
BUS_ID = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")
_UINT = re.compile(r"[0-9]+")
_UNIT_SUFFIX = re.compile(r"\s*\[[^\]]*\]\s*$")
_CSV_ROW = re.compile(rf"[ \t]*[0-9]+[ \t]*,[^,\n]*,[ \t]*{BUS_ID.pattern}[ \t]*(?:,|$)")
_NVLINK_GPU = re.compile(r"GPU\s+([0-9]+)\s*:\s*(.*)")
_NVLINK_LINK = re.compile(r"Link\s+([0-9]+)\s*:\s*(.*?)")
_NVLINK_SPEED = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*GB/s")
_NVLINK_NOTICE = re.compile(r"(?i).*(unable to retrieve nvlink|links are inactive|not supported).*")
_SNIFF_NVLINK = re.compile(r"^[ \t]*Link [0-9]+: (?:<inactive>|[0-9.]+ GB/s)[ \t]*$", re.MULTILINE)
_SNIFF_NVLINK_GPU = re.compile(r"^GPU [0-9]+: ", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU row of ``nvidia-smi --query-gpu=...``."""

    index: int
    """nvidia-smi's GPU index (the ``GPU<n>`` of ``topo -m``)."""
    name: str
    """Product name as printed, e.g. ``NVIDIA H100 80GB HBM3``."""
    pci_bus_id: str
    """PCI bus id as printed, e.g. ``00000000:18:00.0``."""
    pcie_gen_max: int | None
    """Maximum PCIe generation; ``None`` when nvidia-smi reports ``[N/A]`` / ``[Not Supported]``."""
    pcie_width_max: int | None
    """Maximum PCIe link width in lanes; ``None`` when not reported."""

    def to_dict(self) -> dict[str, object]:
        """The fields as a plain dict (for pandas)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class NvLink:
    """One NVLink of one GPU from ``nvidia-smi nvlink -s``."""

    gpu_index: int
    """nvidia-smi's GPU index."""
    link: int
    """Link number on that GPU."""
    speed_gbps: float | None
    """Per-link speed in GB/s as printed (decimal, per direction); ``None`` when inactive."""
    active: bool
    """False for ``<inactive>`` links."""

    def to_dict(self) -> dict[str, object]:
        """The fields as a plain dict (for pandas)."""
        return dataclasses.asdict(self)


def looks_like_gpu_query_csv(text: str) -> bool:
    """Cheap sniff: first non-blank line is a ``--query-gpu`` CSV header or an ``index, name, bus id`` row."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    names = [_UNIT_SUFFIX.sub("", f.strip()) for f in first.split(",")]
    if "pci.bus_id" in names and ("index" in names or "name" in names):
        return True
    return _CSV_ROW.match(first) is not None


def parse_gpu_query_csv(text: str, source: str = "<text>") -> list[GpuInfo]:
    """Parse ``nvidia-smi --query-gpu=index,name,pci.bus_id,pcie.link.gen.max,pcie.link.width.max
    --format=csv[,noheader][,nounits]``.

    With a header, columns are found by name (extra columns are ignored, the PCIe ones may be
    missing); without one, the five fields must come in the order of :data:`GPU_QUERY_FIELDS`.
    """
    rows = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    if not rows:
        raise ParseError(source, None, "nvidia-smi --query-gpu CSV output (a header or GPU rows)")
    first_no, first = rows[0]
    names = [_UNIT_SUFFIX.sub("", f.strip()) for f in first.split(",")]
    if "index" in names or "pci.bus_id" in names:
        for required in ("index", "name", "pci.bus_id"):
            if required not in names:
                raise ParseError(source, first_no, f"a CSV header with {', '.join(GPU_QUERY_FIELDS)}", first)
        if len(set(names)) != len(names):
            raise ParseError(source, first_no, "each field once in the CSV header", first)
        rows = rows[1:]
    else:
        names = list(GPU_QUERY_FIELDS)
    gpus = [_gpu_row(names, lineno, line, source) for lineno, line in rows]
    if len({g.index for g in gpus}) != len(gpus):
        raise ParseError(source, None, "each GPU index once")
    return gpus


def _gpu_row(names: list[str], lineno: int, line: str, source: str) -> GpuInfo:
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != len(names):
        raise ParseError(source, lineno, f"{len(names)} comma-separated fields ({', '.join(names)})", line)
    values = dict(zip(names, fields, strict=True))
    index, name, bus_id = values["index"], values["name"], values["pci.bus_id"]
    if not _UINT.fullmatch(index):
        raise ParseError(source, lineno, "a GPU index (0, 1, ...)", index)
    if not name or NOT_AVAILABLE.fullmatch(name):
        raise ParseError(source, lineno, "a GPU name", name)
    if not BUS_ID.fullmatch(bus_id):
        raise ParseError(source, lineno, "a PCI bus id like 00000000:18:00.0", bus_id)
    return GpuInfo(
        index=int(index),
        name=name,
        pci_bus_id=bus_id,
        pcie_gen_max=_optional_uint(values, "pcie.link.gen.max", lineno, source),
        pcie_width_max=_optional_uint(values, "pcie.link.width.max", lineno, source),
    )


def _optional_uint(values: dict[str, str], what: str, lineno: int, source: str) -> int | None:
    value = values.get(what)
    if value is None or NOT_AVAILABLE.fullmatch(value):
        return None
    if not _UINT.fullmatch(value):
        raise ParseError(source, lineno, f"an integer or [N/A] for {what}", value)
    return int(value)


def looks_like_nvlink_status(text: str) -> bool:
    """Cheap sniff: a ``GPU <n>: ...`` line and a ``Link <n>: <speed> GB/s`` or ``<inactive>`` line."""
    return _SNIFF_NVLINK_GPU.search(text) is not None and _SNIFF_NVLINK.search(text) is not None


def parse_nvlink_status(text: str, source: str = "<text>") -> list[NvLink]:
    """Parse ``nvidia-smi nvlink -s``: one :class:`NvLink` per ``Link <n>:`` line, in printed order.

    A GPU without NVLink (no link lines, or a ``NVML: Unable to retrieve NVLink information`` notice)
    contributes nothing.
    """
    links: list[NvLink] = []
    gpu: int | None = None
    seen: set[tuple[int, int]] = set()
    for i, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if not stripped:
            continue
        m = _NVLINK_GPU.fullmatch(stripped)
        if m is not None:
            gpu = int(m.group(1))
            continue
        m = _NVLINK_LINK.fullmatch(stripped)
        if m is None:
            if gpu is not None and _NVLINK_NOTICE.fullmatch(stripped):
                continue
            expected = "'GPU <n>: <name>' or 'Link <n>: <speed> GB/s | <inactive>'"
            raise ParseError(source, i + 1, expected, line)
        if gpu is None:
            raise ParseError(source, i + 1, "a 'GPU <n>: <name>' line before the first link", line)
        link = int(m.group(1))
        if (gpu, link) in seen:
            raise ParseError(source, i + 1, f"each link of GPU {gpu} once", line)
        seen.add((gpu, link))
        value = m.group(2)
        speed = _NVLINK_SPEED.fullmatch(value)
        if speed is not None:
            links.append(NvLink(gpu_index=gpu, link=link, speed_gbps=float(speed.group(1)), active=True))
        elif value.lower() == "<inactive>":
            links.append(NvLink(gpu_index=gpu, link=link, speed_gbps=None, active=False))
        else:
            raise ParseError(source, i + 1, "a link speed like '26.562 GB/s' or '<inactive>'", value)
    return links
