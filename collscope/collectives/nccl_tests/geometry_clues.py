"""Every clue an nccl-tests output holds about the shape of its job, added to a :class:`GeometryEvidence`.

Read here (docs/formats.md, "Geometry"):

* the rank lines, complete or not: a complete list (``Rank 0`` .. ``Rank n-1``) gives the ranks, the hosts
  (nodes), the ranks and the distinct devices per host; a partial one (an author's ``...``, or only the last line
  kept) gives the highest rank + 1: exactly the ranks when the list ends with its highest line right before the
  table (nccl-tests prints every rank in order), at least that many when the elision is at its end;
* NCCL's INFO lines (NCCL ``src/init.cc``): ``comm 0x.. rank r nranks N ... Init COMPLETE`` (and Init START),
  ``AllReduce: opCount 0 sendbuff .. [nranks=N]`` (``NCCL_DEBUG_SUBSYS=COLL``),
  ``comm 0x.. rank r nRanks N nNodes M localRanks L localRank l MNNVL k`` (with MNNVL 1 NCCL counts one
  NVLink domain as one node: M domains of L ranks), ``MNNVL 1 cliqueId .. cliqueSize C .. nvlDomainSize D``
  (``src/mnnvl.cc``), ``NVLS Created Multicast group .. nranks N`` (``src/transport/nvls.cc``): the NVLink
  domain joins at least that many GPUs;
* the launch command line when the log holds it (``mpirun -np N``, ``srun -N M -n P``; with none, the binary run
  bare, ``./build/sendrecv_perf -g 8``: one process on one node), and the launcher's
  variables of a ``-J`` file's ``env`` (``OMPI_COMM_WORLD_SIZE``, ``SLURM_STEP_NUM_NODES``, ...): processes,
  times nccl-tests' ``nThread x nGpus`` ranks each;
* the rows: busbw/algbw solved for n (:func:`.nranks.nranks_from_bandwidths`) and size/count.

The op is read from the clues too when the output does not name its binary: NCCL's ``AllReduce: opCount`` /
``Broadcast: 8 Bytes -> Algo`` lines, and the columns (:func:`op_from_columns`).
"""

from __future__ import annotations

import heapq
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from collscope.collectives.nccl_tests.nranks import nranks_from_bandwidths, nranks_from_counts
from collscope.collectives.nccl_tests.records import NcclTestsDevice, NcclTestsHeader, Row, TableRows
from collscope.errors import ParseError
from collscope.geometry import GeometryEvidence
from collscope.vocab.nccl import OP_FUNC

__all__ = ["rank_list_complete", "rows_say_excerpt", "rank_clues", "log_clues", "env_clues", "row_clues", "op_from_log",
           "op_from_columns", "is_clue_line"]

_N = r"\d{1,9}"
_COMM = re.compile(rf"\bcomm (0x[0-9a-fA-F]+|\(nil\)) rank ({_N}) nRanks ({_N}) nNodes ({_N}) localRanks ({_N}) "
                   rf"localRank ({_N})(?: MNNVL ({_N}))?")
_INIT = re.compile(rf"\bcomm (0x[0-9a-fA-F]+|\(nil\)) rank ({_N}) nranks ({_N})\b")
_INIT_KINDS = ("Init COMPLETE", "Init START", "Destroy COMPLETE", "Abort COMPLETE")
_CLIQUE = re.compile(rf"\bMNNVL ({_N}) cliqueId \S+ cliqueSize ({_N}) cliqueRank {_N}(?: nvlDomainSize ({_N}))?")
_NVLS_GROUP = re.compile(rf"\bNVLS Created Multicast group \S+ nranks ({_N})\b")
_OPCOUNT = re.compile(rf"\b[A-Za-z]+: opCount [0-9a-fA-F]+ .*?\[nranks=({_N})\]")
_FUNC = re.compile(r"NCCL INFO (" + "|".join(OP_FUNC.values()) + r"): (?:opCount\b|\d+ Bytes -> Algo\b)")
_FUNC_OP = {func: op for op, func in OP_FUNC.items()}
_LAUNCHERS = ("mpirun", "mpiexec", "srun", "orterun", "prterun")
_LAUNCH = re.compile(r"(?:^|[\s/'\"])(mpirun|mpiexec|orterun|prterun|srun)\s(.*)$")

