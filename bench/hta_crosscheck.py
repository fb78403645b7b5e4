"""Cross-check ``collscope trace`` against Meta's Holistic Trace Analysis (HTA) on the same traces.

For every trace set (a trace file, or a directory of one file per rank; by default each file of the shared
corpus's ``traces/`` folder, ``$COLLSCOPE_CORPUS`` or ``../shared/corpus`` beside the repository) it runs
collscope (this interpreter) and HTA (the Python of HTA's own virtual environment) in separate processes and
prints, per rank, both tools' figures side by side as a Markdown table: the profiler steps each keeps, the NCCL
kernels each counts (collscope: its calls, plus the kernels it leaves outside the profiler window), the
communication time, the comm/compute overlap (collscope over all its steps and over the steps HTA keeps; HTA's
``get_comm_comp_overlap``), the median step, and each process's wall clock and peak memory (``ru_maxrss``).
Below the table: per set, collscope's late rank next to HTA's ``get_potential_stragglers``. docs/traces.md
("Cross-check with HTA") explains every rule on which the two differ.

HTA is never imported here: it lives in a virtual environment of its own (its pandas/plotly/jupyter stack stays
out of collscope's), ``--hta-venv DIR``, else ``$COLLSCOPE_HTA_VENV``, else ``~/.cache/collscope/hta-venv``.
``--install-hta`` creates that environment (``python -m venv`` + ``pip install HolisticTraceAnalysis==0.5.0``).

Exit status: 0 with the table; 0 with one line starting "not run:" when the corpus (or a named path) or HTA is
absent: a peer check that cannot run on this machine is skipped and says why, it does not fail; 1 when the
installation asked by ``--install-hta`` fails; 2 for bad usage. A tool that fails on one set has "failed"
in its cells and the reason below the table. Both tools' processes run through ``collscope.proc.run`` (argv,
timeout, the whole process group ended on timeout); each process measures its own peak memory.

    .venv/bin/python bench/hta_crosscheck.py [PATH...] [--hta-venv DIR] [--install-hta] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HTA_PACKAGE = "HolisticTraceAnalysis==0.5.0"
MARK = "CROSSCHECK "  # the line a child prints its figures on (HTA logs to the same streams)
TOOL_TIMEOUT_S = 900.0


@dataclass(frozen=True, slots=True)
class RankFigures:
    """One tool's figures for one rank."""

    steps: tuple[int, ...]
    """The profiler steps (``ProfilerStep#N``) the tool keeps for this rank."""
    comm_kernels: int
    """collscope: collective calls (the kernels one CPU call launched count once); HTA: NCCL kernels kept."""
    comm_us: float
    """Communication time: collscope the sum of its steps' ``comm_us``; HTA the merged NCCL kernel intervals."""
    overlap_pct: float | None
    """Share of the communication time that compute overlaps (collscope: 1 - exposed / communication)."""
    step_us_median: float | None
    """Median step: collscope's period (start to the next step's start), HTA's ``ProfilerStep#N`` span."""
    outside_window_kernels: int | None = None
    """collscope: kernels without a launch in the file, put in no step; HTA drops them (None: not said)."""
    per_step: tuple[tuple[int, float, float], ...] = ()
    """collscope: (step, comm_us, exposed_comm_us) per step, to compute the overlap over HTA's steps."""
    calls_per_step: Mapping[int, int] | None = None
    """collscope: calls per step, to count them over HTA's steps."""


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool's process on one trace set."""

    ranks: Mapping[int, RankFigures]
    wall_s: float
    """The whole process (interpreter start, imports, reading, analysis), as its parent timed it."""
    analysis_s: float | None
    """Reading + analysis inside the process (imports left out)."""
    peak_mb: float | None
    late: str | None = None
    """collscope: the first row of ``late_ranks``; HTA: ``get_potential_stragglers`` (or why it failed)."""
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Row:
    trace: str
    rank: int
    cells: tuple[str, ...]


