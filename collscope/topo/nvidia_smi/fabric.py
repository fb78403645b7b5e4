"""The NVLink fabric registration of each GPU, from the ``Fabric`` blocks of ``nvidia-smi -q``.

On a multi-node NVLink system (GB200/GB300 NVL72) every GPU registers with the fabric the NVLink switch trays
manage, and ``nvidia-smi -q`` prints, per GPU::

    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 32766
        ClusterUUID                       : <uuid>
        Health
            Summary                       : Healthy
            Bandwidth                     : Full

GPUs with the same ClusterUUID and CliqueId share one NVLink partition: NCCL joins them as one NVLink domain
(MNNVL, NCCL's ``cliqueId`` / ``nvlDomainSize``). Meanings (NVML's ``nvmlGpuFabricInfo_t``: the status "must be
checked only if state returns complete"; NVIDIA Mission Control's NVLink partitioning: the default partition, user
partitions, clique 0 for a GPU in no partition): a GPU counts as registered only with State Completed, Status
Success, a non-zero CliqueId and a non-zero ClusterUUID. HGX H100 boards print State Completed with a zero
ClusterUUID (meta-pytorch/torchcomms pull request 1385); a tray whose partition is not assigned prints State In
Progress, and CUDA waits for it. Published shapes read here: the whole ``nvidia-smi -q`` (``GPU <bus id>`` headers,
``Product Name`` lines), and excerpts of it (``nvidia-smi -q | grep -A6 Fabric``, with ``--`` separators), whose
blocks name no GPU.

``nvidia-smi --query-gpu=fabric.state,...`` is not read: one published report found its fabric fields wrong on
B300 where the ``-q`` block was right, so ``collscope topo collect`` captures ``nvidia-smi -q``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from collscope.errors import ParseError
from collscope.topo.nvidia_smi.queries import BUS_ID, NOT_AVAILABLE

__all__ = ["GpuFabric", "looks_like_nvsmi_query", "parse_nvsmi_fabric"]

_ZERO_UUID = re.compile(r"0{8}-0{4}-0{4}-0{4}-0{12}")
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_GPU_HEADER = re.compile(rf"GPU ({BUS_ID.pattern})")
_KEY_VALUE = re.compile(r"(\S[^:]*?)\s*:\s*(.*?)\s*")
_HEALTHY = frozenset({"full", "false", "none", "healthy"})
"""Health row values that report no problem (``Bandwidth: Full``, ``Route Unhealthy: False``, ``Incorrect
Configuration: None``); any other value that is not N/A is a problem (NVML's fabric health mask: degraded bandwidth,
route recovery, route unhealthy, access timeout recovery, incorrect configuration)."""
_SNIFF_LOG = re.compile(r"^=+NVSMI LOG=+\s*$", re.MULTILINE)
_SNIFF_BLOCK = re.compile(r"^([ \t]*)Fabric[ \t]*\r?\n\1[ \t]+State[ \t]+:", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class GpuFabric:
    """One GPU's ``Fabric`` block."""

    gpu_bus_id: str | None
    """The ``GPU <bus id>`` header the block is under; ``None`` in an excerpt without headers."""
    product: str | None
    """The GPU's ``Product Name`` (``NVIDIA GB200``), when the capture has it."""
    state: str
    """``Completed``, ``In Progress``, ``Not Started``, or ``N/A`` / ``Not Supported`` (no fabric)."""
    status: str | None
    """``Success`` or the failure (``Insufficient Resources`` ...); meaningful only when ``state`` is Completed."""
    clique_id: int | None
    cluster_uuid: str | None
    health_summary: str | None
    """``Healthy`` / ``Unhealthy`` ... where the driver prints a summary."""
    bandwidth: str | None
    """``Full`` or ``Degraded`` ... (Health / Bandwidth)."""
    health_problems: tuple[str, ...]
    """The Health rows that report a problem, as printed (``Bandwidth: Degraded``, ``Route Unhealthy: True``,
    ``Incorrect Configuration: No Partition``); the Summary row is :attr:`health_summary`."""
    line: int
    """1-based line of the ``Fabric`` header."""

    @property
    def registered(self) -> bool:
        """Registered in an NVLink partition: State Completed, Status Success, non-zero clique and cluster."""
        return (self.state == "Completed" and self.status == "Success" and bool(self.clique_id)
                and self.cluster_uuid is not None and not _ZERO_UUID.fullmatch(self.cluster_uuid))

    @property
    def clique(self) -> tuple[str, int] | None:
        """``(cluster_uuid, clique_id)`` of a registered GPU, else ``None``."""
        if not self.registered or self.cluster_uuid is None or self.clique_id is None:
            return None
        return self.cluster_uuid.lower(), self.clique_id

    @property
    def where(self) -> str:
        """The GPU in words: its bus id, else the block's line."""
        return f"GPU {self.gpu_bus_id}" if self.gpu_bus_id else f"the Fabric block of line {self.line}"


