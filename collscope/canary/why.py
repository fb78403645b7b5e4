"""Why a canary side is slower: what each side's library chose at each (op, size), where that changed, and the
NCCL tuner-plugin rule that gives B back A's choice where B loses.

:func:`explain` reads each side's choices (:mod:`.why_evidence`: NCCL's TUNING lines, check.json, its TUNING table;
Open MPI's forced algorithm or rules file), merges adjacent measured sizes of one op while both sides' choices stay
the same pair, and keeps the ranges where A's choice differs from B's as :class:`ChoiceChange`. For each range of
the verdict (H1's ``RangeChange``) that B loses:

* overlapping a change: "B is slower at all_reduce 64M-512M because NCCL now picks Ring/LL128 instead of
  NVLSTree/Simple", and for NCCL a :class:`~collscope.analysis.recommend.tuner.TunerRule` over the overlap restoring
  A's algorithm and protocol (Open MPI has no tuner plugin: a note gives the forcing variable or rules-file line);
* with the same choice on both sides: the loss is not from the choice, and what evidence would tell where it is;
* without evidence on a side: what would supply it (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING).

Sizes are nccl-tests' (the records'), written with :func:`collscope.units.format_size`; the tuner rule's bytes are
those sizes, as ``collscope recommend --format tuner`` writes them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from collscope.analysis.recommend.env import comment
from collscope.analysis.recommend.tuner import (
    TUNER_ALGORITHM,
    TUNER_COLLECTIVE,
    TUNER_COLUMNS,
    TUNER_PROTOCOL,
    TunerRule,
)
from collscope.canary.verdict_types import RangeChange
from collscope.canary.why_evidence import TUNING_HINT, Choice, Evidence, side_choices
from collscope.units import format_size
from collscope.vocab.configs import is_tuning_variable
from collscope.vocab.ompi import OP_OMPI_COLL, ompi_algorithm_knob

__all__ = ["ChoiceChange", "Why", "explain", "render_rules"]


@dataclass(frozen=True)
class ChoiceChange:
    """A size range of one op where A's choice differs from B's."""

    op: str
    min_bytes: int
    max_bytes: int
    a_choice: str
    b_choice: str
    source: str
    """Where the choices were read (``NCCL TUNING log lines``; ``A: ...; B: ...`` when the sides differ)."""


@dataclass(frozen=True)
class Why:
    changes: tuple[ChoiceChange, ...]
    statements: tuple[str, ...]
    tuner_rules: tuple[TunerRule, ...]
    tuner_csv: str | None
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the changes, statements, rules (fields, their CSV line and notes), the CSV and the notes."""
        return {"changes": [dataclasses.asdict(c) for c in self.changes], "statements": list(self.statements),
                "tuner_rules": [{"collective": r.collective, "min_bytes": r.min_bytes, "max_bytes": r.max_bytes,
                                 "algorithm": r.algorithm, "protocol": r.protocol, "channels": r.channels,
                                 "nnodes": r.nnodes, "nranks": r.nranks, "line": r.line(), "notes": list(r.notes)}
                                for r in self.tuner_rules],
                "tuner_csv": self.tuner_csv, "notes": list(self.notes)}


@dataclass(frozen=True, slots=True)
class _Run:
    """Adjacent measured sizes of one op over which both sides' choices stay the same pair."""

    op: str
    sizes: tuple[int, ...]
    a: Choice | None
    b: Choice | None

    @property
    def changed(self) -> bool:
        return self.a is not None and self.b is not None and self.a.differs(self.b)


def _span(lo: int, hi: int) -> str:
    return format_size(lo) if lo == hi else f"{format_size(lo)}-{format_size(hi)}"