COLUMNS = ("trace", "rank", "steps: cs / HTA", "calls: cs all / cs HTA's steps / HTA NCCL kernels",
           "comm ms: cs all / cs HTA's steps / HTA", "overlap %: cs all / cs HTA's steps / HTA",
           "median step ms: cs / HTA", "wall s: cs / HTA", "read+analysis s: cs / HTA", "peak MB: cs / HTA")
"""The table's columns; ``cs`` is collscope, "HTA's steps" the profiler steps HTA keeps (the last one left out)."""


# ---- pure functions: figures from each tool's output, and the table -------------------------------------------

def overlap_pct(per_step: Iterable[tuple[int, float, float]], only: Iterable[int] | None = None) -> float | None:
    """100 x (1 - exposed / communication) over the steps (all, or those in ``only``); None without communication."""
    keep = None if only is None else set(only)
    comm = exposed = 0.0
    for step, comm_us, exposed_us in per_step:
        if keep is None or step in keep:
            comm += comm_us
            exposed += exposed_us
    return None if comm <= 0 else 100.0 * (1.0 - exposed / comm)


def collscope_figures(doc: Mapping[str, Any], outside: Mapping[int, int] | None = None) -> dict[int, RankFigures]:
    """Per rank, from a ``trace --json`` document (``steps``, ``collectives``); ``outside`` the kernels each rank
    left outside the profiler window (``RankTrace.outside_window_kernels``)."""
    calls: dict[int, int] = {}
    per_step_calls: dict[int, dict[int, int]] = {}
    for c in doc.get("collectives", []):
        calls[c["rank"]] = calls.get(c["rank"], 0) + 1
        if c.get("step") is not None:
            counts = per_step_calls.setdefault(c["rank"], {})
            counts[c["step"]] = counts.get(c["step"], 0) + 1
    steps: dict[int, list[Mapping[str, Any]]] = {}
    for s in doc.get("steps", []):
        steps.setdefault(s["rank"], []).append(s)
    out: dict[int, RankFigures] = {}
    for rank in sorted(set(calls) | set(steps)):
        mine = sorted(steps.get(rank, []), key=lambda s: s["step"])
        per_step = tuple((int(s["step"]), float(s["comm_us"]), float(s["exposed_comm_us"])) for s in mine)
        out[rank] = RankFigures(
            steps=tuple(s for s, _, _ in per_step), comm_kernels=calls.get(rank, 0),
            comm_us=sum(c for _, c, _ in per_step), overlap_pct=overlap_pct(per_step),
            step_us_median=median(float(s["duration_us"]) for s in mine) if mine else None,
            outside_window_kernels=None if outside is None else int(outside.get(rank, 0)), per_step=per_step,
            calls_per_step=per_step_calls.get(rank, {}))
    return out


def collscope_late(doc: Mapping[str, Any]) -> str | None:
    """collscope's verdict on late ranks: the first row of ``late_ranks`` (None when the report has none)."""
    table = doc.get("late_ranks")
    if table is None:
        return None
    if not table:
        return "no calls matched across ranks"
    if not table[0].get("others_waited_us"):
        return "no rank waited for"
    top = table[0]
    return (f"rank {top['rank']} last at {top['last_count']} of {top['matched_calls']} matched calls, "
            f"others waited {top['others_waited_us'] / 1000:.3g} ms for it")


