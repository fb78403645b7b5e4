"""What each side of a canary ran at each (op, size), from the evidence beside its records.

NCCL (records of backend ``nccl``), per side, through :func:`collscope.analysis.logged_choices.logged_choices` over
that side's points (:mod:`collscope.analysis.point_evidence`):

* the TUNING choice lines of the point's log (``AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE ...``, NCCL >=
  2.21): algorithm and protocol;
* else ``points/<id>.check.json``'s ``effects.NCCL_ALGO.used`` when it names one algorithm (protocol unknown);
* else the TUNING table of the point's log: the (algorithm, protocol) NCCL's own cost model rates fastest at that
  size (latency + size / bandwidth of its cells), said to be a prediction, not a logged choice.

Open MPI (records of engine ``mpi``), per side and size, as ``coll tuned`` decides (file rules first, then a forced
algorithm, then its fixed decisions): a rules file named by ``OMPI_MCA_coll_tuned_dynamic_rules_filename``
(:mod:`.why_ompi`, the rule for the records' rank count and size), else ``OMPI_MCA_coll_tuned_<coll>_algorithm``,
both only with ``OMPI_MCA_coll_tuned_use_dynamic_rules`` on (taken as on when unrecorded and something is forced:
``load_results`` leaves it out, collscope's knobs imply it), read from the records' settings (the frame's knob
columns) and environment. A relative rules-file path is read from the working directory. The message size given to
the rules is the record's ``size_bytes`` (Open MPI's for all_reduce, bcast and reduce). Choices are per (side, op,
size): records of one op at several rank counts share them.

Evidence that cannot be read withholds a choice (and says so in a note); it never invents one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from collscope.analysis.logged_choices import logged_choices
from collscope.analysis.point_evidence import point_logs
from collscope.canary.why_ompi import OmpiRules, read_ompi_rules
from collscope.collectives.nccl_log.tuning import TuningTable, normalize_algorithm, normalize_protocol
from collscope.errors import CollscopeError
from collscope.vocab.nccl import OP_FUNC
from collscope.vocab.ompi import (
    DYNAMIC_RULES,
    OMPI_ALGORITHMS,
    OP_OMPI_COLL,
    ompi_algorithm_id,
    ompi_algorithm_knob,
    ompi_algorithm_name,
)

__all__ = ["Choice", "Evidence", "side_choices", "RULES_FILE", "TUNING_HINT"]

RULES_FILE = "OMPI_MCA_coll_tuned_dynamic_rules_filename"
TUNING_HINT = ("run that side with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING (NCCL >= 2.21 logs the algorithm and "
               "protocol of every call; a sweep's verification run keeps it in points/<id>.verify.log)")
_LOG = "NCCL TUNING log lines"
_CHECK = "check.json effects (NCCL_ALGO used)"
_TABLE = "NCCL TUNING table (its cost model's fastest cell: predicted, not logged)"
_TRUE = frozenset({"1", "true", "yes", "on", "enabled"})

Key = tuple[str, str, int]
"""(side, op, size_bytes)."""


@dataclass(frozen=True, slots=True)
class Choice:
    """What one side ran at one (op, size)."""

    text: str
    """``NVLSTree/Simple``, ``Tree`` (protocol unknown), ``ring (4)``, ``fixed decisions``."""
    source: str
    library: str
    """``NCCL`` or ``Open MPI``."""
    algorithm: str | None = None
    """NCCL's spelling (``NVLSTree``); Open MPI: the algorithm's name."""
    protocol: str | None = None
    """NCCL's spelling (``Simple``); None when unknown (or Open MPI)."""
    ompi_id: int | None = None
    rule: str | None = None
    """Open MPI: the rules-file line that decided, ``<file>:<line>: <rule>``."""

    def differs(self, other: Choice) -> bool:
        """A different algorithm, or both protocols known and different."""
        if self.library != other.library:
            return True
        if self.library == "Open MPI":
            return self.ompi_id != other.ompi_id
        if self.algorithm != other.algorithm:
            return True
        return self.protocol is not None and other.protocol is not None and self.protocol != other.protocol


