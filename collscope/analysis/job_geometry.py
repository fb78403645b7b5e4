"""The geometry of each job in a loaded frame: what its records say, with the user's overrides winning.

:func:`~.load.load_results` groups the records by ``(nranks, nnodes)`` (the groups the models work on) and gives
each group one :class:`~collscope.geometry.Geometry` built from the evidence of its sources:

* an nccl-tests output: the run's own geometry (its rank lines, hosts, busbw/algbw, NCCL INFO lines) when the
  parser records one, else its ``nranks`` (with how it was found) and the hosts of its rank lines;
* Measurement records (results directories, JSONL): their ``nranks`` and ``nnodes`` fields, and the hosts they
  name (``nnodes`` None: unknown, at least as many nodes as hosts named);
* ``--nranks``, ``--nnodes``, ``--nvl-domain`` (the ``overrides``): they win, and a note names the clue they
  overrode. They describe one job: inputs that hold several rank or node counts refuse them.

Unknown stays unknown (``nnodes`` None is never one node): the models then say which option supplies it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from collscope.errors import ConfigError
from collscope.geometry import GEOMETRY_FIELDS, OVERRIDE_OPTIONS, Geometry, GeometryEvidence, GeometryField

__all__ = ["Clue", "GroupGeometry", "run_clues", "record_clues", "frame_clues", "apply_overrides",
           "group_geometries", "geometry_of", "model_nvl_domain", "records_gpu", "host_backends"]


NOTE = "note"
"""The ``field`` of a :class:`Clue` that carries a reader's note (an override it applied disagreed with a clue)."""


@dataclass(frozen=True, slots=True)
class Clue:
    """One piece of evidence for one geometry field (``low == high``: exact)."""

    field: str
    low: int | None
    high: int | None
    says: str


@dataclass(frozen=True, slots=True)
class GroupGeometry:
    """The geometry of the records of one ``(nranks, nnodes)`` group (``nnodes`` None: not recorded)."""

    nranks: int
    nnodes: int | None
    geometry: Geometry
    host_backends: str | None = None
    """The backends when every record of the group ran on the hosts' CPUs (:func:`host_backends`): no NVLink
    domain applies to it."""

    def label(self) -> str:
        nodes = "unknown nodes" if self.nnodes is None else f"{self.nnodes} node{'s' if self.nnodes != 1 else ''}"
        return f"{self.nranks} ranks on {nodes}"

    def lines(self, fields: Sequence[GeometryField]) -> list[str]:
        """The geometry's lines (:meth:`Geometry.lines`); a host group's NVLink domain says it does not apply
        instead of asking for ``--nvl-domain``."""
        out = self.geometry.lines(fields)
        if self.host_backends:
            out = [f"nvl_domain: does not apply (host collectives: {self.host_backends}; no GPU named)"
                   if line.startswith("nvl_domain:") else line for line in out]
        return out

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"group": self.label(), **self.geometry.to_json()}
        if self.host_backends:
            out["host_backends"] = self.host_backends
        return out


def run_clues(run: Any, source: str) -> list[Clue]:
    """The clues of one parsed nccl-tests run (:class:`~collscope.collectives.nccl_tests.records.NcclTestsRun`)."""
    geometry = getattr(run, "geometry", None)
    if isinstance(geometry, Geometry):  # the parser read every clue of the output
        out = [Clue(NOTE, None, None, f"{note} ({source})") for note in geometry.notes]
        for name in GEOMETRY_FIELDS:
            known = geometry.get(name)
            # an override the parser was given is applied again by group_geometries: its own clues only
            evidence = [e for e in known.evidence if not e.endswith("(as passed)")]
            if known.overridden and not evidence:
                continue
            says = "; ".join(evidence) or "the nccl-tests output"
            if known.value is not None:
                out.append(Clue(name, known.value, known.value, f"{says} ({source})"))
            elif known.low is not None or known.high is not None:
                out.append(Clue(name, known.low, known.high, f"{says} ({source})"))
        return out
    out = [Clue("nranks", run.nranks, run.nranks, f"{run.nranks} ranks ({run.nranks_source}) in {source}")]
    hosts = len(set(run.hosts))
    if run.nnodes is not None:
        out.append(Clue("nnodes", run.nnodes, run.nnodes, f"hosts of the rank lines: {run.nnodes} ({source})"))
    elif hosts:
        out.append(Clue("nnodes", hosts, None, f"hosts of the rank lines shown: {hosts}, the list is elided "
                                               f"({source})"))
    return out