_CLUE_WORDS = ("NCCL", "nranks", "nRanks", "MNNVL", *_LAUNCHERS)


_BARE_BINARY = re.compile(r"^\s*(?:[$#>]\s*|Running:\s*)?(?:[A-Za-z_]\w*=\S*\s+)*(?:\S*/)?[a-z_]+_perf(?:_mpi)?"
                          r"(?:\s+-\S.*)?\s*$")
"""A test binary run with no launcher, as a README shows it: ``./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8``
(after a shell prompt, ``Running:``, or ``VAR=value`` assignments)."""


def is_clue_line(line: str) -> bool:
    """Whether a line that is not a table row may hold a geometry clue (the parser keeps those for this module)."""
    return (any(word in line for word in _CLUE_WORDS) or line.rstrip().endswith("\\")
            or _BARE_BINARY.match(line) is not None)


# ------------------------------------------------------------------------------------------------ the rank lines


def rank_list_complete(devices: Sequence[NcclTestsDevice]) -> bool:
    """Every rank from 0 to the highest printed: the list the run printed, not an author's excerpt."""
    ranks = {d.rank for d in devices}
    return bool(devices) and min(ranks) == 0 and len(ranks) == max(ranks) + 1


def rank_clues(ev: GeometryEvidence, devices: Sequence[NcclTestsDevice], *, complete: tuple[int, str] | None,
               cut_at_end: bool, listed_in: str = "the rank lines") -> None:
    """Clues of the rank lines. ``complete``: the whole list was printed, and (ranks, evidence) of rank 0's
    communicator (its ``NCCL_TESTS_SPLIT`` group when split); ``cut_at_end``: an elision follows the last rank
    line of a partial list; ``listed_in``: where the devices were listed (a ``-J`` file's ``config.devices``)."""
    if not devices:
        return
    if complete is not None:
        first = next((d for d in devices if d.rank == 0), devices[0])
        group = [d for d in devices if d.group == first.group]
        ev.exact("nranks", *complete)
        per_host = Counter(d.host for d in group)
        ev.exact("nnodes", len(per_host), f"hosts of {listed_in}: {len(per_host)}")
        if len(group) != complete[0]:  # split, and no Group column says which ranks are rank 0's group
            return
        counts = set(per_host.values())
        if len(counts) == 1:
            ev.exact("ranks_per_node", counts.pop(), f"ranks per host in {listed_in}")
        gpus = {h: len({d.device for d in group if d.host == h}) for h in per_host}
        if len(set(gpus.values())) == 1:
            ev.exact("gpus_per_node", next(iter(gpus.values())), f"distinct devices per host in {listed_in}")
        return
    top = max(devices, key=lambda d: d.rank)
    if cut_at_end or devices[-1].rank != top.rank:
        ev.at_least("nranks", top.rank + 1, f"Rank {top.rank} is the highest rank line shown (the list is cut "
                    "after it)")
    else:
        ev.exact("nranks", top.rank + 1, f"Rank {top.rank} is the highest rank line")
    hosts = {d.host for d in devices}
    ev.at_least("nnodes", len(hosts), f"hosts of the rank lines shown: {len(hosts)}")
    ev.at_least("gpus_per_node", max(d.device for d in devices) + 1,
                f"device {max(d.device for d in devices)} in a rank line")


# ------------------------------------------------------------------------------------------------ NCCL INFO lines


def _one(values: Iterable[int]) -> int | None:
    found = set(values)
    return found.pop() if len(found) == 1 else None


