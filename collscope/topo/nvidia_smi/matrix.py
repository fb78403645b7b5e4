"""Parser for the ``nvidia-smi topo -m`` connection matrix.

The table comes raw (tab separated, header starting with a tab), or as it looks after a terminal,
a markdown renderer or an editor got at it: tabs expanded into aligned spaces, every line indented,
timestamp or label lines before it, trailing empty fields trimmed. The parser accepts all of these and
validates the result (one value per device column, ``X`` exactly on the diagonal, only known path
classes, affinity values in the printed formats), so a damaged copy fails with a :class:`ParseError`
that names its line instead of coming back with shifted columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collscope.errors import ParseError

__all__ = ["PATH_CLASSES", "TopoMatrix", "parse_topo_matrix", "looks_like_topo_matrix"]

PATH_CLASSES = ("X", "SYS", "NODE", "PHB", "PXB", "PIX")
"""Path classes other than ``NV#``, as they appear after normalisation (old ``SOC`` becomes ``SYS``)."""

_KNOWN_COLUMNS = (("GPU", "NUMA", "ID"), ("CPU", "Affinity"), ("NUMA", "Affinity"))
_GPU_NUMA_ID = "GPU NUMA ID"
_GPU_LABEL = re.compile(r"GPU[0-9]+")
_DEVICE_LABEL = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]*")
_NVLINK = re.compile(r"NV([1-9][0-9]*)")
_CPU_LIST = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
_VALUE_FORMATS = {
    "CPU Affinity": re.compile(rf"(?:{_CPU_LIST.pattern}|N/A)?"),
    "NUMA Affinity": re.compile(rf"(?:{_CPU_LIST.pattern}|N/A)?"),
    _GPU_NUMA_ID: re.compile(r"(?:[0-9]+|N/A)?"),
}
_NIC_LEGEND_ENTRY = re.compile(r"(NIC[0-9]+)\s*:\s*(\S+)")
_SNIFF_ROW = re.compile(r"^[ \t]*GPU[0-9]+[ \t]+X(?:[ \t]|$)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class TopoMatrix:
    """One ``nvidia-smi topo -m`` table: the devices, the path class of every pair, and affinities."""

    devices: tuple[str, ...]
    """Column labels in the order printed: ``GPU0``.., then ``NIC0``.. or ``mlx5_0``.."""
    paths: dict[str, dict[str, str]]
    """Row label -> column label -> path class (``X``, ``SYS``, ``NODE``, ``PHB``, ``PXB``, ``PIX``,
    ``NV<n>``), both directions as printed."""
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    """GPU label -> CPU list as printed (``"0-47,96-143"``; ``""`` when empty); empty without the column."""
    numa_affinity: dict[str, str] = field(default_factory=dict)
    """GPU label -> NUMA node(s) as printed (``"0"``, ``"0-1"``, ``"N/A"``, ``""``)."""
    gpu_numa_id: dict[str, str] = field(default_factory=dict)
    """GPU label -> the GPU's own NUMA id as printed (``"N/A"``, ``"2"``, ``""``)."""
    nic_legend: dict[str, str] = field(default_factory=dict)
    """``NIC0`` -> device name (``mlx5_1``, ``mlx5_bond_0``, ``rocep49s0``) from the ``NIC Legend:``."""
    columns: tuple[str, ...] = ()
    """The extra columns present after the device columns, e.g. ``("CPU Affinity", "NUMA Affinity")``."""

    @property
    def gpus(self) -> tuple[str, ...]:
        """Device labels that are GPUs, in order."""
        return tuple(d for d in self.devices if _GPU_LABEL.fullmatch(d))

    @property
    def nics(self) -> tuple[str, ...]:
        """Device labels that are not GPUs (``NIC<n>``, ``mlx5_<n>``, ...), in order."""
        return tuple(d for d in self.devices if not _GPU_LABEL.fullmatch(d))

    def nic_name(self, label: str) -> str:
        """The NIC's device name from the legend, or ``label`` itself when the legend has no entry."""
        return self.nic_legend.get(label, label)

    def to_dict(self) -> dict[str, object]:
        """Plain data (copies of the mappings) for JSON or pandas."""
        return {
            "devices": list(self.devices),
            "paths": {row: dict(cols) for row, cols in self.paths.items()},
            "cpu_affinity": dict(self.cpu_affinity),
            "numa_affinity": dict(self.numa_affinity),
            "gpu_numa_id": dict(self.gpu_numa_id),
            "nic_legend": dict(self.nic_legend),
            "columns": list(self.columns),
        }


@dataclass(frozen=True, slots=True)
class _Header:
    devices: tuple[str, ...]
    columns: tuple[str, ...]


def looks_like_topo_matrix(text: str) -> bool:
    """Cheap sniff: a ``GPU<n>  X`` diagonal row preceded by a line naming ``GPU0``."""
    row = _SNIFF_ROW.search(text)
    return row is not None and "GPU0" in text[: row.start()]


def parse_topo_matrix(text: str, source: str = "<text>") -> TopoMatrix:
    """Parse the output of ``nvidia-smi topo -m`` (or ``topo --matrix``) into a :class:`TopoMatrix`.

    Text before the header (timestamps, labels, comments) is skipped; the ``Legend:`` is optional and
    the ``NIC Legend:`` is read when present. Raises :class:`ParseError` with the offending line.
    """
    lines = text.splitlines()
    header_at = _find_header(lines, source)
    header = _parse_header(lines[header_at], header_at + 1, source)
    n = len(header.devices)
    paths: dict[str, dict[str, str]] = {}
    extras: dict[str, dict[str, str]] = {}
    end = len(lines)
    for i in range(header_at + 1, len(lines)):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            if paths:
                end = i
                break
            continue
        words = stripped.split()
        if words[0] not in header.devices:
            end = i
            break
        label = words[0]
        if label in paths:
            raise ParseError(source, i + 1, f"one row per device, but {label} appears again", line)
        paths[label] = _row_paths(words, header.devices, i + 1, source, line)
        remainder = _after_words(line, n + 1)
        fields = _extra_fields(remainder, line, header, i + 1, source)
        if _GPU_LABEL.fullmatch(label):
            extras[label] = _check_values(fields, header.columns, i + 1, source, line)
        elif any(fields):
            raise ParseError(source, i + 1, f"no values after the {n} path columns of a NIC row", line)
    missing = [d for d in header.devices if d not in paths]
    if missing:
        found = lines[end] if end < len(lines) else None
        raise ParseError(source, min(end, len(lines)) + 1, f"a row for {missing[0]}", found)
    return TopoMatrix(
        devices=header.devices,
        paths={d: paths[d] for d in header.devices},
        cpu_affinity=_column_values(extras, "CPU Affinity", header.columns),
        numa_affinity=_column_values(extras, "NUMA Affinity", header.columns),
        gpu_numa_id=_column_values(extras, _GPU_NUMA_ID, header.columns),
        nic_legend=_parse_nic_legend(lines, end, header.devices, source),
        columns=header.columns,
    )


def _find_header(lines: list[str], source: str) -> int:
    """Index of the header: the first line whose first word is ``GPU<n>`` and whose second is not a path."""
    for i, line in enumerate(lines):
        words = line.split()
        if words and _GPU_LABEL.fullmatch(words[0]) and (len(words) == 1 or _path_class(words[1]) is None):
            return i
    for i, line in enumerate(lines):
        if "GPU0" in line:
            raise ParseError(source, i + 1, "a matrix header line: GPU0, GPU1.., NIC0.., CPU Affinity", line)
    raise ParseError(source, None, "an nvidia-smi topo -m matrix (a header line starting with GPU0)")


def _parse_header(line: str, lineno: int, source: str) -> _Header:
    devices: list[str] = []
    columns: list[str] = []
    words = line.split()
    k = 0
    while k < len(words):
        name = next((kw for kw in _KNOWN_COLUMNS if tuple(words[k : k + len(kw)]) == kw), None)
        if name is not None:
            columns.append(" ".join(name))
            k += len(name)
            continue
        if columns or not _DEVICE_LABEL.fullmatch(words[k]) or _path_class(words[k]) is not None:
            # A truncated or unknown column name would move every value after it: refuse it.
            known = ", ".join(" ".join(kw) for kw in _KNOWN_COLUMNS)
            expected = f"device labels (GPU0, NIC0, mlx5_0), then columns among {known}"
            raise ParseError(source, lineno, expected, words[k])
        devices.append(words[k])
        k += 1
    if not devices or not _GPU_LABEL.fullmatch(devices[0]):
        raise ParseError(source, lineno, "a matrix header starting with GPU0", line)
    if len(set(devices)) != len(devices) or len(set(columns)) != len(columns):
        raise ParseError(source, lineno, "each device and column once in the header", line)
    return _Header(tuple(devices), tuple(columns))


def _path_class(token: str) -> str | None:
    """The normalised path class of a matrix cell, or ``None`` when it is not one."""
    if token in PATH_CLASSES:
        return token
    if token == "SOC":
        return "SYS"
    if _NVLINK.fullmatch(token):
        return token
    return None


def _row_paths(words: list[str], devices: tuple[str, ...], lineno: int, source: str,
               line: str) -> dict[str, str]:
    label = words[0]
    values = words[1 : len(devices) + 1]
    row: dict[str, str] = {}
    for k, column in enumerate(devices):
        if k >= len(values):
            raise ParseError(source, lineno, f"{len(devices)} path values in the {label} row", line)
        cls = _path_class(values[k])
        if cls is None:
            raise ParseError(source, lineno, f"a path class (X, SYS, NODE, PHB, PXB, PIX, NV#) in column "
                             f"{column} of the {label} row", values[k])
        if (cls == "X") != (column == label):
            where = "on the diagonal only" if cls == "X" else "on the diagonal"
            raise ParseError(source, lineno, f"X {where} (row {label}, column {column})", values[k])
        row[column] = cls
    return row


def _after_words(line: str, count: int) -> str:
    """The rest of ``line`` after its first ``count`` whitespace-separated words."""
    end = 0
    for k, m in enumerate(re.finditer(r"\S+", line)):
        if k == count - 1:
            end = m.end()
            break
    return line[end:]


def _extra_fields(remainder: str, line: str, header: _Header, lineno: int, source: str) -> list[str]:
    """Split what follows the path columns into one field per extra column (``""`` when empty)."""
    k = len(header.columns)
    if "\t" in remainder:
        rest = remainder.lstrip(" ")
        rest = rest[1:] if rest.startswith("\t") else rest
        fields = [f.strip() for f in rest.split("\t")]
    else:
        # Tabs expanded into spaces: empty fields show only as whitespace spanning extra tab stops.
        fields = remainder.split()
        recovered = _fields_from_tab_stops(line, len(header.devices)) if fields else None
        if recovered is not None:
            fields = recovered
        elif 0 < len(fields) < k:
            raise ParseError(source, lineno, f"one value per column ({', '.join(header.columns)}) or values "
                             "at tab stops; cannot tell which are empty", line)
    if _GPU_NUMA_ID in header.columns and len(fields) > k:
        spacer = header.columns.index(_GPU_NUMA_ID)
        if fields[spacer] == "":
            del fields[spacer]  # nvidia-smi prints an empty field before GPU NUMA ID
    while len(fields) > k and fields[-1] == "":
        fields.pop()
    if len(fields) > k:
        expected = f"at most {k} values after the path columns ({', '.join(header.columns)})"
        raise ParseError(source, lineno, expected if k else "nothing after the path columns", line)
    return fields + [""] * (k - len(fields))


def _fields_from_tab_stops(line: str, n: int) -> list[str] | None:
    """The tab-separated fields after the ``n`` path values of a row whose tabs were expanded to
    8-column stops, or ``None`` when the values do not sit on tab stops."""
    tokens = [(m.group(), m.start()) for m in re.finditer(r"\S+", line.expandtabs(8))]
    for origin in dict.fromkeys((tokens[0][1], 0)):
        cursor = _next_stop(tokens[n][1] + len(tokens[n][0]) - origin)
        fields: list[str] = []
        for text, pos in tokens[n + 1 :]:
            gap = pos - origin - cursor
            if gap < 0 or gap % 8:
                break
            fields += [""] * (gap // 8) + [text]
            cursor = _next_stop(pos - origin + len(text))
        else:
            return fields
    return None


def _next_stop(end: int) -> int:
    """Where a tab typed at column ``end`` moves to."""
    return (end // 8 + 1) * 8


def _check_values(fields: list[str], columns: tuple[str, ...], lineno: int, source: str,
                  line: str) -> dict[str, str]:
    values = dict(zip(columns, fields, strict=True))
    for column, value in values.items():
        fmt = _VALUE_FORMATS.get(column)
        if fmt is not None and not fmt.fullmatch(value):
            raise ParseError(source, lineno, f"a {column} value like '0-23,48-71', '0' or 'N/A'", value)
    return values


def _column_values(extras: dict[str, dict[str, str]], column: str,
                   columns: tuple[str, ...]) -> dict[str, str]:
    if column not in columns:
        return {}
    return {gpu: values[column] for gpu, values in extras.items()}


def _parse_nic_legend(lines: list[str], start: int, devices: tuple[str, ...], source: str) -> dict[str, str]:
    legend: dict[str, str] = {}
    in_legend = False
    for i in range(start, len(lines)):
        stripped = lines[i].strip()
        if not in_legend:
            in_legend = stripped == "NIC Legend:"
            continue
        if not stripped:
            continue
        m = _NIC_LEGEND_ENTRY.fullmatch(stripped)
        if m is None:
            break
        if m.group(1) not in devices:
            raise ParseError(source, i + 1, f"a NIC from the matrix header ({', '.join(devices)})", stripped)
        legend[m.group(1)] = m.group(2)
    return legend