@dataclass(frozen=True, slots=True)
class Evidence:
    choices: dict[Key, Choice]
    notes: tuple[str, ...]
    libraries: dict[str, str]
    """side -> ``NCCL`` / ``Open MPI`` / another backend's name, for the records' engine."""


def _nccl_choice(algo: str, proto: str, source: str) -> Choice:
    return Choice(text=f"{algo}/{proto}" if proto else algo, source=source, library="NCCL", algorithm=algo,
                  protocol=proto or None)


def _side_dirs(rows: pd.DataFrame, results_dirs: Sequence[Path]) -> list[Path]:
    """The results directories this side's records were read from (the frame's ``input``), else all of them."""
    if "input" not in rows.columns:
        return list(results_dirs)
    inputs = {os.path.normpath(str(i)) for i in rows["input"].dropna().unique()}
    mine = [d for d in results_dirs if os.path.normpath(str(d)) in inputs]
    return mine or list(results_dirs)


def _table_choice(tables: dict[str, list[TuningTable]], dirs: Sequence[Path], point_id: str, op: str,
                  size: int) -> Choice | None:
    """The fastest (algorithm, protocol) at ``size`` in the first TUNING table of the point's logs (``tables``
    caches the point's tables: a log is parsed once)."""
    func = OP_FUNC.get(op)
    if func is None:
        return None
    if point_id not in tables:
        tables[point_id] = [log.tuning for d in dirs for log in point_logs(d / "points", point_id)
                            if log.tuning is not None]
    for table in tables[point_id]:
        best: tuple[float, str, str] | None = None
        for (algo, proto) in table.cells.get(func, {}):
            a, p = normalize_algorithm(algo), normalize_protocol(proto)
            t = table.predicted_time_us(func, a, p, size)
            if t is not None and (best is None or t < best[0]):
                best = (t, a, p)
        if best is not None:
            return _nccl_choice(best[1], best[2], _TABLE)
    return None


def _nccl(side: str, rows: pd.DataFrame, results_dirs: Sequence[Path], out: dict[Key, Choice]) -> None:
    dirs = _side_dirs(rows, results_dirs)
    logged = logged_choices(dirs, rows.assign(config=side))
    for (_, op, size), (algo, proto) in logged.items():
        out[(side, op, size)] = _nccl_choice(algo, proto, _LOG if proto else _CHECK)
    if "point_id" not in rows.columns:
        return
    cells = rows[["op", "size_bytes", "point_id"]].dropna().drop_duplicates()
    tables: dict[str, list[TuningTable]] = {}
    for op, size, point_id in zip(cells["op"], cells["size_bytes"], cells["point_id"], strict=True):
        key = (side, str(op), int(size))
        if key not in out:
            found = _table_choice(tables, dirs, str(point_id), str(op), int(size))
            if found is not None:
                out[key] = found


def _settings(row: Mapping[Any, object]) -> dict[str, tuple[str, str]]:
    """Variable -> (value, where it was read): the row's environment (``K=V;...``) overlaid by its knob columns
    (the point's own settings)."""
    out: dict[str, tuple[str, str]] = {}
    env = row.get("environment")
    if isinstance(env, str):
        for item in env.split(";"):
            name, sep, value = item.partition("=")
            if sep:
                out[name] = (value, "the ranks' environment")
    for column, setting in row.items():
        if isinstance(column, str) and column.startswith("OMPI_MCA_") and isinstance(setting, str):
            out[column] = (setting, "the records' settings")
    return out


class _RulesCache:
    def __init__(self) -> None:
        self.files: dict[str, OmpiRules | str] = {}

    def get(self, path: str) -> OmpiRules | str:
        """The rules, or why they could not be read."""
        if path not in self.files:
            try:
                self.files[path] = read_ompi_rules(path)
            except (CollscopeError, OSError) as exc:
                self.files[path] = str(exc)
        return self.files[path]