def log_clues(ev: GeometryEvidence, lines: Sequence[tuple[int, str]], header: NcclTestsHeader,
              warnings: list[str], *, launch: bool = True) -> None:
    """Clues of NCCL's INFO lines and of a launch command line among ``lines`` ((line number, text) pairs).

    ``launch``: read the command line too (not for a run split by ``NCCL_TESTS_SPLIT``, whose launch is every
    group's while its bandwidths are rank 0's group's)."""
    comm: list[tuple[int, int, int, int]] = []  # nRanks, nNodes, localRanks, MNNVL
    init: list[int] = []
    init_kinds: set[str] = set()
    domain: list[int] = []
    nvls: list[int] = []
    calls: list[int] = []
    for _, line in lines:
        if "rank" not in line and "MNNVL" not in line and "NVLS" not in line and "opCount" not in line:
            continue
        m = _COMM.search(line)
        if m:
            if min(int(m[3]), int(m[4]), int(m[5])) >= 1:  # a damaged line says nothing
                comm.append((int(m[3]), int(m[4]), int(m[5]), int(m[7] or 0)))
            continue
        m = _INIT.search(line)
        if m:
            if int(m[3]) < 1:
                continue
            init.append(int(m[3]))
            init_kinds.add(next((kind for kind in _INIT_KINDS if kind in line), "comm"))
            continue
        m = _CLIQUE.search(line)
        if m and m[1] == "1":
            if max(int(m[2]), int(m[3] or 0)) >= 1:
                domain.append(max(int(m[2]), int(m[3] or 0)))
            continue
        m = _NVLS_GROUP.search(line)
        if m:
            if int(m[1]) >= 1:
                nvls.append(int(m[1]))
            continue
        if "opCount" in line and (m := _OPCOUNT.search(line)) is not None and int(m[1]) >= 1:
            calls.append(int(m[1]))
    if calls and (n := _one(calls)) is not None:
        ev.exact("nranks", n, f"[nranks={n}] in NCCL's opCount lines")
    if init:
        n = _one(init)
        kinds = " / ".join(sorted(init_kinds))
        if n is not None:
            ev.exact("nranks", n, f"nranks {n} in NCCL's {kinds} lines")
        else:
            warnings.append(f"NCCL's {kinds} lines show communicators of {', '.join(map(str, sorted(set(init))))} "
                            "ranks; not used for the number of ranks")
    if comm:
        n = _one(c[0] for c in comm)
        if n is not None:
            ev.exact("nranks", n, f"nRanks {n} in NCCL's comm lines")
        nodes, mnnvl = _one(c[1] for c in comm), max(c[3] for c in comm)
        local = max(c[2] for c in comm)
        if mnnvl:  # NCCL counts an MNNVL domain as one node
            if nodes is not None:
                ev.at_least("nnodes", nodes, f"nNodes {nodes} with MNNVL 1 in NCCL's comm lines (NVLink domains)")
            ev.at_least("nvl_domain", local, f"localRanks {local} with MNNVL 1 in NCCL's comm lines")
        elif nodes is not None:
            ev.exact("nnodes", nodes, f"nNodes {nodes} in NCCL's comm lines")
            per = _one(c[2] for c in comm)
            if per is not None and n is not None and per * nodes == n:
                ev.exact("ranks_per_node", per, f"localRanks {per} in NCCL's comm lines")
    if domain:
        ev.at_least("nvl_domain", max(domain), f"MNNVL 1 cliqueSize/nvlDomainSize {max(domain)} in NCCL's INFO lines")
    if nvls:
        ev.at_least("nvl_domain", max(nvls), f"NVLS multicast group of {max(nvls)} ranks in NCCL's INFO lines")
    if launch:
        _launch_clues(ev, lines, header)