def record_clues(nranks: int, nnodes: int | None, hosts: str | None, source: str) -> list[Clue]:
    """The clues of Measurement records with these fields (``hosts`` joined by ``","``, as the frame holds them)."""
    out = [Clue("nranks", nranks, nranks, f"nranks {nranks} in the records of {source}")]
    if nnodes is not None:
        out.append(Clue("nnodes", nnodes, nnodes, f"nnodes {nnodes} in the records of {source}"))
    else:
        names = {h for h in (hosts or "").split(",") if h}
        if names:
            out.append(Clue("nnodes", len(names), None, f"hosts named by the records of {source}: {len(names)} "
                                                        "(the records do not give nnodes)"))
    return out


def _distinct(column: pd.Series) -> list[Any]:
    return [None if pd.isna(v) else int(v) for v in pd.unique(column)]


def apply_overrides(frame: pd.DataFrame, nranks: int | None, nnodes: int | None) -> None:
    """Set the frame's ``nranks``/``nnodes`` columns to the overrides (in place); they describe one job, so inputs
    holding several rank or node counts are a ConfigError naming them."""
    if frame.empty:
        return
    for name, value in (("nranks", nranks), ("nnodes", nnodes)):
        if value is None:
            continue
        known = sorted({v for v in _distinct(frame[name]) if v is not None})
        counts = sorted(set(_distinct(frame["nranks"])))
        if len(counts) > 1 or len(known) > 1:
            shown = ", ".join(str(v) for v in (counts if len(counts) > 1 else known))
            what = "rank counts" if len(counts) > 1 else "node counts"
            raise ConfigError(f"{OVERRIDE_OPTIONS[name]} {value} describes one job, but the inputs hold "  # type: ignore[index]
                              f"{len(counts) if len(counts) > 1 else len(known)} {what} ({shown}): "
                              "analyse each job's results on their own")
    if nranks is not None:
        frame["nranks"] = np.full(len(frame), nranks, dtype=np.int64)
    if nnodes is not None:
        frame["nnodes"] = pd.array(np.full(len(frame), nnodes, dtype=np.int64), dtype="Int64")


def frame_clues(frame: pd.DataFrame, parts: Sequence[tuple[int, str, Sequence[Clue] | None]]
                ) -> dict[tuple[int, int | None], list[Clue]]:
    """The evidence of each ``(nranks, nnodes)`` group of ``frame``, whose rows come from ``parts`` in order:
    (rows, the input as the user named it, the clues of an nccl-tests output or None for records). Records are
    read once per distinct (part, nranks, nnodes, hosts), not per row."""
    counts = np.array([p[0] for p in parts], dtype=np.int64)
    # one source per label (a results directory's points share theirs), one per nccl-tests run
    source_of: dict[str, int] = {}
    source = np.array([source_of.setdefault(label if clues is None else f"{i}\0run", len(source_of))
                       for i, (_, label, clues) in enumerate(parts)], dtype=np.int64)
    part = np.repeat(np.arange(len(parts)), counts)
    columns = [np.repeat(source, counts), frame["nranks"].to_numpy(dtype=np.int64),
               frame["nnodes"].fillna(-1).to_numpy(dtype=np.int64), _codes(frame["hosts"])]
    # rows equal to the one before carry nothing new: keep the runs' heads (records of a point are adjacent)
    head = np.ones(len(frame), dtype=bool)
    if len(frame):
        head[1:] = np.logical_or.reduce([c[1:] != c[:-1] for c in columns])
    seen: set[tuple[int, ...]] = set()
    out: dict[tuple[int, int | None], list[Clue]] = {}
    hosts_col = frame["hosts"].to_numpy(dtype=object)
    for row in np.flatnonzero(head).tolist():
        key = tuple(int(c[row]) for c in columns)
        if key in seen:
            continue
        seen.add(key)
        n, nodes, hosts = key[1], None if key[2] < 0 else key[2], hosts_col[row]
        _, label, clues = parts[int(part[row])]
        found = clues if clues is not None else record_clues(n, nodes, None if pd.isna(hosts) else str(hosts),
                                                             label or "the records")
        out.setdefault((n, nodes), []).extend(found)
    return out


