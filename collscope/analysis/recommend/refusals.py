"""What recommend refuses to recommend from: comparisons that are not comparisons of settings.

* **Different hosts** (:mod:`collscope.analysis.placement`): a configuration measured on other hosts than the
  one it would be compared with differs by its nodes, not by its setting (a sweep whose shards held whole
  configurations, before shards split by repeat). recommend compares configurations across inputs, so the
  groups here leave ``input`` out.
* **One configuration from two inputs** (:mod:`collscope.analysis.sources`): a sweep's ``default`` and a check
  run's ``default`` are not repeats of one configuration, and recommend has no place for two of them:
  ``collscope analyze A B`` shows them side by side.

Both are :class:`~collscope.errors.ConfigError` (exit 2) naming the configurations, their hosts or inputs, and
the way out.
"""

from __future__ import annotations

import pandas as pd

from collscope.analysis.placement import COMPARED_KEYS, host_mismatches
from collscope.errors import ConfigError

__all__ = ["refuse_incomparable"]

_SHOWN = 10
"""Lines of a refusal before the rest is counted."""


def _lines(lines: list[str]) -> str:
    shown = [f"  {line}" for line in lines[:_SHOWN]]
    if len(lines) > _SHOWN:
        shown.append(f"  and {len(lines) - _SHOWN} more")
    return "\n".join(shown)


def _pooled_inputs(frame: pd.DataFrame) -> list[str]:
    """``all_reduce default 2r: results/sweep, check.jsonl``: configurations that two inputs measured."""
    if "input" not in frame or frame["input"].nunique(dropna=True) < 2:
        return []
    keys = [k for k in ("backend", "op", "config", "nranks", "nnodes", "in_place") if k in frame]
    distinct = frame[[*keys, "input"]].dropna(subset=["input"]).drop_duplicates().astype(object)
    out = []
    for key, group in distinct.groupby(keys, dropna=False, sort=True):
        if len(group) > 1:
            where = dict(zip(keys, key, strict=True))
            out.append(f"{where['op']} {where['config']} {where['nranks']}r: "
                       + ", ".join(str(v) for v in group["input"]))
    return out


def refuse_incomparable(frame: pd.DataFrame) -> None:
    """Raise ConfigError when ``frame`` (the records recommend compares) holds a comparison of hosts or of
    inputs rather than of settings (module docstring)."""
    mismatches = host_mismatches(frame, tuple(k for k in COMPARED_KEYS if k != "input"))
    if mismatches:
        raise ConfigError(
            "recommend compares settings, and these configurations were measured on different hosts than the "
            "ones they would be compared with:\n"
            + _lines([f"{m.where()}: {m.sentence()}" for m in mismatches])
            + "\nnothing is recommended from a node difference: measure every configuration on the same nodes "
              "(a sweep's --shard splits repeats, so each shard measures every configuration on its nodes), "
              "or pass only results measured on one node set")
    pooled = _pooled_inputs(frame)
    if pooled:
        raise ConfigError(
            "the same configurations come from several inputs; recommend never pools them as repeats of one "
            "configuration:\n" + _lines(pooled)
            + "\nrecommend from one input at a time, and compare the inputs with `collscope analyze A B`, which "
              "shows them side by side and says whether they differ beyond noise")
