"""The shape of a job, read from evidence: ranks, nodes, ranks and GPUs per node, the NVLink domain, a call's group.

Every reader (nccl-tests text and JSON, NCCL INFO lines, traces, Flight Recorder dumps, Inspector records) and
every command that models a job uses one :class:`Geometry`. A reader adds each clue it finds to a
:class:`GeometryEvidence` (``ev.exact("nranks", 72, "Rank 71 is the highest rank line")``, or a range:
``ev.between("nranks", 60, 80, "busbw/algbw = 1.97 +- printing precision")``); :meth:`GeometryEvidence.resolve`
then intersects the clues of each field, derives what the others imply (nranks = nnodes x ranks_per_node) and
returns the record. Rules (docs/formats.md, "Geometry"):

- Clues that cannot all hold are an error naming two of them, unless the user overrode that field: then the
  override wins and a note says which clue disagreed.
- A field no clue pins to one value stays unknown (``value`` None) and says so, with the range the clues allow.
  Nothing defaults to "one node".
- ``nvl_domain`` is how many GPUs one NVLink fabric joins: 8 on an HGX node, 4 on a GB200 tray without MNNVL,
  72 on an NVL72 rack. It may be larger than the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from collscope.errors import ParseError

__all__ = ["GEOMETRY_FIELDS", "GeometryField", "Known", "Geometry", "GeometryEvidence", "OVERRIDE_OPTIONS",
           "UNKNOWN_GEOMETRY"]

GeometryField = Literal["nranks", "nnodes", "ranks_per_node", "gpus_per_node", "nvl_domain", "group_size"]

GEOMETRY_FIELDS: tuple[GeometryField, ...] = ("nranks", "nnodes", "ranks_per_node", "gpus_per_node", "nvl_domain",
                                              "group_size")

OVERRIDE_OPTIONS: Mapping[GeometryField, str] = {"nranks": "--nranks", "nnodes": "--nnodes",
                                                 "nvl_domain": "--nvl-domain", "group_size": "--group-size"}
"""The command-line option that overrides each field (the same name in every command that has it)."""

_WHAT: Mapping[GeometryField, str] = {
    "nranks": "ranks in the communicator",
    "nnodes": "nodes",
    "ranks_per_node": "ranks per node",
    "gpus_per_node": "GPUs per node",
    "nvl_domain": "GPUs one NVLink fabric joins",
    "group_size": "ranks in the call's process group",
}


@dataclass(frozen=True, slots=True)
class Known:
    """One field: its value (None: unknown) and every piece of evidence behind it, in the order found."""

    value: int | None
    evidence: tuple[str, ...] = ()
    overridden: bool = False
    """The user passed this value; ``evidence`` then starts with the option."""
    low: int | None = None
    """For an unknown value: the least the clues allow (None: no bound)."""
    high: int | None = None
    """For an unknown value: the most the clues allow (None: no bound)."""

    @property
    def known(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        """``72 (Rank 71 is the highest rank line; busbw/algbw = 1.9722 -> 72)`` or ``unknown (...)``."""
        if self.value is not None:
            return f"{self.value} ({'; '.join(self.evidence)})" if self.evidence else str(self.value)
        span = _span(self.low, self.high)
        why = "; ".join(self.evidence) if self.evidence else "no evidence in the input"
        return f"unknown{f' ({span} allowed)' if span else ''} ({why})"

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"value": self.value, "evidence": list(self.evidence)}
        if self.overridden:
            out["overridden"] = True
        if self.value is None and (self.low is not None or self.high is not None):
            out["low"], out["high"] = self.low, self.high
        return out


_UNKNOWN = Known(None)


@dataclass(frozen=True, slots=True)
class Geometry:
    """The shape of a job (or, with ``group_size``, of one call in it). See the module doc."""

    nranks: Known = _UNKNOWN
    nnodes: Known = _UNKNOWN
    ranks_per_node: Known = _UNKNOWN
    gpus_per_node: Known = _UNKNOWN
    nvl_domain: Known = _UNKNOWN
    group_size: Known = _UNKNOWN
    group_ranks: tuple[int, ...] | None = None
    """The global ranks of the call's process group, when the input lists them."""
    notes: tuple[str, ...] = ()
    """Overrides that disagreed with a clue (the override won)."""

    def get(self, name: GeometryField) -> Known:
        known: Known = getattr(self, name)
        return known

    def value(self, name: GeometryField) -> int | None:
        return self.get(name).value

    def lines(self, fields: Iterable[GeometryField] = GEOMETRY_FIELDS) -> list[str]:
        """One line per field for a text summary: ``nnodes: unknown (no evidence in the input; pass --nnodes N)``."""
        out = []
        for name in fields:
            known = self.get(name)
            if name == "group_size" and not known.known and not known.evidence:
                continue  # a job-level geometry: no call, no group
            text = known.describe()
            option = OVERRIDE_OPTIONS.get(name)
            if not known.known and option:
                text = text[:-1] + f"; pass {option} N)"
            out.append(f"{name}: {text}")
        return out + [f"note: {note}" for note in self.notes]

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {name: self.get(name).to_json() for name in GEOMETRY_FIELDS}
        if self.group_ranks is not None:
            out["group_ranks"] = list(self.group_ranks)
        if self.notes:
            out["notes"] = list(self.notes)
        return out


UNKNOWN_GEOMETRY = Geometry()


def _span(low: int | None, high: int | None) -> str:
    if low is None and high is None:
        return ""
    if high is None:
        return f"{low} or more"
    if low is None or low == high:
        return f"at most {high}" if low is None else str(low)
    return f"{low}..{high}"


@dataclass(slots=True)
class _Clue:
    low: int | None
    high: int | None
    says: str


