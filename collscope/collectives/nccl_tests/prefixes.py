"""Line prefixes that launchers and log collectors put before nccl-tests output, stripped line by line (pure).

People publish nccl-tests output as their launcher or log viewer showed it, each line behind a prefix:

==================  =====================================================  =========================================
kind                a line looks like                                      what the prefix says
==================  =====================================================  =========================================
``timestamp``       ``2025-03-04T05:06:07.123456789Z <line>``              nothing (``kubectl logs --timestamps``)
``syslog``          ``Mar 04 05:06:07 host prog[123]: <line>``             the host (journald / syslog)
``open-mpi``        ``[1,0]<stdout>:<line>``, ``[1,3]<stderr>: <line>``    the MPI rank (``mpirun --tag-output``)
``slurm-label``     ``0: <line>``, `` 3: <line>``, ``12: <line>``          the Slurm task id (``srun -l/--label``)
``pdsh``            ``host: <line>``                                       the host (pdsh, clush)
``host-pid``        ``[host:pid] <line>``, ``[host:pid:tid] <line>``       the host and process
==================  =====================================================  =========================================

A timestamp or syslog prefix may come before a launcher's (``kubectl logs --timestamps`` of an MPIJob launcher:
a timestamp, then ``[1,0]<stdout>:``). Lines without a prefix (ssh warnings, a batch script's own lines, stderr
merged without tags) stay as they are; line numbers do not change. A ``host:`` prefix (pdsh) is taken only for
hosts that put it before at least one nccl-tests line (``#...``, a table row, an NCCL ``host:pid:tid [dev]`` line),
so that ``Warning: ...`` is never read as a host.

The cost when no line has a prefix is a few ``str.find`` near the top and a look at the first and last lines and
the lines that hold a header's markers (``nThread``, ``algbw``); otherwise one pass over the lines.

What the prefixes carry is geometry evidence (:func:`prefix_clues`): a rank or task label is a *process* id, and
an nccl-tests process drives ``nThread x nGpus`` ranks, so labels up to L say "at least (L+1) x nThread x nGpus
ranks", never "L+1 ranks"; hosts that printed lines say "at least that many nodes".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collscope.geometry import GeometryEvidence

__all__ = ["PrefixKind", "LinePrefixes", "strip_line_prefixes", "prefix_clues"]

PrefixKind = Literal["timestamp", "syslog", "open-mpi", "slurm-label", "pdsh", "host-pid"]

_DESCRIBED: dict[str, str] = {
    "timestamp": "RFC 3339 timestamps (kubectl logs --timestamps)",
    "syslog": "syslog/journald 'Mon DD HH:MM:SS host prog[pid]:'",
    "open-mpi": "Open MPI --tag-output '[job,rank]<stdout>:'",
    "slurm-label": "Slurm srun -l task labels 'N:'",
    "pdsh": "pdsh/clush 'host:'",
    "host-pid": "'[host:pid]'",
}

_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? ")
_SYSLOG = re.compile(r"[A-Z][a-z]{2} [ 0-3]\d \d\d:\d\d:\d\d(?:\.\d+)? (\S+) [^\s\[:]+(?:\[\d+\])?: ?")
_SYSLOG_AFTER_ISO = re.compile(r"(\S+) [\w.@/-]+\[\d+\]: ?")
"""``journalctl -o short-iso``: the host and ``prog[pid]:`` after an ISO timestamp (the pid is required here)."""
_OPEN_MPI = re.compile(r"\[(\d+),(\d+)\]<(?:stdout|stderr|stddiag)>: ?")
_SLURM = re.compile(r" *(\d+):(?: |$)")
_HOST_PID = re.compile(r"\[([A-Za-z0-9][\w.-]*):(\d+)(?::\d+)?\] ?")
_PDSH = re.compile(r"([A-Za-z0-9][\w.-]*): ")
_NCCL_TESTS_REST = re.compile(r" *(?:#|\d+ |\S+:\d+:\d+ \[\d+\] NCCL |NCCL version )")
"""What follows a pdsh prefix on a line of nccl-tests output: a ``#`` line, a row, an NCCL debug line."""
_PROBE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:|[A-Z][a-z]{2} [ 0-3]\d \d\d:|\[\d+,\d+\]<std| *\d+:(?: |$)|\[[\w.-]+:\d+"
                    r"|[A-Za-z0-9][\w.-]*: +(?:#|\d)")
