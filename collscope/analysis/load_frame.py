"""The DataFrame :func:`collscope.analysis.load.load_results` returns, built from decoded record columns
(:mod:`.record_columns`): string columns as categoricals, the ``config`` column named once per distinct settings and
rail (run-length: never per row), the per-input columns (``applied``, ``failure``, ``input``) and one column per
tuning variable. The column order and meanings are :mod:`.load`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from collscope.analysis.record_columns import FIELDS, NULLABLE_INT, TYPED, RecordColumns, first_appearance
from collscope.vocab.configs import DEFAULT_CONFIG, config_of, is_tuning_variable

__all__ = ["frame_of"]


def _from_codes(codes: Any, categories: Sequence[Any]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(categories)), validate=False)


def _categorical(codes: np.ndarray, uniques: Sequence[Any]) -> pd.Categorical:
    codes, uniques = first_appearance(codes, uniques)
    return _from_codes(codes, [str(u) for u in uniques])


def _per_part(values: Sequence[Any], part: np.ndarray) -> pd.Categorical:
    """A categorical of one value per part (``values``), spread over the parts' rows."""
    codes, uniques = pd.factorize(np.asarray(list(values) + [None], dtype=object), use_na_sentinel=True)
    return _categorical(codes.astype(np.int32)[part], list(uniques))


def frame_of(cols: RecordColumns, *, configs: Sequence[str | None], applied: Sequence[bool | None],
             failures: Sequence[str | None], labels: Sequence[str]) -> pd.DataFrame:
    """The DataFrame of ``cols``; the other arguments hold one value per part of the input (``cols.part`` indexes
    them): the configuration name the input gave (None: from the settings), the forced settings' verdict, the
    point's failure and the input's label."""
    part = cols.part
    columns: dict[str, Any] = {}
    for name in FIELDS:
        if name in TYPED:
            columns[name] = cols.typed[name]
        elif name in NULLABLE_INT:
            values, mask = cols.nullable[name]
            columns[name] = pd.arrays.IntegerArray(values, mask)
        elif name != "settings":
            columns[name] = _categorical(*cols.coded[name])

    codes, distinct = first_appearance(*cols.settings)
    counts = np.bincount(part, minlength=len(labels))
    columns["config"] = _config_column(codes, distinct, columns["rail"], list(configs), counts)
    columns["applied"] = pd.arrays.BooleanArray(np.array([v is True for v in applied], dtype=bool)[part],
                                                np.array([v is None for v in applied], dtype=bool)[part])
    columns["failure"] = _per_part(failures, part)
    columns["input"] = _per_part(labels, part)

    knobs = sorted({k for s in distinct for k, _ in s if is_tuning_variable(k)})
    for knob in knobs:
        per_settings = [dict(s).get(knob) for s in distinct] + [None]
        kcodes, kuniq = pd.factorize(np.asarray(per_settings, dtype=object), use_na_sentinel=True)
        columns[knob] = _categorical(kcodes.astype(np.int32)[codes], list(kuniq))
    return pd.DataFrame(columns)


def _config_column(codes: np.ndarray, distinct: Sequence[Any], rails: pd.Categorical,
                   given: list[str | None], counts: np.ndarray) -> pd.Categorical:
    """The ``config`` column: each record's settings and rail (the ``rail`` column) named once per distinct pair
    (:func:`collscope.vocab.configs.config_of`; code -1, no settings object, is the default's settings), or the
    name its input gave (``given``, one per part of ``counts`` rows: a locate test's, :func:`.load._locate_config`;
    None elsewhere). Records without a rail cost nothing more than their settings (1,000,000 records)."""
    if (rails.codes < 0).all():  # code -1 (no settings object) picks the last name below: the default
        pairs, names = codes, [config_of(dict(s)) for s in distinct]
    else:
        width = len(rails.categories) + 1
        pairs, distinct_pairs = pd.factorize(codes.astype(np.int64) * width + (rails.codes.astype(np.int64) + 1))
        names = []
        for pair in distinct_pairs.tolist():
            s, r = divmod(int(pair), width)
            names.append(config_of(dict(distinct[s]) if s >= 0 else {}, str(rails.categories[r - 1]) if r else None))
    if any(g is not None for g in given):
        per_row = np.asarray([*names, DEFAULT_CONFIG], dtype=object)[pairs]  # -1: the default
        per_part = np.repeat(np.array(given, dtype=object), counts)
        per_row = np.where(pd.isna(per_part), per_row, per_part)
        pairs, uniq = pd.factorize(per_row)
        names = [str(u) for u in uniq]
    config_codes, config_names = pd.factorize(np.asarray([*names, DEFAULT_CONFIG], dtype=object))
    return _from_codes(config_codes.astype(np.int32)[pairs], list(config_names))
