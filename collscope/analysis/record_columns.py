"""Records as columns: the one intermediate between Measurement records, the Parquet cache and the DataFrame.

:class:`RecordColumns` holds the rows of some parts (a part: the records of one file) column by column, in the form
the DataFrame needs and Arrow stores without conversion:

* numbers (:data:`TYPED`, :data:`NULLABLE_INT`) as numpy arrays (nullable integers with a mask);
* every other field as codes (``int32``, -1 for None) into its distinct texts, each field's text as
  ``load_results`` shows it (``hosts`` joined by ``","``, ``environment`` as sorted ``K=V`` joined by ``;`` with
  secrets redacted, any other value ``str()``);
* ``settings`` as codes into its distinct redacted, sorted ``(key, value)`` tuples;
* ``part``: each row's part index (rows of one part are adjacent, parts in order).

:func:`from_records` builds it from decoded Measurements (Python work per run of equal values, not per row),
:func:`from_arrow` / :func:`to_arrow` convert it to and from an Arrow table (dictionary columns: the codes and the
texts as they are), and :func:`concat` joins several (the cache's unchanged files and the ones decoded again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import numpy as np
import pandas as pd

from collscope.collectives.record import Measurement
from collscope.vocab.secrets import redact_env

__all__ = ["RecordColumns", "FIELDS", "TYPED", "NULLABLE_INT", "CODED", "from_records", "from_arrow", "to_arrow",
           "concat", "first_appearance", "runs"]

FIELDS: tuple[str, ...] = Measurement.__struct_fields__
TYPED: dict[str, Any] = {"size_bytes": np.int64, "nranks": np.int64, "repeat": np.int64, "time_us": np.float64,
                         "algbw_gbps": np.float64, "busbw_gbps": np.float64, "error": np.float64,
                         "in_place": np.bool_, "ok": np.bool_}
"""Fields held as plain numpy arrays (``error``: NaN where the record has none)."""
NULLABLE_INT = ("count", "root", "nnodes", "wrong", "iters", "warmup")
CODED: tuple[str, ...] = tuple(f for f in FIELDS if f not in TYPED and f not in NULLABLE_INT and f != "settings")
"""Fields held as codes into their distinct texts (pandas categoricals in the frame)."""
_REQUIRED_INT = frozenset({"size_bytes", "nranks", "repeat"})

Items = tuple[tuple[str, str], ...]


@dataclass
class RecordColumns:
    """Rows of several parts, column by column (module doc)."""

    part: np.ndarray
    nparts: int = 0
    """How many parts (a part may have no rows: an nccl-tests run that measured nothing)."""
    typed: dict[str, np.ndarray] = field(default_factory=dict)
    nullable: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """name -> (int64 values, bool mask: True where missing)."""
    coded: dict[str, tuple[np.ndarray, list[str | None]]] = field(default_factory=dict)
    settings: tuple[np.ndarray, list[Items]] = field(default_factory=lambda: (np.empty(0, np.int32), []))

    def __len__(self) -> int:
        return len(self.part)


# ---- from decoded records ----------------------------------------------------------------------------------
def runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal adjacent values."""
    n = len(values)
    change = np.empty(n, dtype=bool)
    if n:
        change[0] = True
        np.not_equal(values[1:], values[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    return starts, np.diff(np.append(starts, n))


def _encode(values: np.ndarray, canon: Callable[[Any], Any]) -> tuple[np.ndarray, list[Any]]:
    """Codes (-1 for None) and distinct canonical values, in order of appearance; ``canon`` runs once per run of
    equal adjacent values, never per row."""
    starts, lengths = runs(values)
    keyed = np.empty(len(starts), dtype=object)
    keyed[:] = [None if v is None else canon(v) for v in values[starts]]
    codes, uniques = pd.factorize(keyed, use_na_sentinel=True)
    return np.repeat(codes.astype(np.int32), lengths), list(uniques)


def _settings_items(value: Mapping[str, str]) -> Items:
    return tuple(sorted(redact_env(value).items()))


def _hosts_text(value: Sequence[str]) -> str:
    return ",".join(value)


def _environment_text(value: Mapping[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in sorted(redact_env(value).items()))


_CANON: dict[str, Callable[[Any], str]] = {"hosts": _hosts_text, "environment": _environment_text}


def _texts(codes: np.ndarray, uniques: Sequence[str]) -> tuple[np.ndarray, list[str | None]]:
    """The same codes over distinct texts (two values with one text, ``1`` and ``"1"``, become one)."""
    merged, texts = pd.factorize(np.asarray(list(uniques), dtype=object))
    if len(texts) == len(uniques):
        return codes, list(uniques)
    lookup = np.append(merged, -1).astype(np.int32)
    return lookup[codes], [str(t) for t in texts]


def _typed(name: str, rows: Sequence[Measurement], n: int) -> np.ndarray:
    try:
        return np.fromiter(map(attrgetter(name), rows), dtype=TYPED[name], count=n)
    except (TypeError, ValueError):  # a None, or a value of another type: said below, or NaN for a float
        pass
    values = np.fromiter(map(attrgetter(name), rows), dtype=object, count=n)
    missing = pd.isna(values)
    if TYPED[name] is np.float64:
        return np.where(missing, np.nan, values).astype(np.float64)
    if missing.any():
        raise ValueError(f"{name} is null")
    return values.astype(TYPED[name])


def from_records(parts: Sequence[Sequence[Measurement]], point_ids: Sequence[str | None]) -> RecordColumns:
    """The columns of ``parts`` (the records of each file, in order); a record without a point id takes its
    part's (``point_ids``, one per part: the point file's name in a results directory, else None).

    ValueError when a required number (``size_bytes``, ``nranks``, ``repeat``) is null or a value is not a number
    where one is expected (the caller names the file)."""
    counts = np.array([len(p) for p in parts], dtype=np.int64)
    rows: list[Measurement] = []
    for records in parts:
        rows.extend(records)
    n = len(rows)
    out = RecordColumns(part=np.repeat(np.arange(len(parts), dtype=np.int32), counts), nparts=len(parts))
    for name in FIELDS:
        if name in TYPED:
            out.typed[name] = _typed(name, rows, n)
            continue
        values = np.fromiter(map(attrgetter(name), rows), dtype=object, count=n)
        if name in NULLABLE_INT:
            missing = pd.isna(values)
            has_missing = bool(missing.any())
            out.nullable[name] = ((np.where(missing, 0, values) if has_missing else values).astype(np.int64),
                                  missing.astype(bool))
        elif name == "settings":
            out.settings = _encode(values, _settings_items)
        else:
            if name == "point_id":
                fill = np.repeat(np.array(list(point_ids), dtype=object), counts)
                values = np.where(pd.isna(values), fill, values)
            codes, uniques = _encode(values, _CANON.get(name, str))
            out.coded[name] = _texts(codes, uniques)
    return out


# ---- joining and ordering -----------------------------------------------------------------------------------
def _union(columns: Sequence[tuple[np.ndarray, list[Any]]]) -> tuple[np.ndarray, list[Any]]:
    index: dict[Any, int] = {}
    parts = []
    for codes, uniques in columns:
        lookup = np.empty(len(uniques) + 1, dtype=np.int32)
        for i, value in enumerate(uniques):
            lookup[i] = index.setdefault(value, len(index))
        lookup[-1] = -1
        parts.append(lookup[codes])
    return (np.concatenate(parts) if parts else np.empty(0, np.int32)), list(index)


def concat(batches: Sequence[RecordColumns]) -> RecordColumns:
    """One RecordColumns of ``batches`` in order, part indices renumbered to follow each other."""
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return from_records([], [])
    offsets = np.cumsum([0] + [b.nparts for b in batches])
    out = RecordColumns(part=np.concatenate([b.part + off for b, off in zip(batches, offsets, strict=False)]),
                        nparts=int(offsets[-1]))
    for name in TYPED:
        out.typed[name] = np.concatenate([b.typed[name] for b in batches])
    for name in NULLABLE_INT:
        out.nullable[name] = (np.concatenate([b.nullable[name][0] for b in batches]),
                              np.concatenate([b.nullable[name][1] for b in batches]))
    for name in CODED:
        out.coded[name] = _union([b.coded[name] for b in batches])
    out.settings = _union([b.settings for b in batches])
    return out


def first_appearance(codes: np.ndarray, uniques: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """The same column with its distinct values in order of first appearance (unused ones dropped), whatever
    order they came in: a frame read through the cache equals one decoded from JSONL."""
    starts, _ = runs(codes)
    heads = codes[starts]
    seen, first = np.unique(heads, return_index=True)
    order = seen[np.argsort(first, kind="stable")]
    order = order[order >= 0]
    lookup = np.full(len(uniques) + 1, -1, dtype=np.int32)
    lookup[order] = np.arange(len(order), dtype=np.int32)
    return lookup[codes], [uniques[i] for i in order.tolist()]


# ---- Arrow ------------------------------------------------------------------------------------------------------
def to_arrow(cols: RecordColumns) -> Any:
    """An Arrow table of ``cols`` (``_part`` int32, numbers, dictionary<int32, string> columns, ``settings`` as
    the JSON text of its items)."""
    import pyarrow as pa

    arrays: dict[str, Any] = {"_part": pa.array(cols.part, pa.int32())}
    for name in FIELDS:
        if name in TYPED:
            arrays[name] = pa.array(cols.typed[name])
        elif name in NULLABLE_INT:
            values, mask = cols.nullable[name]
            arrays[name] = pa.array(values, pa.int64(), mask=mask)
        else:
            codes, uniques = cols.settings if name == "settings" else cols.coded[name]
            texts = [json.dumps(u, separators=(",", ":")) for u in uniques] if name == "settings" else uniques
            mask = codes < 0
            arrays[name] = pa.DictionaryArray.from_arrays(
                pa.array(np.where(mask, 0, codes), pa.int32(), mask=mask if mask.any() else None),
                pa.array(texts, pa.string()))
    return pa.table(arrays)


def _settings_from_json(text: str) -> Items:
    pairs = json.loads(text)
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
                                              for p in pairs):
        raise ValueError("settings: not a list of [key, value] texts")
    return tuple((k, v) for k, v in pairs)


def from_arrow(table: Any, nparts: int) -> RecordColumns:
    """The columns of an Arrow table written by :func:`to_arrow` (rows of ``nparts`` parts); ValueError when a
    column is missing or of another type (the caller then decodes the JSONL again)."""
    import pyarrow as pa

    names = set(table.column_names)
    missing = {"_part", *FIELDS} - names
    if missing:
        raise ValueError(f"columns missing: {', '.join(sorted(missing))}")
    out = RecordColumns(part=table.column("_part").to_numpy().astype(np.int32, copy=False), nparts=nparts)
    for name in FIELDS:
        column = table.column(name)
        if name in TYPED:
            if column.null_count:
                raise ValueError(f"{name} has nulls")
            out.typed[name] = column.to_numpy().astype(TYPED[name], copy=False)
        elif name in NULLABLE_INT:
            if not pa.types.is_integer(column.type):
                raise ValueError(f"{name} is {column.type}")
            out.nullable[name] = (column.fill_null(0).to_numpy().astype(np.int64, copy=False),
                                  column.is_null().to_numpy(zero_copy_only=False))
        else:
            if not pa.types.is_dictionary(column.type):
                raise ValueError(f"{name} is {column.type}")
            chunk = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            codes = chunk.indices.fill_null(-1).to_numpy().astype(np.int32, copy=False)
            texts = chunk.dictionary.to_pylist()
            if name == "settings":
                out.settings = (codes, [_settings_from_json(t) for t in texts])
            else:
                out.coded[name] = (codes, texts)
    return out