"""A line that may start with a prefix (checked exactly by the full pass)."""
_MARKERS = ("nThread", "algbw", "Using devices")
"""Found near the top of a run (the summary is looked for in the last lines instead: a search for it would read
the whole text)."""
_PROBE_LINES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class LinePrefixes:
    """What the stripped prefixes said: their kinds, how many lines had one, the labels and hosts they named."""

    kinds: tuple[PrefixKind, ...]
    """In the order first seen (``("timestamp", "open-mpi")`` for kubectl --timestamps of an mpirun)."""
    lines: int
    """Lines that had a prefix stripped."""
    unprefixed: int
    """Lines that are not blank and had none (ssh warnings, a batch script's lines, stderr merged untagged)."""
    labels: tuple[int, ...] = ()
    """Process labels seen, sorted: Open MPI ranks (``[1,R]``) or Slurm task ids (``R:``)."""
    label_kind: Literal["open-mpi", "slurm-label"] | None = None
    hosts: tuple[str, ...] = ()
    """Hosts named by the prefixes (pdsh, syslog, ``[host:pid]``), in the order first seen."""
    processes: tuple[tuple[str, int], ...] = ()
    """``(host, pid)`` of ``[host:pid]`` prefixes, in the order first seen."""

    def describe(self) -> str:
        """``Open MPI --tag-output '[job,rank]<stdout>:' on 52 lines (ranks 0, 1, 2, 3)``."""
        what = " and ".join(_DESCRIBED[k] for k in self.kinds)
        out = f"line prefixes stripped: {what} on {self.lines} line{'s' if self.lines != 1 else ''}"
        seen = []
        if self.labels:
            name = "MPI ranks" if self.label_kind == "open-mpi" else "Slurm tasks"
            seen.append(f"{name} {_ranges(self.labels)}")
        if self.hosts:
            seen.append(f"host{'s' if len(self.hosts) != 1 else ''} {', '.join(self.hosts[:8])}"
                        + (", ..." if len(self.hosts) > 8 else ""))
        if self.processes:
            seen.append(f"{len(self.processes)} process{'es' if len(self.processes) != 1 else ''}")
        return out + (f" ({'; '.join(seen)})" if seen else "")

    def to_dict(self) -> dict[str, object]:
        return {"kinds": list(self.kinds), "lines": self.lines, "unprefixed": self.unprefixed,
                "labels": list(self.labels), "label_kind": self.label_kind, "hosts": list(self.hosts),
                "processes": [list(p) for p in self.processes]}


def _ranges(values: tuple[int, ...]) -> str:
    """``0-3, 12, 15``."""
    out: list[str] = []
    start = prev = values[0]
    for v in (*values[1:], None):
        if v is not None and v == prev + 1:
            prev = v
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if v is not None:
            start = prev = v
    return ", ".join(out)


def _probe(text: str) -> bool:
    """Whether any line that matters may carry a prefix: the first and last lines, and the first line holding each
    marker of a header."""
    head = text[:16384].split("\n", _PROBE_LINES)[:_PROBE_LINES]
    tail = text[-4096:].rsplit("\n", 16)[1:]
    if any(_PROBE.match(line) for line in head) or any(_PROBE.match(line) for line in tail):
        return True
    for marker in _MARKERS:
        i = text.find(marker)
        if i > 0:
            start = text.rfind("\n", 0, i) + 1
            if _PROBE.match(text, start):
                return True
    return False


class _Seen:
    __slots__ = ("kinds", "lines", "labels", "label_kind", "hosts", "processes")

    def __init__(self) -> None:
        self.kinds: dict[PrefixKind, None] = {}
        self.lines = 0
        self.labels: set[int] = set()
        self.label_kind: Literal["open-mpi", "slurm-label"] | None = None
        self.hosts: dict[str, None] = {}
        self.processes: dict[tuple[str, int], None] = {}