def _command_lines(lines: Sequence[tuple[int, str]]) -> list[str]:
    """Launch command lines, each joined with the lines it continues on (``\\`` at the end of a line)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        lineno, line = lines[i]
        m = _LAUNCH.search(line)
        if m is None or "NCCL INFO" in line:
            i += 1
            continue
        text = line
        while text.rstrip().endswith("\\") and i + 1 < len(lines) and lines[i + 1][0] == lineno + 1:
            i += 1
            lineno, line = lines[i]
            text = text.rstrip()[:-1] + " " + line
        out.append(text[_LAUNCH.search(text).start(1):])  # type: ignore[union-attr]
        i += 1
    return out


_NUM = r"(\d{1,7})(?![\d\w:-])"
_MPI_NP = re.compile(rf"(?:^|\s)(?:-np|-n|--np|--n)[\s=]+{_NUM}")
_MPI_PPN = re.compile(rf"(?:^|\s)(?:-N|--npernode|-npernode|-ppn|--ppn|-perhost)[\s=]+{_NUM}"
                      r"|--map-by[\s=]+ppr:(\d{1,7}):node")
_SRUN_NODES = re.compile(rf"(?:^|\s)(?:-N\s*|--nodes[\s=]+){_NUM}")
_SRUN_TASKS = re.compile(rf"(?:^|\s)(?:-n\s*|--ntasks[\s=]+){_NUM}")
_SRUN_PPN = re.compile(rf"(?:^|\s)--ntasks-per-node[\s=]+{_NUM}")


_BINARY_ARG = re.compile(r"_perf(?:_mpi)?\b(.*)$")
_TEST_THREADS = re.compile(rf"(?:^|\s)(?:-t|--nthreads)[\s=]*{_NUM}")
_TEST_GPUS = re.compile(rf"(?:^|\s)(?:-g|--ngpus)[\s=]*{_NUM}")


def _ranks_per_process(command: str, header: NcclTestsHeader) -> tuple[int, str] | None:
    """nThread x nGpus of the run: the header's, else the binary's ``-t``/``-g`` on the command line (nccl-tests'
    defaults are 1 and 1); None when neither the header nor the command line names them."""
    if header.nthreads and header.ngpus:
        threads, gpus = header.nthreads, header.ngpus
    else:
        binary = _BINARY_ARG.search(command)
        if binary is None:
            return None
        t, g = _TEST_THREADS.search(binary[1]), _TEST_GPUS.search(binary[1])
        threads, gpus = int(t[1]) if t else 1, int(g[1]) if g else 1
    per = threads * gpus
    if per < 1:
        return None
    return per, (f" x nThread {threads} x nGpus {gpus}" if per != 1 else "")


def _launch_clues(ev: GeometryEvidence, lines: Sequence[tuple[int, str]], header: NcclTestsHeader) -> None:
    """``mpirun -np P [-npernode PPN]`` / ``srun -N M -n P [--ntasks-per-node PPN]``: P processes of nThread x
    nGpus ranks each (the header's, else the binary's ``-t``/``-g``), M nodes. With no launcher line, the binary
    run bare (:data:`_BARE_BINARY`) is one process on one node."""
    commands = _command_lines(lines)
    if not commands:
        _bare_clues(ev, lines, header)
    for command in commands:
        launcher = command.split(None, 1)[0]
        args = re.split(r"\S*_perf(?:_mpi)?\b", command, maxsplit=1)[0]  # the launcher's options, before the binary
        if launcher == "srun":
            nodes, tasks, ppn = _SRUN_NODES.search(args), _SRUN_TASKS.search(args), _SRUN_PPN.search(args)
            if nodes and int(nodes[1]) >= 1:
                ev.exact("nnodes", int(nodes[1]), f"{launcher} {nodes[0].strip()} on the command line")
        else:
            tasks, ppn = _MPI_NP.search(args), _MPI_PPN.search(args)
        each = _ranks_per_process(command, header)
        if each is None:
            continue
        per, scale = each
        if tasks and int(tasks[1]) >= 1:
            ev.exact("nranks", int(tasks[1]) * per, f"{launcher} {tasks[0].strip()}{scale} on the command line")
        if ppn and int(ppn[1] or ppn[2]) >= 1:
            value = int(ppn[1] or ppn[2])
            ev.exact("ranks_per_node", value * per, f"{launcher} {ppn[0].strip()}{scale} on the command line")


def _bare_clues(ev: GeometryEvidence, lines: Sequence[tuple[int, str]], header: NcclTestsHeader) -> None:
    """The test binary run without a launcher (one command, not two that disagree): one process of nThread x
    nGpus ranks, on one node."""
    bare = {line.strip() for _, line in lines if _BARE_BINARY.match(line)}
    counts = {each for each in (_ranks_per_process(command, header) for command in bare) if each is not None}
    if len(counts) != 1:
        return
    per, scale = counts.pop()
    command = min(bare, key=len)
    says = f"the binary run without a launcher ({command}): one process{scale or ' of one rank'}"
    ev.exact("nranks", per, says)
    ev.exact("nnodes", 1, says)


_ENV_WORLD = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")
_ENV_LOCAL = ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MPI_LOCAL_NRANKS")
_ENV_NODES = ("SLURM_STEP_NUM_NODES",)


def env_clues(ev: GeometryEvidence, env: Mapping[str, str], header: NcclTestsHeader) -> None:
    """The launcher's variables in a ``-J`` file's ``env``: processes (times nThread x nGpus ranks) and nodes."""
    per = (header.nthreads or 1) * (header.ngpus or 1)
    scale = f" x nThread {header.nthreads} x nGpus {header.ngpus}" if per != 1 else ""
    for names, field, times in ((_ENV_WORLD, "nranks", per), (_ENV_LOCAL, "ranks_per_node", per),
                                (_ENV_NODES, "nnodes", 1)):
        for name in names:
            value = env.get(name, "").strip()
            if value.isdigit() and int(value) > 0:
                ev.exact(field, int(value) * times,  # type: ignore[arg-type]
                         f"{name}={value}{scale if times != 1 else ''} in the run's environment")
                break


# ------------------------------------------------------------------------------------------------ the rows


class _Bandwidths(NamedTuple):
    algbw_gbps: float
    busbw_gbps: float


class _Counts(NamedTuple):
    size_bytes: int
    elements: int | None
    dtype: str


MOST_BANDWIDTH_ROWS = 4096
"""Distinct (algbw, busbw) pairs solved for n at most: those of the largest algbw, whose printed digits bound n
most tightly (a table of 10^6 rows costs a set of its columns, not 10^6 solutions)."""


def _distinct(rows: Sequence[Row] | TableRows) -> tuple[list[_Bandwidths], list[_Counts]]:
    """The distinct bandwidth pairs and (size, count, type) triples of the rows, read from a text table's columns."""
    if isinstance(rows, TableRows):
        pairs = {pair for b in rows.blocks for p in b.placements for pair in zip(p.algbw_gbps, p.busbw_gbps,
                                                                                    strict=True)}
        counts = {t for b in rows.blocks for t in zip(b.size_bytes, b.elements, b.dtype, strict=True)}
    else:
        pairs = {(r.algbw_gbps, r.busbw_gbps) for r in rows}
        counts = {(r.size_bytes, r.elements, r.dtype) for r in rows}
    chosen = heapq.nlargest(MOST_BANDWIDTH_ROWS, pairs) if len(pairs) > MOST_BANDWIDTH_ROWS else list(pairs)
    return [_Bandwidths(*p) for p in chosen], [_Counts(*t) for t in counts]


