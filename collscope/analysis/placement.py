"""Were two compared configurations measured on the same hosts? A sweep compares settings, not nodes.

Every record carries the hosts of its point (``hosts``, joined by ``","`` in :func:`~.load.load_results`' frame).
A configuration's hosts are the union over its records. Within one comparison group (:data:`COMPARED_KEYS`: the
configurations that analyze's crossovers and recommend set against each other), every configuration is held
against the group's baseline: the default when it was measured on known hosts, else the configuration with the
most records. One whose hosts differ from the baseline's is a :class:`HostMismatch`; any two configurations of a
group whose hosts differ include at least one such, so the list covers every compared pair.

Records without hosts (an nccl-tests table without its rank lines) say nothing either way: a configuration
whose hosts are all unknown is left out of the check (never called a mismatch, never called the same). The
tests of a ``collscope locate`` directory (``frame.attrs["node_tests"]``) compare nodes by design and are left
out too.

Where a mismatch comes from: results written before sweep shards split by repeat (shards held whole
configurations, and a job array's shards run on different nodes), or points placed by hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import pandas as pd

from collscope.vocab.configs import DEFAULT_CONFIG

__all__ = ["COMPARED_KEYS", "ConfigHosts", "HostMismatch", "config_hosts", "host_mismatches", "hosts_text",
           "mismatch_for"]

COMPARED_KEYS = ("backend", "op", "nranks", "nnodes", "in_place", "input")
"""The configurations of one such group are compared with each other (``input``: where the records were read
from; frames without the column are one input)."""

_SHOWN_HOSTS = 8
"""Host lists longer than this are cut in sentences (the count is said)."""

GroupKey = tuple[Any, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class HostMismatch:
    """``config`` was measured on other hosts than ``baseline`` of the same group."""

    backend: str | None
    op: str
    nranks: int | None
    nnodes: int | None
    in_place: bool | None
    input: str | None
    config: str
    hosts: tuple[str, ...]
    baseline: str
    baseline_hosts: tuple[str, ...]

    def sentence(self) -> str:
        """``NCCL_ALGO=Tree measured on node3,node4, default on node1,node2: a node difference, not a setting
        difference``."""
        return (f"{self.config} measured on {hosts_text(self.hosts)}, {self.baseline} on "
                f"{hosts_text(self.baseline_hosts)}: a node difference, not a setting difference")

    def where(self, *, with_input: bool = True) -> str:
        """``all_reduce 4r/2n`` (the group), with its input when known and asked for."""
        nodes = "" if self.nnodes is None else f"/{self.nnodes}n"
        ranks = "" if self.nranks is None else f" {self.nranks}r{nodes}"
        place = " in-place" if self.in_place else ""
        source = "" if self.input is None or not with_input else f" ({self.input})"
        return f"{self.op}{ranks}{place}{source}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hosts"] = list(self.hosts)
        out["baseline_hosts"] = list(self.baseline_hosts)
        out["detail"] = self.sentence()
        return out


def hosts_text(hosts: Sequence[str]) -> str:
    """``node1,node2``; more than :data:`_SHOWN_HOSTS` names are cut (``a,b,...,h and 4 more (12 hosts)``)."""
    names = list(hosts)
    if len(names) <= _SHOWN_HOSTS:
        return ",".join(names)
    return f"{','.join(names[:_SHOWN_HOSTS])} and {len(names) - _SHOWN_HOSTS} more ({len(names)} hosts)"


def _plain(value: Any) -> Any:
    return None if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)) else value


@dataclass(frozen=True, slots=True)
class ConfigHosts:
    """What :func:`config_hosts` found: per comparison group, per configuration, its hosts and records."""

    keys: tuple[str, ...]
    """The columns of a comparison group, in the order of the group tuples."""
    hosts: dict[GroupKey, dict[str, frozenset[str]]]
    """Group -> configuration -> the union of its records' hosts (configurations without a known host absent)."""
    records: dict[tuple[GroupKey, str], int]
    """(group, configuration) -> its records that name their hosts."""


_KEY_LIMIT = 2**62
"""Largest mixed-radix key :func:`_distinct` builds; beyond it pandas' groupby does the work."""
_BINCOUNT_LIMIT = 1 << 22
"""Up to this many possible combinations :func:`_distinct` counts them with one bincount, else it sorts."""