def _finite(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def hta_figures(obj: Mapping[str, Any]) -> dict[int, RankFigures]:
    """Per rank, from what the HTA child printed (``ranks``: rank -> iterations, kernels, times, overlap)."""
    out: dict[int, RankFigures] = {}
    for key, r in sorted(obj.get("ranks", {}).items(), key=lambda kv: int(kv[0])):
        step_us = [float(v) for v in r.get("step_us", [])]
        out[int(key)] = RankFigures(steps=tuple(int(i) for i in r.get("iterations", [])),
                                    comm_kernels=int(r["comm_kernels"]), comm_us=float(r["comm_us"]),
                                    overlap_pct=_finite(r.get("overlap_pct")),
                                    step_us_median=median(step_us) if step_us else None)
    return out


def _steps_text(steps: Sequence[int]) -> str:
    if not steps:
        return "none"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return str(steps[0]) if len(steps) == 1 else f"{steps[0]}-{steps[-1]}"
    return ",".join(str(s) for s in steps)


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _pair(a: str, b: str) -> str:
    return f"{a} / {b}"


def on_steps(figures: RankFigures, steps: Iterable[int]) -> tuple[int, float, float | None]:
    """collscope's calls, communication time (us) and overlap (%) over the given steps only (HTA's)."""
    keep = set(steps)
    calls = sum(n for step, n in (figures.calls_per_step or {}).items() if step in keep)
    comm = sum(c for step, c, _ in figures.per_step if step in keep)
    return calls, comm, overlap_pct(figures.per_step, keep)


def side_by_side(trace: str, cs: ToolRun, hta: ToolRun) -> list[Row]:
    """One row per rank either tool saw; a tool that failed on the set shows "failed" in its cells. Where both
    saw the rank, collscope's calls, communication and overlap are also given over the steps HTA keeps."""
    rows = []
    none_c = "failed" if cs.error else "-"
    none_h = "failed" if hta.error else "-"
    for rank in sorted(set(cs.ranks) | set(hta.ranks)):
        c, h = cs.ranks.get(rank), hta.ranks.get(rank)
        if c is None:
            kernels_c = comm_c = overlap_c = steps_c = step_c = none_c
        else:
            kernels_c = str(c.comm_kernels) + (f" (+{c.outside_window_kernels} outside)"
                                               if c.outside_window_kernels else "")
            comm_c, overlap_c = _num(c.comm_us / 1000, 4), _pct(c.overlap_pct)
            steps_c, step_c = _steps_text(c.steps), _num(c.step_us_median and c.step_us_median / 1000, 4)
        if c is not None and h is not None:
            calls, comm, pct = on_steps(c, h.steps)
            kernels_c, comm_c, overlap_c = (f"{kernels_c} / {calls}", f"{comm_c} / {_num(comm / 1000, 4)}",
                                            f"{overlap_c} / {_pct(pct)}")
        else:
            kernels_c, comm_c, overlap_c = f"{kernels_c} / -", f"{comm_c} / -", f"{overlap_c} / -"
        cells = (
            _pair(steps_c, none_h if h is None else _steps_text(h.steps)),
            _pair(kernels_c, none_h if h is None else str(h.comm_kernels)),
            _pair(comm_c, none_h if h is None else _num(h.comm_us / 1000, 4)),
            _pair(overlap_c, none_h if h is None else _pct(h.overlap_pct)),
            _pair(step_c, none_h if h is None else _num(h.step_us_median and h.step_us_median / 1000, 4)),
            _pair(_num(cs.wall_s, 2), _num(hta.wall_s, 2)),
            _pair(_num(cs.analysis_s, 2), _num(hta.analysis_s, 2)),
            _pair(_num(cs.peak_mb, 3), _num(hta.peak_mb, 3)),
        )
        rows.append(Row(trace, rank, cells))
    if not rows:
        rows.append(Row(trace, -1, (_pair(none_c, none_h),) * (len(COLUMNS) - 2)))
    return rows


def render_table(rows: Sequence[Row]) -> str:
    """The Markdown table (the one docs/traces.md shows)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        lines.append("| " + " | ".join((f"`{r.trace}`", "-" if r.rank < 0 else str(r.rank), *r.cells)) + " |")
    return "\n".join(lines)


def render_notes(trace: str, cs: ToolRun, hta: ToolRun) -> list[str]:
    """Below the table: the late-rank verdicts and any failure, one line each."""
    notes = [f"`{trace}`: late rank: collscope {cs.late or '-'}; HTA {hta.late or '-'}"]
    notes += [f"`{trace}`: {tool} failed: {run.error}" for tool, run in (("collscope", cs), ("HTA", hta)) if run.error]
    return notes


def child_figures(stdout: str) -> dict[str, Any] | None:
    """The figures a child printed: the last line starting with :data:`MARK` (None when there is none)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            parsed: dict[str, Any] = json.loads(line[len(MARK):])
            return parsed
    return None


# ---- the two children ------------------------------------------------------------------------------------------

def _peak_mb() -> float:
    """This process's peak RSS, or a child's (HTA parses several ranks in a process pool) when larger."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024


def collscope_child(files: Sequence[str]) -> None:
    from collscope.traces.load import read_traces
    from collscope.traces.report import analyze_traces

    t0 = time.perf_counter()
    traces = read_traces(list(files))
    doc = analyze_traces(traces).to_dict()
    seconds = time.perf_counter() - t0
    keep = {"steps": doc.get("steps", []), "late_ranks": doc.get("late_ranks"),
            "collectives": [{"rank": c["rank"], "step": c.get("step")} for c in doc.get("collectives", [])]}
    outside = {t.rank: t.outside_window_kernels for t in traces}
    print(MARK + json.dumps({"doc": keep, "outside": outside, "analysis_s": seconds, "peak_mb": _peak_mb()}))


def hta_child(files: Sequence[str]) -> None:  # runs in HTA's virtual environment
    import pandas as pd
    from hta.trace_analysis import TraceAnalysis
    from hta.utils.utils import KernelType, get_kernel_type, merge_kernel_intervals

    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_files=[os.path.abspath(f) for f in files])
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    sym = analysis.t.symbol_table.get_sym_table()
    ranks: dict[int, dict[str, Any]] = {}
    for rank, df in analysis.t.traces.items():
        kernels = df[df["stream"].ne(-1)]
        kinds = kernels["name"].map(lambda i: get_kernel_type(sym[i]))
        comm = kernels[kinds.eq(KernelType.COMMUNICATION.name)]
        merged = merge_kernel_intervals(comm[["ts", "dur"]].copy())
        names = df["name"].map(lambda i: sym[i] if 0 <= i < len(sym) else "")
        profiler_steps = df[names.str.startswith("ProfilerStep") & df["stream"].eq(-1)]
        pct = overlap.loc[overlap["rank"].eq(rank), "comp_comm_overlap_pctg"]
        ranks[int(rank)] = {"iterations": [int(i) for i in analysis.t.get_iterations(rank)],
                            "comm_kernels": len(comm), "comm_us": float((merged["end"] - merged["ts"]).sum()),
                            "overlap_pct": None if pct.empty or pd.isna(pct.iloc[0]) else float(pct.iloc[0]),
                            "step_us": [float(d) for d in profiler_steps["dur"]]}
    try:
        late = f"potential stragglers {analysis.get_potential_stragglers()}"
    except Exception as exc:  # HTA's own failure is a finding of the cross-check, not ours
        late = f"get_potential_stragglers failed: {type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - t0
    print(MARK + json.dumps({"ranks": ranks, "late": late, "analysis_s": seconds, "peak_mb": _peak_mb()}))


# ---- the parent ------------------------------------------------------------------------------------------------

def hta_venv(option: str | None) -> Path:
    if option:
        return Path(option)
    if os.environ.get("COLLSCOPE_HTA_VENV"):
        return Path(os.environ["COLLSCOPE_HTA_VENV"])
    return Path.home() / ".cache" / "collscope" / "hta-venv"


def _hta_version(python: Path) -> str | None:
    from collscope import proc

    if not python.exists():
        return None
    done = proc.run([str(python), "-c", "import importlib.metadata as m; import hta; "
                     "print(m.version('HolisticTraceAnalysis'))"], timeout_s=120)
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else None


def install_hta(venv: Path) -> bool:
    from collscope import proc

    print(f"installing {HTA_PACKAGE} into {venv} ...", file=sys.stderr)
    for argv in ([sys.executable, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", HTA_PACKAGE]):
        done = proc.run(argv, timeout_s=1800)
        if done.returncode != 0:
            tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-3:]
            print(f"installation failed: {' '.join(argv)} exited {done.returncode}: {' | '.join(tail)}")
            return False
    return True


def _set_name(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".json")


def _is_trace_name(path: Path) -> bool:
    return path.is_file() and (path.name.endswith(".json") or path.name.endswith(".json.gz"))


def trace_sets(paths: Sequence[str]) -> list[tuple[str, list[str]]] | str:
    """(name, files) per set: each path given is one set (a file, or the ``.json`` / ``.json.gz`` files of a
    directory: HTA reads nothing else); none given: each corpus trace on its own. A string says why nothing can
    run."""
    if not paths:
        corpus = Path(os.environ.get("COLLSCOPE_CORPUS", ROOT.parent / "shared" / "corpus")) / "traces"
        files = sorted(p for p in corpus.iterdir() if _is_trace_name(p)) if corpus.is_dir() else []
        if not files:
            return f"no traces in {corpus} (the shared corpus is absent; set COLLSCOPE_CORPUS or name trace paths)"
        return [(_set_name(p), [str(p)]) for p in files]
    sets = []
    for raw in paths:
        path = Path(raw)
        files = sorted(p for p in path.iterdir() if _is_trace_name(p)) if path.is_dir() else [path]
        if not path.exists() or not files:
            return f"{raw} does not exist" if not path.exists() else f"no .json or .json.gz files in {raw}"
        sets.append((_set_name(path), [str(p) for p in files]))
    return sets


def _run_tool(python: str, flag: str, files: Sequence[str], extra_env: Mapping[str, str]) -> ToolRun:
    from collscope import proc

    done = proc.run([python, str(Path(__file__).resolve()), flag, *files], timeout_s=TOOL_TIMEOUT_S, cwd=ROOT,
                    extra_env=extra_env)
    figures = child_figures(done.stdout) if done.returncode == 0 else None
    if figures is None:
        why = "timed out" if done.timed_out else f"exited {done.returncode}"
        tail = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or [""]
        return ToolRun({}, done.duration_s, None, None, error=f"{why}: {tail[0][:200]}")
    if flag == "--hta-child":
        return ToolRun(hta_figures(figures), done.duration_s, figures["analysis_s"], figures["peak_mb"],
                       late=figures.get("late"))
    outside = {int(k): int(v) for k, v in figures["outside"].items()}
    return ToolRun(collscope_figures(figures["doc"], outside), done.duration_s, figures["analysis_s"],
                   figures["peak_mb"], late=collscope_late(figures["doc"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", metavar="PATH", help="trace sets (a file, or a directory of rank "
                                                                 "files); default: each corpus trace")
    parser.add_argument("--hta-venv", default=None, metavar="DIR",
                        help="HTA's virtual environment (default $COLLSCOPE_HTA_VENV, else ~/.cache/collscope/"
                             "hta-venv)")
    parser.add_argument("--install-hta", action="store_true", help=f"create the environment: {HTA_PACKAGE}")
    parser.add_argument("--json", action="store_true", help="one JSON object per trace set instead of the table")
    parser.add_argument("--collscope-child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--hta-child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.collscope_child:
        collscope_child(args.collscope_child)
        return 0
    if args.hta_child:
        hta_child(args.hta_child)
        return 0

    sets = trace_sets(args.paths)
    if isinstance(sets, str):
        print(f"not run: {sets}")
        return 0
    venv = hta_venv(args.hta_venv)
    python = venv / "bin" / "python"
    if args.install_hta and _hta_version(python) is None and not install_hta(venv):
        return 1
    version = _hta_version(python)
    if version is None:
        print(f"not run: HTA is not installed in {venv} (run with --install-hta, or point --hta-venv / "
              f"COLLSCOPE_HTA_VENV at a virtual environment that has {HTA_PACKAGE.split('==')[0]})")
        return 0
    rows: list[Row] = []
    notes: list[str] = []
    for name, files in sets:
        cs = _run_tool(sys.executable, "--collscope-child", files, {"PYTHONPATH": str(ROOT)})
        hta = _run_tool(str(python), "--hta-child", files, {})
        if args.json:
            print(json.dumps({"trace": name, "collscope": asdict(cs), "hta": asdict(hta)}))
            continue
        rows += side_by_side(name, cs, hta)
        notes += render_notes(name, cs, hta)
    if not args.json:
        print(f"collscope (this checkout) vs HTA {version} ({python}), {len(sets)} trace set(s)\n")
        print(render_table(rows))
        print()
        print("\n".join(f"- {n}" for n in notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