def _launcher(rest: str, seen: _Seen) -> int:
    """The length of the launcher prefix at the start of ``rest`` (0: none, or a pdsh candidate), noted in ``seen``."""
    c = rest[:1]
    if c == "[":
        m = _OPEN_MPI.match(rest)
        if m is not None and seen.label_kind != "slurm-label":
            seen.kinds["open-mpi"] = None
            seen.label_kind = "open-mpi"
            seen.labels.add(int(m[2]))
            return m.end()
        m = _HOST_PID.match(rest)
        if m is not None:
            seen.kinds["host-pid"] = None
            seen.hosts[m[1]] = None
            seen.processes[(m[1], int(m[2]))] = None
            return m.end()
        return 0
    if c == " " or c.isdigit():
        m = _SLURM.match(rest)
        if m is not None and seen.label_kind != "open-mpi":
            seen.kinds["slurm-label"] = None
            seen.label_kind = "slurm-label"
            seen.labels.add(int(m[1]))
            return m.end()
    return 0


def strip_line_prefixes(text: str) -> tuple[str, LinePrefixes | None]:
    """``text`` with every launcher/collector prefix stripped, and what they said; ``(text, None)`` when no line
    has one (the text itself is returned, at the cost of a few searches). Lines are kept one for one."""
    if not _probe(text):
        return text, None
    lines = text.split("\n")
    seen = _Seen()
    pdsh: list[tuple[int, str, bool]] = []  # (line index, host, already counted) of lines with a pdsh-like prefix
    confirmed: set[str] = set()
    unprefixed = 0
    for i, line in enumerate(lines):
        pos = 0
        m = _TIMESTAMP.match(line)
        if m is not None:
            seen.kinds["timestamp"] = None
            pos = m.end()
            s = _SYSLOG_AFTER_ISO.match(line, pos)
            if s is not None:
                seen.kinds["syslog"] = None
                seen.hosts[s[1]] = None
                pos = s.end()
        else:
            m = _SYSLOG.match(line)
            if m is not None:
                seen.kinds["syslog"] = None
                seen.hosts[m[1]] = None
                pos = m.end()
        rest = line[pos:] if pos else line
        n = _launcher(rest, seen)
        if n == 0 and not rest[:1].isdigit():
            p = _PDSH.match(rest)
            if p is not None:
                pdsh.append((i, p[1], pos > 0))
                if _NCCL_TESTS_REST.match(rest, p.end()):
                    confirmed.add(p[1])
        pos += n
        if pos:
            seen.lines += 1
            lines[i] = line[pos:]
        elif line.strip():
            unprefixed += 1
    for i, host, counted in pdsh:
        if host in confirmed:
            seen.kinds["pdsh"] = None
            seen.hosts[host] = None
            lines[i] = lines[i][len(host) + 2:]
            if not counted:
                seen.lines += 1
                unprefixed -= 1
    if not seen.kinds:
        return text, None
    return "\n".join(lines), LinePrefixes(
        kinds=tuple(seen.kinds), lines=seen.lines, unprefixed=unprefixed, labels=tuple(sorted(seen.labels)),
        label_kind=seen.label_kind, hosts=tuple(seen.hosts), processes=tuple(seen.processes))


def prefix_clues(prefixes: LinePrefixes, ev: GeometryEvidence, *, nthreads: int | None, ngpus: int | None) -> None:
    """Add what ``prefixes`` say about the job to ``ev``: labels up to L are at least L+1 processes, each driving
    ``nThread x nGpus`` ranks (1 x 1 when the header is absent: each process has at least one rank); hosts that
    printed lines are at least that many nodes. Lower bounds only: not every process or host prints a line."""
    per = (nthreads or 1) * (ngpus or 1)
    per_text = f" x nThread {nthreads} x nGpus {ngpus}" if nthreads and ngpus else " (each at least one rank)"
    if prefixes.labels:
        top = prefixes.labels[-1]
        if prefixes.label_kind == "open-mpi":
            says = f"Open MPI output tags up to [*,{top}]: at least {top + 1} processes{per_text}"
        else:
            says = f"Slurm task labels up to {top} (srun -l): at least {top + 1} tasks{per_text}"
        ev.at_least("nranks", (top + 1) * per, says)
    if prefixes.processes:
        n = len(prefixes.processes)
        ev.at_least("nranks", n * per, f"'[host:pid]' prefixes of {n} processes{per_text}")
    if prefixes.hosts:
        kinds = ", ".join(_DESCRIBED[k].split(" '")[0] for k in prefixes.kinds if k in ("pdsh", "syslog", "host-pid"))
        ev.at_least("nnodes", len(prefixes.hosts), f"hosts in the {kinds} line prefixes: {len(prefixes.hosts)}")