def _runs(frame: pd.DataFrame, evidence: Evidence) -> list[_Run]:
    """Per op, the sizes both sides measured, merged while the (A, B) choice texts stay the same."""
    runs: list[_Run] = []
    for op, rows in frame.groupby("op", observed=True, sort=True):
        by_side = {str(s): {int(x) for x in g["size_bytes"]} for s, g in rows.groupby("side", observed=True)}
        sizes = sorted(by_side.get("A", set()) & by_side.get("B", set()))
        for size in sizes:
            a = evidence.choices.get(("A", str(op), size))
            b = evidence.choices.get(("B", str(op), size))
            last = runs[-1] if runs else None
            if last is not None and last.op == op and _text(last.a) == _text(a) and _text(last.b) == _text(b):
                runs[-1] = dataclasses.replace(last, sizes=(*last.sizes, size))
            else:
                runs.append(_Run(op=str(op), sizes=(size,), a=a, b=b))
    return runs


def _text(choice: Choice | None) -> str | None:
    return None if choice is None else choice.text


def _source(a: Choice, b: Choice) -> str:
    return a.source if a.source == b.source else f"A: {a.source}; B: {b.source}"


def _overlap(run: _Run, r: RangeChange) -> tuple[int, int] | None:
    inside = [s for s in run.sizes if r.min_bytes <= s <= r.max_bytes]
    return (inside[0], inside[-1]) if run.op == r.op and inside else None


def _nranks_nnodes(frame: pd.DataFrame, op: str, lo: int, hi: int) -> tuple[int, int]:
    """B's rank and node counts over the range when each is one value, else -1 (the plugin's wildcard)."""
    rows = frame[(frame["side"] == "B") & (frame["op"] == op) & frame["size_bytes"].between(lo, hi)]
    out = []
    for column in ("nranks", "nnodes"):
        values = set(rows[column].dropna().astype(int)) if column in rows.columns else set()
        out.append(values.pop() if len(values) == 1 else -1)
    return out[0], out[1]


def _restore(frame: pd.DataFrame, run: _Run, lo: int, hi: int, notes: list[str]) -> TunerRule | None:
    """The tuner rule giving B back A's choice over [lo, hi], or None with a note saying why there is none."""
    a, b = run.a, run.b
    assert a is not None and b is not None
    where = f"{run.op} {_span(lo, hi)}"
    if a.library == "Open MPI":
        coll = OP_OMPI_COLL.get(run.op, run.op)
        knob = ompi_algorithm_knob(coll)
        if a.ompi_id:
            how = (f"OMPI_MCA_coll_tuned_use_dynamic_rules=1 {knob}={a.ompi_id} (every size), or a rules-file line "
                   f"'{lo} {a.ompi_id} 0 0' (a rule holds from its size up to the next rule's)")
        elif b.rule is not None:
            how = (f"in B's rules file, '{lo} 0 0 0' (algorithm 0: Open MPI's own decisions) in place of the rule "
                   f"{b.rule}")
        else:
            how = f"unset {knob} on B (Open MPI's own decisions)"
        notes.append(f"{where}: Open MPI has no tuner plugin; to run A's {a.text} on B: {how}")
        return None
    collective = TUNER_COLLECTIVE.get(run.op)
    if collective is None:
        notes.append(f"{where}: no tuner rule: the tuner plugin does not handle {run.op}")
        return None
    if a.algorithm not in TUNER_ALGORITHM or a.protocol not in TUNER_PROTOCOL:
        notes.append(f"{where}: no tuner rule: A's {'protocol' if a.algorithm in TUNER_ALGORITHM else 'algorithm'} "
                     f"is not known ({a.source}); {TUNING_HINT}")
        return None
    nranks, nnodes = _nranks_nnodes(frame, run.op, lo, hi)
    return TunerRule(collective=collective, min_bytes=lo, max_bytes=hi, algorithm=TUNER_ALGORITHM[str(a.algorithm)],
                     protocol=TUNER_PROTOCOL[str(a.protocol)], nnodes=nnodes, nranks=nranks,
                     notes=(f"{where}: B loses with {b.text}; A's {a.text} restored ({_source(a, b)})",))