def _in_span(span: tuple[int, int | None], n: int) -> bool:
    """``n`` lies in the (first, last) ranks busbw/algbw allows (last None: no upper bound)."""
    return span[0] <= n and (span[1] is None or n <= span[1])


def rows_say_excerpt(op: str, rows: Sequence[Row] | TableRows, listed: int, passed: int) -> bool:
    """The rows fit ``passed`` ranks and not the ``listed`` ranks of a rank list without an elision marker: the
    list is an author's excerpt (the passed number is then taken, with a note), not processes that each ran alone
    (whose rows fit the list)."""
    bandwidths, counts = _distinct(rows)
    counted = nranks_from_counts(op, counts)  # type: ignore[arg-type]
    span = nranks_from_bandwidths(op, bandwidths)  # type: ignore[arg-type]

    def fits(n: int) -> bool | None:
        votes = [] if counted is None else [counted == n]
        if span is not None:
            votes.append(_in_span(span, n))
        return all(votes) if votes else None

    return fits(passed) is True and fits(listed) is False


def row_clues(ev: GeometryEvidence, op: str, rows: Sequence[Row] | TableRows, warnings: list[str],
              known: int | None = None) -> None:
    """busbw/algbw solved for n (with the printing precision of both columns) and size/count.

    ``known``: the ranks a complete rank list shows; the rows then only add their evidence where they agree (a
    disagreement is a warning: the list is what ran). size/count is exact in the same way."""
    bandwidths, counts = _distinct(rows)
    counted = nranks_from_counts(op, counts)  # type: ignore[arg-type]  # reads size_bytes, elements, dtype
    span = nranks_from_bandwidths(op, bandwidths)  # type: ignore[arg-type]  # reads algbw_gbps, busbw_gbps
    if (known is not None and counted is not None and counted != known and span is not None
            and _in_span(span, counted) and not _in_span(span, known)):
        # Two independent clues of the rows against the list: the list is an excerpt cut without a marker.
        raise ParseError(ev.source, None, f"one number of ranks: the rank list shows {known}, but size / (count x "
                         f"type size) and busbw/algbw both say {counted}; if the list is an excerpt, pass "
                         f"--nranks {counted}", found=f"{known} rank lines without an elision marker")
    if counted is not None and (known is None or counted == known):
        ev.exact("nranks", counted, f"size / (count x type size) = {counted}")
        known = counted  # exact; the oldest all_gather tables print busbw = algbw (nccl-facts.md 4.3)
    if span is None:
        return
    best = max((r for r in bandwidths if r.algbw_gbps > 0), key=lambda r: r.algbw_gbps)
    ratio = f"busbw/algbw = {best.busbw_gbps / best.algbw_gbps:.4f}"
    first, last = span
    if last is not None and last < first:
        warnings.append(f"busbw/algbw of the rows fits no one number of ranks for {op}; not used")
        return
    says = f"{ratio} -> {first}" if first == last else (
        f"{ratio} -> {first} or more" if last is None else f"{ratio} -> {first}..{last}")
    if known is not None and not _in_span(span, known):
        warnings.append(f"{says} does not fit {known} ranks (the rank list, or size/count); not used")
        return
    ev.between("nranks", first, last, says)