def _ompi_choice(op: str, nranks: int, size: int, settings: Mapping[str, tuple[str, str]], cache: _RulesCache,
                 notes: list[str], side: str) -> Choice | None:
    coll = OP_OMPI_COLL.get(op)
    if coll is None:
        return None
    rules_path = settings.get(RULES_FILE, (None, ""))[0]
    knob = ompi_algorithm_knob(coll)
    value, where = settings.get(knob, (None, ""))
    # load_results drops DYNAMIC_RULES from the settings (collscope's knobs imply it): unknown -> on when forcing
    dynamic = settings[DYNAMIC_RULES][0].strip().lower() in _TRUE if DYNAMIC_RULES in settings else \
        bool(rules_path or value)
    if dynamic and rules_path:
        rules = cache.get(rules_path)
        if isinstance(rules, str):
            note = f"side {side}: the Open MPI rules file {rules_path} could not be read ({rules}); what it chose " \
                   "is unknown"
            if note not in notes:
                notes.append(note)
            return None
        rule = rules.rule_for(coll, nranks, size)
        if rule is not None and rule.algorithm != 0 and rule.algorithm < len(_names(coll)):
            return Choice(text=_label(coll, rule.algorithm), library="Open MPI", algorithm=_names(coll)[rule.algorithm],
                          ompi_id=rule.algorithm, source=f"{RULES_FILE} (its rule for {nranks} ranks)",
                          rule=f"{rules_path}:{rule.line}: {rule.text()}")
    algo_id = ompi_algorithm_id(coll, value) if value is not None else None
    if dynamic and algo_id:
        return Choice(text=_label(coll, algo_id), library="Open MPI", algorithm=_names(coll)[algo_id],
                      ompi_id=algo_id, source=f"{knob}={value} ({where})")
    return Choice(text="fixed decisions", library="Open MPI", algorithm=None, ompi_id=0,
                  source="no forced algorithm nor rules file: Open MPI's compiled-in decisions (coll tuned)")


def _names(coll: str) -> tuple[str, ...]:
    return OMPI_ALGORITHMS[coll]


def _label(coll: str, algo_id: int) -> str:
    """``ring (4)``, ``recursive doubling (3)``."""
    return f"{ompi_algorithm_name(coll, algo_id).replace('_', ' ')} ({algo_id})"


def _ompi(side: str, rows: pd.DataFrame, out: dict[Key, Choice], notes: list[str], cache: _RulesCache) -> None:
    for row in rows.to_dict("records"):
        key = (side, str(row["op"]), int(row["size_bytes"]))
        if key in out:
            continue
        found = _ompi_choice(key[1], int(row["nranks"]), key[2], _settings(row), cache, notes, side)
        if found is not None:
            out[key] = found


def _library(rows: pd.DataFrame) -> str:
    engines = set(rows["engine"].dropna().astype(str)) if "engine" in rows.columns else set()
    backends = set(rows["backend"].dropna().astype(str)) if "backend" in rows.columns else set()
    if "nccl" in backends or "nccl-tests" in engines:
        return "NCCL"
    if "mpi" in engines:
        return "Open MPI"
    return ", ".join(sorted(backends)) or "unknown"


def side_choices(results_dirs: Iterable[Path | str], frame: pd.DataFrame) -> Evidence:
    """Per (side, op, size) measured, what that side ran, with notes on what could not be read (module doc)."""
    dirs = [Path(d) for d in results_dirs]
    out: dict[Key, Choice] = {}
    notes: list[str] = []
    libraries: dict[str, str] = {}
    cache = _RulesCache()
    for side, rows in frame.groupby("side", observed=True, sort=True):
        library = _library(rows)
        libraries[str(side)] = library
        if library == "NCCL":
            _nccl(str(side), rows, dirs, out)
        elif library == "Open MPI":
            _ompi(str(side), rows, out, notes, cache)
    return Evidence(choices=out, notes=tuple(notes), libraries=libraries)