def _statements(runs: list[_Run], ranges: Sequence[RangeChange], frame: pd.DataFrame, evidence: Evidence,
                notes: list[str]) -> tuple[list[str], list[TunerRule]]:
    statements: list[str] = []
    rules: list[TunerRule] = []
    if not ranges:
        for run in (r for r in runs if r.changed):
            assert run.a is not None and run.b is not None
            statements.append(f"At {run.op} {_span(run.sizes[0], run.sizes[-1])} {run.a.library} picks "
                              f"{run.b.text} on B instead of {run.a.text} on A")
    for r in ranges:
        if r.verdict not in ("loses", "gains"):
            continue
        slower = r.verdict == "loses"
        where = f"{r.op} {_span(r.min_bytes, r.max_bytes)}"
        hit = [(run, span) for run in runs if (span := _overlap(run, r)) is not None]
        changed = [(run, span) for run, span in hit if run.changed]
        for run, (lo, hi) in changed:
            assert run.a is not None and run.b is not None
            verb = "slower" if slower else "faster"
            statements.append(f"B is {verb} at {run.op} {_span(lo, hi)} because {run.a.library} now picks "
                              f"{run.b.text} instead of {run.a.text}")
            if slower:
                rule = _restore(frame, run, lo, hi, notes)
                if rule is not None:
                    rules.append(rule)
        if not slower or changed:
            continue
        same = [run for run, _ in hit if run.a is not None and run.b is not None]
        unknown = sorted({side for run, _ in hit for side, c in (("A", run.a), ("B", run.b)) if c is None})
        if same:
            library = same[0].a.library if same[0].a is not None else "the library"
            picks = ", ".join(dict.fromkeys(run.a.text for run in same if run.a is not None))
            differ = _differing_settings(frame)
            statements.append(f"B is slower at {where}, but {library} picks the same on both sides there ({picks}), "
                              f"so the loss is not from the algorithm choice: "
                              + (f"the sides differ in {differ}" if differ else "look elsewhere")
                              + f" ({_elsewhere(library)})")
        elif unknown:
            statements.append(f"B is slower at {where}; what side {' and '.join(unknown)} chose there is not "
                              f"known: {TUNING_HINT if evidence.libraries.get(unknown[0]) == 'NCCL' else 'see notes'}")
        else:
            statements.append(f"B is slower at {where}; no size there was measured by both sides with evidence")
    return statements, rules


_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_PROVENANCE = ("nccl_version", "engine_version", "gpu")


def _differing_settings(frame: pd.DataFrame) -> str:
    """The library versions, GPU and tuning settings whose values differ between the sides' records
    (``OMPI_MCA_btl (A: unset, B: self,tcp)``), collscope's own side markers left out; "" when none do."""
    out = []
    for column in frame.columns:
        setting = isinstance(column, str) and _ENV_NAME.match(column) is not None and is_tuning_variable(column)
        if not (setting or column in _PROVENANCE) or str(column).startswith("COLLSCOPE_"):
            continue
        values = {side: sorted({"unset" if pd.isna(v) else str(v) for v in frame.loc[frame["side"] == side, column]})
                  for side in ("A", "B")}
        if values["A"] != values["B"]:
            out.append(f"{column} (A: {', '.join(values['A']) or 'none'}, B: {', '.join(values['B']) or 'none'})")
    return "; ".join(out)


def _elsewhere(library: str) -> str:
    if library == "Open MPI":
        return ("the transport, binding, clocks: compare both sides' OMPI_MCA_btl_base_verbose=100 output and "
                "ompi_info --all")
    return ("the transport, the network plugin, clocks: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET logs of both "
            "sides name the transports, NICs and plugin; nvidia-smi -q -d CLOCK the clocks")