# ------------------------------------------------------------------------------------------------ the op


def op_from_log(lines: Sequence[tuple[int, str]]) -> tuple[str, int] | None:
    """The op NCCL's INFO lines name (``AllReduce: opCount ...``, ``Broadcast: 8 Bytes -> Algo ...``), when they
    name exactly one; (op, line number)."""
    found: dict[str, int] = {}
    for lineno, line in lines:
        if "NCCL INFO" in line:
            m = _FUNC.search(line)
            if m:
                found.setdefault(_FUNC_OP[m[1]], lineno)
    return next(iter(found.items())) if len(found) == 1 else None


def op_from_columns(rows: Sequence[Row], source: str) -> tuple[str, str] | None:
    """The op the columns can only be, with the evidence: a root in every row and busbw = algbw is ``broadcast``
    (redop ``none``) or ``reduce`` (a redop); a root and busbw/algbw = (n-1)/n fits ``gather`` and ``scatter``
    alike: a ParseError asking for ``--op``. None: the columns do not tell."""
    usable = [r for r in rows if r.algbw_gbps > 0]
    if not usable or any(r.root is None or r.root < 0 for r in rows):
        return None
    redops = {r.redop for r in rows}
    if len(redops) != 1:
        return None
    redop = redops.pop()
    root = rows[0].root
    if all(abs(r.busbw_gbps - r.algbw_gbps) <= max(0.0101, 2e-4 * r.algbw_gbps) for r in usable):
        op = "broadcast" if redop is None else "reduce"
        why = "redop none" if redop is None else f"redop {redop}"
        return op, f"{why}, root {root} and busbw = algbw in every row: {op}"
    span = nranks_from_bandwidths("gather", usable)
    if redop is None and span is not None and (span[1] is None or span[1] >= span[0]):
        raise ParseError(source, None, "the collective: redop none, a root and busbw/algbw = (n-1)/n fit gather "
                         "and scatter alike; pass op (--op gather or --op scatter)")
    return None