@dataclass(slots=True)
class GeometryEvidence:
    """Clues collected by a reader, field by field; :meth:`resolve` turns them into a :class:`Geometry`."""

    source: str = "<input>"
    clues: dict[str, list[_Clue]] = field(default_factory=dict)
    group_ranks: tuple[int, ...] | None = None

    def exact(self, name: GeometryField, value: int, says: str) -> None:
        """A clue that fixes the field: ``ev.exact("nnodes", 18, "hosts of the rank lines: 18")``."""
        self.between(name, value, value, says)

    def at_least(self, name: GeometryField, value: int, says: str) -> None:
        self.between(name, value, None, says)

    def between(self, name: GeometryField, low: int | None, high: int | None, says: str) -> None:
        """A clue that bounds the field (either end None: unbounded)."""
        if name not in _WHAT:
            raise ValueError(f"unknown geometry field {name!r}")
        self.clues.setdefault(name, []).append(_Clue(low, high, says))

    def merge(self, other: GeometryEvidence) -> None:
        for name, clues in other.clues.items():
            self.clues.setdefault(name, []).extend(clues)
        if other.group_ranks is not None:
            self.group_ranks = other.group_ranks

    def resolve(self, overrides: Mapping[str, int | None] | None = None) -> Geometry:
        """The geometry the clues and the user's overrides give; ParseError naming two clues that disagree."""
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        for name in given:
            if name not in _WHAT:
                raise ValueError(f"unknown geometry field {name!r}")
        notes: list[str] = []
        fields: dict[str, Known] = {}
        for name in GEOMETRY_FIELDS:
            fields[name] = self._field(name, given.get(name), notes)
        for _ in range(2):  # derived values can enable one more derivation
            self._derive(fields, notes, given)
        return Geometry(**fields, group_ranks=self.group_ranks, notes=tuple(notes))

    def _field(self, name: GeometryField, override: int | None, notes: list[str]) -> Known:
        clues = self.clues.get(name, [])
        if override is not None:
            option = f"{OVERRIDE_OPTIONS.get(name, name)} {override}"
            agree = [c.says for c in clues if _holds(c, override)]
            for c in clues:
                if not _holds(c, override):
                    notes.append(f"{name}: {option} (as passed) overrides '{c.says}'")
            return Known(override, (f"{option} (as passed)", *agree), overridden=True)
        low: _Clue | None = None
        high: _Clue | None = None
        for c in clues:
            if c.low is not None and (low is None or low.low is None or c.low > low.low):
                low = c
            if c.high is not None and (high is None or high.high is None or c.high < high.high):
                high = c
        lo = low.low if low is not None else None
        hi = high.high if high is not None else None
        if low is not None and high is not None and lo is not None and hi is not None and lo > hi:
            self._conflict(name, low, high)
        says = tuple(c.says for c in clues)
        if lo is not None and lo == hi:
            return Known(lo, says)
        return Known(None, says, low=lo, high=hi)

    def _conflict(self, name: str, a: _Clue, b: _Clue) -> None:
        option = OVERRIDE_OPTIONS.get(name)  # type: ignore[call-overload]
        fix = f"; pass {option} N if you know better" if option else ""
        raise ParseError(self.source, None, f"one number of {_WHAT[name]} ({name}){fix}",  # type: ignore[index]
                         found=f"'{a.says}' says {_span(a.low, a.high)} but '{b.says}' says {_span(b.low, b.high)}")

    def _derive(self, fields: dict[str, Known], notes: list[str], given: Mapping[str, int]) -> None:
        """nranks = nnodes x ranks_per_node: two known values give the third (a disagreement is an error)."""
        n, nodes, per = fields["nranks"], fields["nnodes"], fields["ranks_per_node"]
        if n.known and nodes.known and not per.known:
            assert n.value is not None and nodes.value is not None
            if n.value % nodes.value == 0:
                fields["ranks_per_node"] = self._with(per, n.value // nodes.value,
                                                      f"{n.value} ranks / {nodes.value} nodes", "ranks_per_node")
        elif n.known and per.known and not nodes.known:
            assert n.value is not None and per.value is not None
            if n.value % per.value == 0:
                fields["nnodes"] = self._with(nodes, n.value // per.value,
                                              f"{n.value} ranks / {per.value} ranks per node", "nnodes")
        elif nodes.known and per.known and not n.known:
            assert nodes.value is not None and per.value is not None
            fields["nranks"] = self._with(n, nodes.value * per.value,
                                          f"{nodes.value} nodes x {per.value} ranks per node", "nranks")
        elif n.known and nodes.known and per.known:
            assert n.value is not None and nodes.value is not None and per.value is not None
            if nodes.value * per.value != n.value and not any(k in given for k in ("nranks", "nnodes")):
                raise ParseError(self.source, None, "nranks = nnodes x ranks_per_node",
                                 found=f"{n.describe()} ranks, {nodes.describe()} nodes, "
                                       f"{per.describe()} ranks per node")
            if nodes.value * per.value != n.value:
                notes.append(f"{n.value} ranks is not {nodes.value} nodes x {per.value} ranks per node")

    def _with(self, known: Known, value: int, says: str, name: str) -> Known:
        """A derived value, checked against the bounds the field's own clues set."""
        if (known.low is not None and value < known.low) or (known.high is not None and value > known.high):
            raise ParseError(self.source, None, f"one number of {_WHAT[name]} ({name})",  # type: ignore[index]
                             found=f"{says} = {value}, but the clues allow {_span(known.low, known.high)} "
                                   f"({'; '.join(known.evidence)})")
        return Known(value, (*known.evidence, says))


def _holds(clue: _Clue, value: int) -> bool:
    return (clue.low is None or value >= clue.low) and (clue.high is None or value <= clue.high)