def _distinct(df: pd.DataFrame, columns: list[str]) -> list[tuple[dict[str, Any], int]]:
    """The distinct value combinations of ``columns`` and how many rows hold each: the columns' integer codes
    (a categorical's own) as one mixed-radix integer per row, counted by numpy (a million records in tens of
    milliseconds; a groupby over eight columns takes several times that)."""
    coded = []
    radix = 1
    for name in columns:
        column = df[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes, uniques = np.asarray(column.cat.codes, dtype=np.int64), list(column.cat.categories)
        else:
            raw, index = pd.factorize(column, use_na_sentinel=True)
            codes, uniques = np.asarray(raw, dtype=np.int64), list(index)
        coded.append((codes, uniques))
        radix *= len(uniques) + 1
    if radix >= _KEY_LIMIT:
        counted = df.groupby(columns, observed=True, dropna=False, sort=False).size()
        return [(dict(zip(columns, cast(tuple[Any, ...], index), strict=True)), int(n)) for index, n in counted.items()]
    key = np.zeros(len(df), dtype=np.int64)
    step = 1
    for codes, uniques in coded:
        key += (codes + 1) * step
        step *= len(uniques) + 1
    if step <= _BINCOUNT_LIMIT:  # few combinations possible: count them directly (no sort)
        tally = np.bincount(key, minlength=step)
        keys = np.flatnonzero(tally)
        counts = tally[keys]
    else:
        keys, counts = np.unique(key, return_counts=True)
    out = []
    for packed, n in zip(keys.tolist(), counts.tolist(), strict=True):
        values: dict[str, Any] = {}
        for name, (_, uniques) in zip(columns, coded, strict=True):  # the digits back: code + 1, 0 for missing
            packed, digit = divmod(packed, len(uniques) + 1)
            values[name] = None if digit == 0 else uniques[digit - 1]
        out.append((values, int(n)))
    return out


def config_hosts(df: pd.DataFrame, keys: Sequence[str] = COMPARED_KEYS) -> ConfigHosts:
    """Per comparison group (the values of ``keys``, None for a column ``df`` lacks), per configuration: the
    union of its records' hosts, in one pass over the distinct (group, configuration, hosts) of ``df``."""
    wanted = tuple(keys)
    found = ConfigHosts(wanted, {}, {})
    if df.empty or "hosts" not in df or "config" not in df:
        return found
    skip = df.attrs.get("node_tests") or ()
    if skip and "input" in df:  # a locate directory's tests compare nodes by design
        df = df[~df["input"].astype(object).isin(list(skip))]
    columns = [*(k for k in wanted if k in df), "config", "hosts"]
    for values, n in _distinct(df, columns):
        hosts = _plain(values["hosts"])
        if not isinstance(hosts, str) or not hosts:
            continue
        group = tuple(_plain(values.get(k)) for k in wanted)
        per_config = found.hosts.setdefault(group, {})
        config = str(values["config"])
        per_config[config] = per_config.get(config, frozenset()) | frozenset(h for h in hosts.split(",") if h)
        found.records[(group, config)] = found.records.get((group, config), 0) + int(n)
    return found


def _sorted_hosts(hosts: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(hosts, key=lambda h: (len(h), h)))  # node2 before node10


def mismatch_for(group: dict[str, Any], config: str, hosts: frozenset[str], baseline: str,
                 baseline_hosts: frozenset[str]) -> HostMismatch:
    """``group``: the comparison group's values by column (a column not given is None)."""
    backend, op, nranks, nnodes, in_place, source = (_plain(group.get(k)) for k in COMPARED_KEYS)
    return HostMismatch(backend=None if backend is None else str(backend), op=str(op),
                        nranks=None if nranks is None else int(nranks), nnodes=None if nnodes is None else int(nnodes),
                        in_place=None if in_place is None else bool(in_place),
                        input=None if source is None else str(source), config=config,
                        hosts=_sorted_hosts(hosts), baseline=baseline, baseline_hosts=_sorted_hosts(baseline_hosts))


def host_mismatches(df: pd.DataFrame, keys: Sequence[str] = COMPARED_KEYS, *,
                    found: ConfigHosts | None = None) -> list[HostMismatch]:
    """Every configuration measured on other hosts than its group's baseline (module docstring), in group and
    configuration order. ``keys``: the columns of a comparison group (recommend compares configurations of
    different inputs with each other: it leaves ``input`` out); ``found``: :func:`config_hosts` of ``df`` when
    the caller has it already."""
    placed = config_hosts(df, keys) if found is None else found
    out: list[HostMismatch] = []
    for group, configs in placed.hosts.items():
        if len(configs) < 2:
            continue
        baseline = DEFAULT_CONFIG if DEFAULT_CONFIG in configs else max(
            (placed.records.get((group, c), 0), c) for c in configs)[1]  # else the most records
        for config in sorted(configs):
            if config != baseline and configs[config] != configs[baseline]:
                out.append(mismatch_for(dict(zip(placed.keys, group, strict=True)), config, configs[config],
                                        baseline, configs[baseline]))
    return out
