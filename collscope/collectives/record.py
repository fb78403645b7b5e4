"""The Measurement record (DESIGN.md), busbw factors, and JSONL read/write.

One record per measured (configuration, size, repeat); the same fields for all three engines.
Bandwidths are decimal GB/s (1e9 bytes/s) with nccl-tests' busbw factors.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from collscope.errors import ParseError
from collscope.units import algbw_gbps
from collscope.vocab.ops import OPS, busbw_factor

__all__ = ["Measurement", "OPS", "busbw_factor", "write_jsonl", "append_jsonl", "read_jsonl", "Engine"]

Engine = Literal["nccl-tests", "torch", "mpi"]
@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One measured size of one configuration (DESIGN.md, "Measurement record")."""

    engine: str
    backend: str
    op: str
    size_bytes: int
    """nccl-tests' "size": total bytes; for all_gather the gathered output, for reduce_scatter the input."""
    count: int | None
    dtype: str
    redop: str | None
    root: int | None
    in_place: bool
    nranks: int
    nnodes: int | None
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None
    """Wrong elements found by the check; None when not checked (nccl-tests ``N/A``, or ``-c 0``)."""
    error: float | None = None
    """Old nccl-tests float ``error`` column, else None."""
    ok: bool = True
    iters: int | None = None
    warmup: int | None = None
    repeat: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    point_id: str | None = None
    sweep_id: str | None = None
    hosts: tuple[str, ...] = ()
    nccl_version: str | None = None
    engine_version: str | None = None
    source: str | None = None
    timestamp: str | None = None

    @classmethod
    def from_timing(cls, *, op: str, size_bytes: int, nranks: int, time_us: float, **rest: Any) -> Measurement:
        """A record whose algbw/busbw are computed from size and time (the harness engines)."""
        algbw = algbw_gbps(size_bytes, time_us)
        return cls(op=op, size_bytes=size_bytes, nranks=nranks, time_us=time_us, algbw_gbps=algbw,
                   busbw_gbps=algbw * busbw_factor(op, nranks), **rest)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["hosts"] = list(self.hosts)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
        values = dict(data)
        values["hosts"] = tuple(values.get("hosts") or ())
        values["settings"] = dict(values.get("settings") or {})
        return cls(**values)


def _dumps(record: Measurement) -> str:
    return json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"))


def write_jsonl(path: Path | str, records: Iterable[Measurement]) -> int:
    """Write all records to ``path`` atomically (temp file in the same directory, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    n = 0
    try:
        with os.fdopen(fd, "w") as fh:
            for record in records:
                fh.write(_dumps(record) + "\n")
                n += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def append_jsonl(path: Path | str, records: Iterable[Measurement]) -> int:
    """Append records, each line written whole with one ``write`` on an O_APPEND descriptor and fsynced."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(_dumps(r) + "\n" for r in records)
    if not payload:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, payload.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return payload.count("\n")


def read_jsonl(path: Path | str) -> Iterator[Measurement]:
    """Records of a JSONL file; a bad line raises ParseError naming the file and line.

    A last line without its newline (a writer killed mid-line) is reported as such, not silently dropped.
    """
    path = Path(path)
    with path.open() as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if not line.endswith("\n"):
                raise ParseError(str(path), lineno, "a complete JSON line (the file ends mid-line)")
            try:
                data = json.loads(line)
                yield Measurement.from_dict(data)
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                raise ParseError(str(path), lineno, "a Measurement record as a JSON object", found=str(exc)) from exc