def _codes(column: pd.Series) -> np.ndarray:
    """Integer codes of a column (-1 where missing): a categorical's own, else factorized."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return np.asarray(column.cat.codes, dtype=np.int64)
    return np.asarray(pd.factorize(column, use_na_sentinel=True)[0], dtype=np.int64)


def group_geometries(clues: Mapping[tuple[int, int | None], Sequence[Clue]],
                     overrides: Mapping[str, int | None]) -> list[GroupGeometry]:
    """One resolved geometry per ``(nranks, nnodes)`` group (ParseError when a group's clues disagree); the
    ``nranks``/``nnodes`` overrides replace the recorded values in the groups' keys, as
    :func:`apply_overrides` does in the frame."""
    merged: dict[tuple[int, int | None], list[Clue]] = {}
    for (n, nodes), found in clues.items():
        merged.setdefault((overrides.get("nranks") or n, overrides.get("nnodes") or nodes), []).extend(found)
    out = []
    for (nranks, nnodes), group in merged.items():
        ev = GeometryEvidence(source=f"{nranks} ranks")
        seen: set[Clue] = set()
        notes: list[str] = []
        for clue in group:
            if clue in seen:
                continue
            seen.add(clue)
            if clue.field == NOTE:
                notes.append(clue.says)
            else:
                ev.between(clue.field, clue.low, clue.high, clue.says)  # type: ignore[arg-type]
        geometry = ev.resolve(overrides)
        out.append(GroupGeometry(nranks, nnodes, replace(geometry, notes=(*notes, *geometry.notes))))
    return sorted(out, key=lambda g: (g.nranks, -1 if g.nnodes is None else g.nnodes))


def model_nvl_domain(geometry: Geometry | None, nranks: int) -> int | None:
    """The NVLink domain the models use for ``nranks`` ranks: the geometry's value, or, when only a lower bound
    is known and it holds every rank (MNNVL lines: ``localRanks 8`` with ``MNNVL 1``), that bound (any domain
    holding every rank models the same); else None (the node)."""
    if geometry is None:
        return None
    known = geometry.get("nvl_domain")
    if known.value is not None:
        return known.value
    if known.low is not None and known.low >= nranks:
        return known.low
    return None


def geometry_of(frame: pd.DataFrame, nranks: int, nnodes: Any) -> Geometry | None:
    """The geometry :func:`~.load.load_results` recorded for one group of ``frame`` (None when none was)."""
    nodes = None if nnodes is None or pd.isna(nnodes) else int(nnodes)
    for group in frame.attrs.get("geometry", ()) or ():
        if isinstance(group, GroupGeometry) and group.nranks == nranks and group.nnodes == nodes:
            return group.geometry
    return None


def records_gpu(frame: pd.DataFrame, nranks: int, nnodes: int) -> tuple[str | None, str]:
    """The GPU the records of one (nranks, nnodes) group name, and how that was found.

    ``(name, evidence)`` when the group's records name exactly one GPU (nccl-tests' rank lines, a Measurement's
    ``gpu``); ``(None, why)`` when they name none or several (a mix is never averaged into one model)."""
    if "gpu" not in frame.columns:
        return None, "the records do not name their GPU"
    group = frame[(frame["nranks"] == nranks) & (frame["nnodes"] == nnodes)]
    names = sorted({str(g).strip() for g in group["gpu"].dropna() if str(g).strip()})
    if not names:
        return None, "the records do not name their GPU"
    if len(names) > 1:
        return None, f"the records name {len(names)} GPUs ({', '.join(names)}): pass --gpu NAME for the model's"
    inputs = sorted({str(i) for i in group["input"].dropna()}) if "input" in group.columns else []
    where = f" ({', '.join(inputs[:3])}{', ...' if len(inputs) > 3 else ''})" if inputs else ""
    return names[0], f"named by the records{where}; --gpu NAME overrides"


def host_backends(frame: pd.DataFrame, nranks: int, nnodes: int) -> str | None:
    """The backends of one (nranks, nnodes) group when every record of it ran on the hosts' CPUs: no NCCL record
    and no GPU named (host MPI, gloo; a harness on GPU buffers names its GPU); None when any record is a GPU's."""
    if "backend" not in frame.columns:
        return None
    group = frame[(frame["nranks"] == nranks) & (frame["nnodes"] == nnodes)]
    backends = sorted({str(b) for b in group["backend"].dropna()})
    if group.empty or not backends or "nccl" in backends:
        return None
    if "gpu" in group.columns and group["gpu"].notna().any():
        return None
    return ", ".join(backends)