def looks_like_nvsmi_query(text: str) -> bool:
    """Cheap sniff: the ``NVSMI LOG`` banner of ``nvidia-smi -q``, or a ``Fabric`` block (an excerpt)."""
    return _SNIFF_LOG.search(text) is not None or _SNIFF_BLOCK.search(text) is not None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def parse_nvsmi_fabric(text: str, source: str = "<text>") -> list[GpuFabric]:
    """Every ``Fabric`` block of an ``nvidia-smi -q`` output (whole or an excerpt), in printed order.

    Everything outside the blocks is skipped, except the ``GPU <bus id>`` headers and ``Product Name`` lines that
    name the block's GPU. Inside a block, ``State`` is required; a CliqueId that is neither a number nor N/A, or a
    ClusterUUID that is not a UUID, is a ParseError naming the line. A GPU header twice is a ParseError (two
    captures pasted into one file)."""
    lines = text.splitlines()
    out: list[GpuFabric] = []
    gpu: str | None = None
    product: str | None = None
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = _GPU_HEADER.fullmatch(stripped)
        if header is not None and _indent(line) == 0:
            gpu, product = header.group(1), None
            if gpu in seen:
                raise ParseError(source, i + 1, f"each GPU once (GPU {gpu} is listed twice)", line)
            seen.add(gpu)
        elif stripped == "--":  # grep's separator between excerpts
            gpu, product = None, None
        elif stripped == "Fabric":
            block, after = _block(lines, i)
            out.append(_fabric(block, gpu, product, header_line=i + 1, source=source))
            i = after
            continue
        else:
            kv = _KEY_VALUE.fullmatch(stripped)
            if kv is not None and kv.group(1) == "Product Name" and gpu is not None:
                product = kv.group(2) or None
        i += 1
    return out


def _block(lines: list[str], start: int) -> tuple[dict[str, tuple[int, str]], int]:
    """The ``key: (line, value)`` pairs of the block whose header is ``lines[start]`` (subsection keys as
    ``Health/Bandwidth``), and the index after it."""
    base = _indent(lines[start])
    pairs: dict[str, tuple[int, str]] = {}
    section = ""
    section_indent = -1
    i = start + 1
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        indent = _indent(line)
        if indent <= base or line.strip() == "--":
            break
        if section and indent <= section_indent:
            section = ""
        kv = _KEY_VALUE.fullmatch(line.strip())
        if kv is None:  # a subsection header ("Health")
            section, section_indent = line.strip(), indent
        else:
            pairs[f"{section}/{kv.group(1)}" if section else kv.group(1)] = (i + 1, kv.group(2))
        i += 1
    return pairs, i


def _fabric(pairs: dict[str, tuple[int, str]], gpu: str | None, product: str | None, *, header_line: int,
            source: str) -> GpuFabric:
    if "State" not in pairs:
        raise ParseError(source, header_line, "a 'State : <Completed | In Progress | N/A>' line in the Fabric block")

    def value(key: str) -> str | None:
        found = pairs.get(key)
        return None if found is None or not found[1] or NOT_AVAILABLE.fullmatch(found[1]) else found[1]

    clique: int | None = None
    raw = value("CliqueId")
    if raw is not None:
        if not raw.isdigit():
            raise ParseError(source, pairs["CliqueId"][0], "a CliqueId number or N/A", raw)
        clique = int(raw)
    uuid = value("ClusterUUID")
    if uuid is not None and not _UUID.fullmatch(uuid):
        raise ParseError(source, pairs["ClusterUUID"][0], "a ClusterUUID like 9c6f5af3-53bf-49b5-a436-b66766c413c3 "
                         "or N/A", uuid)
    problems = tuple(f"{key.split('/', 1)[1]}: {found}" for key in pairs
                     if key.startswith("Health/") and key != "Health/Summary"
                     and (found := value(key)) is not None and found.lower() not in _HEALTHY)
    return GpuFabric(gpu_bus_id=gpu, product=product, state=pairs["State"][1] or "N/A", status=value("Status"),
                     clique_id=clique, cluster_uuid=uuid, health_summary=value("Health/Summary"),
                     bandwidth=value("Health/Bandwidth"), health_problems=problems, line=header_line)
