"""How an nccl-tests run was launched, from what it printed and what the caller knows: its processes, threads and
GPUs, its ``NCCL_TESTS_SPLIT`` groups, how its times were reduced over ranks, and whether it was one run at all.

Facts (nccl-tests v2.19.6 ``src/common.cu`` ``run()``/``Allreduce``, ``src/util.cu`` ``writeDeviceReport``):

* Every world rank prints one ``Rank r Group c Pid p on host device d`` line, gathered to rank 0 over
  MPI_COMM_WORLD; ``r = proc*nThreads*nGpus + i`` and ``c`` is the process's colour. With
  ``NCCL_TESTS_SPLIT_MASK=m`` the colour is ``proc & m`` (``strtoul(m, 16)``); with ``NCCL_TESTS_SPLIT`` it is
  ``proc & v``, ``proc | v``, ``proc % v`` or ``proc / v`` (``AND|&``, ``OR||``, ``MOD|%``, ``DIV|/``). Processes
  of one colour form one communicator; the colour applies to a process, so all of its ``-t x -g`` ranks share it.
* busbw is computed with the communicator's size (``nProcs`` is the split communicator's), by rank 0's thread,
  which prints: the bandwidths are those of rank 0's group. The time is reduced over every process of the world
  (``MPI_COMM_WORLD``) and every thread: ``-a 0`` rank 0's, ``1`` the mean (the default), ``2`` the minimum,
  ``3`` the maximum. A thread times all of its ``-g`` GPUs together (one batch, waited for on every stream),
  so one process with one thread (``-g 8``) reports the time of its slowest GPU whatever ``-a`` says.
* Without MPI (a build without ``MPI=1``, or an MPI whose ``MPI_Init`` found no matching PMI and ran as a
  singleton) each process is a world of its own: it prints its own header and its own rank list from Rank 0,
  and its numbers are those of a 1-process run (busbw 0 for all_reduce on one rank, a local copy's rate for
  broadcast). N such processes under srun or mpirun print N headers and N ``Rank 0`` lines (seen interleaved
  line by line under mpirun, whole under srun: nccl-tests issues 27, 213, 306).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from collscope.collectives.nccl_tests.records import NcclTestsDevice, NcclTestsHeader
from collscope.collectives.record import TimeOverRanks
from collscope.vocab.nccl import SYMMETRIC_KERNELS_FROM, release_major_minor
from collscope.vocab.ops import op_facts

__all__ = ["rank_line", "rank_lines", "TIME_OVER_RANKS", "average_from_argv", "registration_from_argv",
           "symmetric_kernel_note", "time_over_ranks", "split_colors",
           "RankGroups", "rank_groups", "groups_from_env", "separate_processes", "process_shape", "SEPARATE_FIX"]

TIME_OVER_RANKS: dict[int, TimeOverRanks] = {0: "rank0", 1: "mean", 2: "min", 3: "max"}
"""nccl-tests ``-a`` value -> how a row's time combines the ranks' times (``src/common.cu`` Allreduce)."""
NCCL_TESTS_DEFAULT_AVERAGE = 1

_AVERAGE = re.compile(r"^(?:-a|--average)(?:=?(-?\d+))?$")
_REGISTER = re.compile(r"^(?:-R|--local_register)(?:=?(-?\d+))?$")


def _int_option(argv: Sequence[str], option: re.Pattern[str], default: int) -> int | None:
    """The value of an integer option of an nccl-tests command line (``-a 3``, ``-a3``, ``--average=3``), the last
    one given; ``default`` when the command line names an ``*_perf`` binary without it; None when it names none
    or the value is not an integer."""
    args = list(argv)
    start = next((i for i, a in enumerate(args) if re.search(r"_perf(?:_mpi)?$", a)), None)
    if start is None:
        return None
    value = default
    i = start + 1
    while i < len(args):
        m = option.match(args[i])
        if m:
            text = m[1] if m[1] is not None else (args[i + 1] if i + 1 < len(args) else "")
            try:
                value = int(text, 0)
            except ValueError:
                return None
            i += 1 if m[1] is not None else 2
            continue
        i += 1
    return value


def average_from_argv(argv: Sequence[str]) -> int | None:
    """The ``-a``/``--average`` value of an nccl-tests command line (``-a 3``, ``-a3``, ``--average=3``); the
    default 1 when the command line names an ``*_perf`` binary and no ``-a``; None when it names none."""
    return _int_option(argv, _AVERAGE, NCCL_TESTS_DEFAULT_AVERAGE)


def registration_from_argv(argv: Sequence[str]) -> int | None:
    """The ``-R``/``--local_register`` value of an nccl-tests command line: 0 none (the default when the command
    line names an ``*_perf`` binary without it), 1 local registration, 2 symmetric windows; None when it names no
    binary."""
    return _int_option(argv, _REGISTER, 0)


def symmetric_kernel_note(op: str, registration: int | None, nccl_version: str | None, backend: str) -> str | None:
    """What a run with ``-R 2`` says of its figures, for an op NCCL has symmetric-memory kernels for, on NCCL 2.27
    or later (or a release the output does not print); None otherwise."""
    if registration != 2 or backend != "nccl" or not op_facts(op).nccl_symmetric_kernel:
        return None
    release = release_major_minor(nccl_version) if nccl_version else None
    if release is not None and release < SYMMETRIC_KERNELS_FROM:
        return None  # nccl-tests: "Option -R 2 (symmetric) is not supported before NCCL 2.27", local registration
    return (f"buffers registered as symmetric windows (-R 2): from NCCL {SYMMETRIC_KERNELS_FROM[0]}."
            f"{SYMMETRIC_KERNELS_FROM[1]}, {op} inside one NVLink domain whose GPUs all reach each other directly "
            "(an NVSwitch node, an MNNVL rack) may run NCCL's symmetric-memory kernels, picked by their own cost "
            "model (src/sym_kernels.cc ncclSymkPickKernel), which collscope's model of NCCL's choice "
            "(src/graph/tuning.cc algorithms) does not describe: where one ran, a size can read faster than its "
            "expected figure (rerun without -R 2 to compare)")


def time_over_ranks(average: int | None, nprocs: int | None, nthreads: int | None) -> TimeOverRanks | None:
    """How the rows' times combine the ranks': one process of one thread times every GPU in one batch (the
    maximum); else what ``-a`` says (None: unknown)."""
    if nprocs == 1 and nthreads == 1:
        return "max"
    return None if average is None else TIME_OVER_RANKS.get(average)


_RANK = re.compile(r"Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]"
                   r"\s*(.*?)\s*$")
_RANK_LINES = re.compile(r"^[ \t#]*(Rank\s+\d+\s.*)$", re.M)


def rank_line(body: str) -> NcclTestsDevice | None:
    """The device of a ``Rank  0 Group  0 Pid 1234 on host device  0 [0000:0f:00] NVIDIA A100`` line (``#``
    stripped; ``Group`` absent before v2.13.4); None when the line is not one."""
    m = _RANK.match(body)
    if m is None:
        return None
    return NcclTestsDevice(rank=int(m[1]), group=None if m[2] is None else int(m[2]), pid=int(m[3]), host=m[4],
                           device=int(m[5]), bus_id=m[6], name=m[7])


def rank_lines(text: str) -> list[NcclTestsDevice]:
    """Every rank line of ``text``, in order (the error path of a second run: who printed which rank)."""
    return [d for body in _RANK_LINES.findall(text) for d in [rank_line(body)] if d is not None]


_SPLIT = re.compile(r"^\s*(AND|&|OR|\||MOD|%|DIV|/)\s*(\S.*)$", re.IGNORECASE)


def _parse_int(text: str) -> int | None:
    """nccl-tests ``parseInt``: leading blanks, ``0b`` binary, else C ``strtoul(s, 0)`` (``0x`` hex, ``0`` octal)."""
    text = text.strip()
    try:
        if text[:2].lower() == "0b":
            return int(text[2:], 2)
        if re.fullmatch(r"0[0-7]+", text):
            return int(text, 8)
        return int(text, 0)
    except ValueError:
        return None


def split_colors(env: Mapping[str, str], nprocs: int) -> tuple[list[int], str] | None:
    """The colour of each of ``nprocs`` processes under ``NCCL_TESTS_SPLIT_MASK`` (first) or ``NCCL_TESTS_SPLIT``
    as nccl-tests computes it, and the setting in words; None when neither is set (one group) or unreadable."""
    mask = env.get("NCCL_TESTS_SPLIT_MASK")
    if mask is not None:
        try:
            value = int(mask.strip().removeprefix("0x").removeprefix("0X") or "0", 16)
        except ValueError:
            return None
        return [p & value for p in range(nprocs)], f"NCCL_TESTS_SPLIT_MASK={mask}"
    split = env.get("NCCL_TESTS_SPLIT")
    if split is None:
        return None
    m = _SPLIT.match(split)
    parsed = None if m is None else _parse_int(m[2])
    if m is None or parsed is None:
        return None
    op, value = m[1].upper(), parsed
    if op in ("MOD", "%", "DIV", "/") and value == 0:
        return None
    colors = {"AND": lambda p: p & value, "&": lambda p: p & value, "OR": lambda p: p | value,
              "|": lambda p: p | value, "MOD": lambda p: p % value, "%": lambda p: p % value,
              "DIV": lambda p: p // value, "/": lambda p: p // value}[op]
    return [colors(p) for p in range(nprocs)], f"NCCL_TESTS_SPLIT={split}"


class RankGroups(NamedTuple):
    """The communicators of a run: rank 0's (the one whose bandwidths are printed) and how many there were."""

    world: int
    """Ranks launched (every group)."""
    size: int
    """Ranks in rank 0's communicator: the n of the printed busbw."""
    groups: int
    """Communicators measured at once (1 without a split)."""
    sizes: tuple[int, ...]
    """Each communicator's size, largest first."""
    evidence: str


