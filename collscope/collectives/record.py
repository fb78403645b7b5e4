"""The Measurement record (DESIGN.md), its settings mapping, and JSONL writing.

One record per measured (configuration, size, repeat); the same fields for all three engines.
Bandwidths are decimal GB/s (1e9 bytes/s) with nccl-tests' busbw factors. Reading records back (strict
decoding, errors naming file, line and field) lives in :mod:`collscope.results.decode`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn, get_args

import msgspec

from collscope.atomic import write_bytes_atomic
from collscope.errors import shown
from collscope.files import absolute_path
from collscope.units import algbw_gbps
from collscope.vocab.ops import OPS, busbw_factor

__all__ = ["Measurement", "Settings", "OPS", "ENGINES", "busbw_factor", "write_jsonl", "append_jsonl", "Engine",
           "columns_checked", "TimeOverRanks", "SIZE_LIMIT_BYTES"]

Engine = Literal["nccl-tests", "torch", "mpi"]
TimeOverRanks = Literal["max", "mean", "min", "rank0"]
"""How a record's time combines the ranks' times: the slowest rank's (collscope's harnesses; nccl-tests ``-a 3``,
or one process timing all its GPUs), their mean (nccl-tests' default ``-a 1``), the fastest's (``-a 2``), rank 0's
(``-a 0``)."""
ENGINES: frozenset[str] = frozenset(get_args(Engine))
_OPS = frozenset(OPS)
_TEXT = frozenset({str})
SIZE_LIMIT_BYTES = 2**63
"""Sizes are below 2**63 bytes (a signed 64-bit integer, as pandas, numpy and NCCL's size_t arithmetic hold them):
a larger one is an input error, never an OverflowError in analysis."""
_INF = float("inf")
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
"""An integer field as analysis holds it (a 64-bit column): checked where records are decoded, so a count or a
rank count of 2**64 is a ParseError naming the field, never an OverflowError in analysis."""


class Settings(dict[str, str]):
    """The knob values of a point (environment variable -> value): an immutable, hashable dict.

    A dict subclass so that it compares, encodes and iterates as the JSON object it is on disk; every method
    that would change it raises TypeError.
    """

    __slots__ = ()

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = (), /) -> None:
        super().__init__(items)
        kinds = set(map(type, dict.keys(self)))  # C-level: every decoded record makes one
        kinds.update(map(type, dict.values(self)))
        if not kinds <= _TEXT:
            bad = next((k, v) for k, v in dict.items(self) if type(k) is not str or type(v) is not str)
            raise ValueError(f"settings must map names to text values, got {bad[0]!r}: {bad[1]!r}")

    def __hash__(self) -> int:  # type: ignore[override]  # dict sets __hash__ = None; this one is immutable
        return hash(frozenset(dict.items(self)))

    def __repr__(self) -> str:
        return f"Settings({dict.__repr__(self)})"

    def _immutable(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("Settings is immutable; build a new one: Settings({**old, name: value})")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _immutable


_NO_SETTINGS = Settings()
_set = msgspec.structs.force_setattr
_SETTINGS_SEEN: dict[tuple[tuple[str, str], ...], Settings] = {}
"""Settings already made, by their items: the records of a point share one (decoding makes ~10^6 a second)."""


_COLUMNS_CHECKED: ContextVar[bool] = ContextVar("collscope_columns_checked", default=False)


@contextmanager
def columns_checked() -> Iterator[None]:
    """Inside (this thread or task only), a Measurement made is not checked on its own: for a builder that has
    checked the values it sets, a column at a time, and copies every other field from a record made outside.

    The one builder is :func:`collscope.collectives.nccl_tests.build.build_run` (ingest): it makes each record
    with ``msgspec.structs.replace`` from a template constructed (and so checked) outside, after checking that
    every size is ``>= 0`` and ``< 2**63`` and every time ``> 0`` (nccl_tests.text), the only checked fields it
    replaces. The check of ~10^6
    records one by one cost 0.19 s of a 1.24 s ingest of 50 MB (bench/ingest_speed.py).
    """
    token = _COLUMNS_CHECKED.set(True)
    try:
        yield
    finally:
        _COLUMNS_CHECKED.reset(token)


def _settings_of(value: Mapping[str, str]) -> Settings:
    """The Settings of a mapping: a shared one when the same items were seen before."""
    try:
        key = tuple(value.items())
        shared = _SETTINGS_SEEN.get(key)
    except (AttributeError, TypeError):  # not a mapping, or an unhashable value: Settings says what is wrong
        return Settings(value)
    if shared is None:
        shared = Settings(value)
        if len(_SETTINGS_SEEN) >= 4096:
            _SETTINGS_SEEN.clear()
        _SETTINGS_SEEN[key] = shared
    return shared


class Measurement(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """One measured size of one configuration (DESIGN.md, "Measurement record").

    Constructing one validates it (``op`` one of :data:`OPS`, ``engine`` one of :data:`ENGINES`,
    ``0 <= size_bytes < 2**63``, ``nranks >= 1``, ``time_us`` finite and ``> 0``): a bad value raises ValueError
    naming the field and the value; ingest checks the same a column at a time instead (:func:`columns_checked`).
    The field types are checked where records are decoded (:mod:`collscope.results.decode`). Fields added later
    must have defaults, so that older results still load.
    """

    engine: Engine
    backend: str
    op: str
    """One of :data:`collscope.vocab.ops.OPS`."""
    size_bytes: int
    """nccl-tests' "size": total bytes; for all_gather the gathered output, for reduce_scatter the input."""
    count: Int64 | None
    dtype: str
    redop: str | None
    root: Int64 | None
    in_place: bool
    nranks: Int64
    nnodes: Int64 | None
    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: Int64 | None = None
    """Wrong elements found by the check; None when not checked (nccl-tests ``N/A``, or ``-c 0``)."""
    error: float | None = None
    """Old nccl-tests float ``error`` column, else None."""
    ok: bool = True
    iters: Int64 | None = None
    warmup: Int64 | None = None
    repeat: Int64 = 0
    settings: Mapping[str, str] = _NO_SETTINGS
    """The point's knob values; always a :class:`Settings` (a plain mapping given here is converted)."""
    point_id: str | None = None
    sweep_id: str | None = None
    hosts: tuple[str, ...] = ()
    gpu: str | None = None
    """GPU model as the tools print it (``NVIDIA H200``); None when unknown (CPU ranks, a table without devices)."""
    cluster: str | None = None
    """Cluster identity: Slurm's ClusterName (``SLURM_CLUSTER_NAME``) where the measurement ran; None when unknown
    (analysis then tells machines apart by their hosts)."""
    nccl_version: str | None = None
    engine_version: str | None = None
    source: str | None = None
    timestamp: str | None = None
    time_over_ranks: TimeOverRanks | None = None
    """How ``time_us`` combines the ranks' times (:data:`TimeOverRanks`); None when unknown (older records, an
    nccl-tests output that does not show its ``-a``). Times reduced differently are not comparable."""
    process_shape: str | None = None
    """``PxTxG``: processes x threads per process x GPUs per thread of the launch (``8x1x1``: one process per GPU;
    ``1x1x8``: one process driving 8 GPUs, nccl-tests ``-g 8``); with ``NCCL_TESTS_SPLIT`` the whole launch, so
    P x T x G can exceed ``nranks``. None when unknown."""
    environment: Mapping[str, str] | None = None
    """What the ranks inherited that can shape the collective but the point did not force (``OMPI_MCA_pml``,
    ``NCCL_IB_HCA``, ...; :func:`collscope.collectives.spec.captured_environment`), secrets' values redacted; a
    :class:`Settings` when given. It never names a configuration (``settings`` do). None when not recorded
    (older records, ingested outputs)."""
    rail: str | None = None
    """The rail the ranks were pinned to: the interface or HCA named by the engine's rail variable
    (:data:`collscope.vocab.configs.RAIL_VARIABLES`: ``OMPI_MCA_btl_tcp_if_include=cl1`` -> ``cl1``,
    ``GLOO_SOCKET_IFNAME``, ``NCCL_IB_HCA``); in a sweep or a locate test, the one the point pinned. None: nothing
    pinned one (the library chose among every rail), or not recorded (older records). It
    names the configuration (:func:`collscope.vocab.configs.config_of`): rails are never pooled."""

    def __post_init__(self) -> None:
        if self.environment is not None and type(self.environment) is not Settings:
            _set(self, "environment", _settings_of(self.environment))
        if _COLUMNS_CHECKED.get():  # its values were checked a column at a time (columns_checked)
            return
        try:  # the hot path, one expression: decoding makes ~10^6 records a second
            if (self.op in _OPS and self.engine in ENGINES and 0 <= self.size_bytes < SIZE_LIMIT_BYTES
                    and self.nranks >= 1 and 0 < self.time_us < _INF and type(self.settings) is Settings
                    and type(self.hosts) is tuple):
                return
            valid = (self.op in _OPS and self.engine in ENGINES and 0 <= self.size_bytes < SIZE_LIMIT_BYTES
                     and self.nranks >= 1 and 0 < self.time_us < _INF)
        except TypeError:  # a comparison with a value of the wrong type
            valid = False
        if not valid:
            _reject(self)
        settings = self.settings
        if type(settings) is not Settings:  # a decoded or given dict: the shared Settings of the same items
            try:
                shared = _SETTINGS_SEEN.get(tuple(settings.items()))
            except (AttributeError, TypeError):
                shared = None
            _set(self, "settings", shared if shared is not None else _settings_of(settings))
        if type(self.hosts) is not tuple:
            _set(self, "hosts", tuple(self.hosts))

    @classmethod
    def from_timing(cls, *, op: str, size_bytes: int, nranks: int, time_us: float, **rest: Any) -> Measurement:
        """A record whose algbw/busbw are computed from size and time (the harness engines)."""
        algbw = algbw_gbps(size_bytes, time_us)
        return cls(op=op, size_bytes=size_bytes, nranks=nranks, time_us=time_us, algbw_gbps=algbw,
                   busbw_gbps=algbw * busbw_factor(op, nranks), **rest)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the record as written on disk (``settings`` a dict, ``hosts`` a list)."""
        d = msgspec.structs.asdict(self)
        d["settings"] = dict(self.settings)
        d["hosts"] = list(self.hosts)
        if self.environment is not None:
            d["environment"] = dict(self.environment)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        """The record of a JSON object, types checked strictly; ValueError names the bad field."""
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc)) from None


def _reject(record: Measurement) -> NoReturn:
    """Raise ValueError naming the first field whose value is invalid."""
    checks: tuple[tuple[str, Any, str], ...] = (
        ("op", lambda v: v in _OPS, f"one of {', '.join(OPS)}"),
        ("engine", lambda v: v in ENGINES, f"one of {', '.join(sorted(ENGINES))}"),
        ("size_bytes", lambda v: isinstance(v, int) and 0 <= v < SIZE_LIMIT_BYTES, "an integer >= 0 and < 2**63"),
        ("nranks", lambda v: isinstance(v, int) and v >= 1, "an integer >= 1"),
        ("time_us", lambda v: isinstance(v, (int, float)) and 0 < v < _INF,
         "a finite number > 0 (a time of 0 gives no bandwidth)"),
    )
    for name, ok, expected in checks:
        value = getattr(record, name)
        try:
            good = bool(ok(value))
        except TypeError:
            good = False
        if not good:
            raise ValueError(f"Measurement field {name}={shown(value)}: expected {expected}")
    raise AssertionError("a Measurement failed validation without a bad field")  # pragma: no cover


def _dumps(record: Measurement) -> str:
    return json.dumps(record.to_dict(), sort_keys=True, separators=(",", ":"))


def write_jsonl(path: Path | str, records: Iterable[Measurement]) -> int:
    """Write all records to ``path`` atomically: :func:`collscope.atomic.write_bytes_atomic` (``path`` made
    absolute first; the temporary file is created beside it and renamed through one descriptor of its directory,
    so the two names never resolve through different mounts: a working directory entered from another mount
    namespace, as ``nsenter --wd`` and the simulated cluster's clients do, made a temporary named by its absolute
    path and a target named relative to it two mounts of one file system, and the rename failed with EXDEV)."""
    path = absolute_path(path)
    payload = "".join(_dumps(record) + "\n" for record in records)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, payload.encode())
    return payload.count("\n")


def append_jsonl(path: Path | str, records: Iterable[Measurement]) -> int:
    """Append records, each line written whole with one ``write`` on an O_APPEND descriptor and fsynced."""
    path = absolute_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(_dumps(r) + "\n" for r in records)
    if not payload:
        return 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o666)  # never through a link
    try:
        os.write(fd, payload.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return payload.count("\n")