def _missing_notes(runs: list[_Run], evidence: Evidence) -> list[str]:
    """Per NCCL side and op, the adjacent measured sizes without any evidence of NCCL's choice."""
    notes = []
    for side in ("A", "B"):
        if evidence.libraries.get(side) != "NCCL":
            continue
        gaps: list[tuple[str, int, int]] = []
        for run in runs:
            if (run.a if side == "A" else run.b) is not None:
                continue
            if gaps and gaps[-1][0] == run.op and _adjacent(runs, gaps[-1][2], run):
                gaps[-1] = (run.op, gaps[-1][1], run.sizes[-1])
            else:
                gaps.append((run.op, run.sizes[0], run.sizes[-1]))
        notes += [f"side {side}: no record of what NCCL chose at {op} {_span(lo, hi)}: {TUNING_HINT}"
                  for op, lo, hi in gaps]
    return notes


def _adjacent(runs: list[_Run], size: int, run: _Run) -> bool:
    """Whether ``run`` starts at the measured size right after ``size`` of its op."""
    sizes = sorted(s for r in runs if r.op == run.op for s in r.sizes)
    i = sizes.index(size)
    return i + 1 < len(sizes) and sizes[i + 1] == run.sizes[0]


def _rule_notes(runs: list[_Run]) -> list[str]:
    """The rules-file lines that decided an Open MPI change."""
    out = []
    for run in (r for r in runs if r.changed):
        for side, choice in (("A", run.a), ("B", run.b)):
            if choice is not None and choice.rule is not None:
                out.append(f"side {side}: {run.op} {_span(run.sizes[0], run.sizes[-1])}: {choice.text} from the "
                           f"rules file: {choice.rule}")
    return out


def render_rules(rules: Sequence[TunerRule]) -> str:
    """The CSV the example tuner plugin reads (the format of ``collscope recommend --format tuner``)."""
    lines = [comment("NCCL tuner plugin rules (example CSV plugin, plugins/tuner/example): save as nccl_tuner.conf "
                     "or point NCCL_TUNER_CONFIG_FILE at it"),
             comment("written by collscope canary: on B, A's algorithm and protocol where B loses and NCCL's choice "
                     "changed; ranges are inclusive measured sizes (nccl-tests' bytes); first match wins"),
             comment(TUNER_COLUMNS)]
    for r in rules:
        lines += [comment(n) for n in r.notes]
        lines.append(r.line())
    return "\n".join(lines) + "\n"


def explain(results_dirs: Sequence[Path], frame: pd.DataFrame, ranges: Sequence[RangeChange] = ()) -> Why:
    """What each side chose per (op, size) of ``frame`` (a canary frame: side, op, size_bytes, nranks, nnodes,
    point_id; evidence in ``<dir>/points/``), where that changed, why each losing range of ``ranges`` loses, and the
    tuner rules that restore A's NCCL choice on B there (module doc)."""
    if frame.empty or "side" not in frame.columns:
        return Why(changes=(), statements=(), tuner_rules=(), tuner_csv=None,
                   notes=("no records with a side (A/B): nothing to explain",))
    evidence = side_choices(results_dirs, frame)
    runs = _runs(frame, evidence)
    changes = tuple(ChoiceChange(op=run.op, min_bytes=run.sizes[0], max_bytes=run.sizes[-1], a_choice=run.a.text,
                                 b_choice=run.b.text, source=_source(run.a, run.b))
                    for run in runs if run.changed and run.a is not None and run.b is not None)
    notes = [*evidence.notes, *_missing_notes(runs, evidence), *_rule_notes(runs)]
    statements, rules = _statements(runs, ranges, frame, evidence, notes)
    rules.sort(key=lambda r: (r.collective, r.nnodes, r.nranks, r.min_bytes))
    return Why(changes=changes, statements=tuple(statements), tuner_rules=tuple(rules),
               tuner_csv=render_rules(rules) if rules else None, notes=tuple(dict.fromkeys(notes)))