def rank_groups(devices: Sequence[NcclTestsDevice]) -> RankGroups | None:
    """The groups of a complete rank list, by its ``Group`` column (None: no Group column, pre-2.13.4)."""
    if not devices or any(d.group is None for d in devices):
        return None
    counts = Counter(d.group for d in devices)
    first = next((d for d in devices if d.rank == 0), devices[0])
    size = counts[first.group]
    sizes = tuple(sorted(counts.values(), reverse=True))
    return RankGroups(len(devices), size, len(counts), sizes,
                      f"rank lines: {len(devices)} ranks in {len(counts)} group(s), rank 0's of {size}")


def groups_from_env(env: Mapping[str, str], world: int, per_process: int) -> RankGroups | None:
    """The groups ``NCCL_TESTS_SPLIT_MASK``/``NCCL_TESTS_SPLIT`` make of ``world`` ranks of ``per_process`` ranks
    each (``-t x -g``); None when neither is set, or the world is not whole processes."""
    if per_process < 1 or world % per_process:
        return None
    found = split_colors(env, world // per_process)
    if found is None:
        return None
    colors, words = found
    counts = Counter(colors)
    size = counts[colors[0]] * per_process
    sizes = tuple(sorted((c * per_process for c in counts.values()), reverse=True))
    return RankGroups(world, size, len(counts), sizes,
                      f"{words}: {world} ranks in {len(counts)} group(s), rank 0's of {size}")


SEPARATE_FIX = ("build nccl-tests with MPI=1 against the MPI that starts it (make MPI=1 MPI_HOME=...), and launch "
                "it through that MPI: its mpirun, or srun with the PMI it was built for (srun --mpi=pmix for Open "
                "MPI 4/5 builds; srun --mpi=list shows the choices); if these were meant as separate runs, split the "
                "output per process")


def separate_processes(devices: Sequence[NcclTestsDevice], nheaders: int) -> tuple[str, str] | None:
    """Why the output is several independent nccl-tests processes, not one run, as ParseError's (expected,
    found); None: it is one run.

    The evidence: one rank number (Rank 0) printed by different processes (host, pid), or more than one
    ``# nThread`` header with at most one Rank 0 line (headers printed before any table, as concurrent
    processes print them). The same rank list pasted twice (the same processes) is not this case.
    """
    zero = [(d.host, d.pid) for d in devices if d.rank == 0]
    procs = sorted(set(zero))
    if len(procs) < 2 and not (nheaders >= 2 and len(zero) <= 1):
        return None
    count = max(len(procs), nheaders)
    every = {(d.host, d.pid) for d in devices}
    per = len(devices) // len(every) if every else 0
    each = f"{per} rank{'s' if per != 1 else ''} each" if per else "each with its own header"
    where = ", ".join(f"pid {pid} on {host}" for host, pid in procs[:4]) + (", ..." if len(procs) > 4 else "")
    seen = f"Rank 0 printed by {len(procs)} processes: {where}" if len(procs) >= 2 else f"{nheaders} headers"
    return (f"one nccl-tests run, not {count} separate processes ({each}): each process ran as a world of its own "
            f"(a build without MPI=1, or a launcher whose PMI does not match nccl-tests' MPI, so MPI_Init ran as a "
            f"singleton) and its bandwidths are a one-process run's (busbw 0 for all_reduce on one rank); to fix: "
            f"{SEPARATE_FIX}", seen)


def process_shape(devices: Sequence[NcclTestsDevice], ranks_elided: bool, header: NcclTestsHeader,
                  world: int | None) -> tuple[str | None, int | None]:
    """``PxTxG`` (processes x threads per process x GPUs per thread) and P, from the header's ``nThread`` and
    ``nGpus`` and the world's rank count (the rank lines' distinct (host, pid) when complete); (None, None)
    when unknown."""
    t, g = header.nthreads, header.ngpus
    if t is None or g is None or t < 1 or g < 1:
        return None, None
    if devices and not ranks_elided:
        procs = len({(d.host, d.pid) for d in devices})
    elif world is not None and world % (t * g) == 0:
        procs = world // (t * g)
    else:
        return None, None
    return f"{procs}x{t}x{g}", procs
