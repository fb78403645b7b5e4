"""bench/hta_crosscheck.py's pure parts, without HTA: each tool's figures from its output, the side-by-side table,
and the "not run" answers when the corpus or HTA's environment is absent (HTA itself is never needed here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces
from tests.traces.trace_fixtures import nccl_kernel_metadata, write

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "hta_crosscheck.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hta_crosscheck_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


xc = _load()

# A trace --json document of one rank, 3 steps (HTA keeps 4-5: it leaves the last one out), 5 calls.
DOC = {
    "steps": [{"rank": 0, "step": 4, "duration_us": 200_000.0, "comm_us": 10_000.0, "exposed_comm_us": 8_000.0},
              {"rank": 0, "step": 5, "duration_us": 210_000.0, "comm_us": 10_000.0, "exposed_comm_us": 9_000.0},
              {"rank": 0, "step": 6, "duration_us": 230_000.0, "comm_us": 20_000.0, "exposed_comm_us": 20_000.0}],
    "collectives": [{"rank": 0, "step": 4}, {"rank": 0, "step": 4}, {"rank": 0, "step": 5}, {"rank": 0, "step": 5},
                    {"rank": 0, "step": 6}],
    "late_ranks": [],
}
# What the HTA child prints for the same rank (figures from HTA's DataFrames; its overlap rounded to 2 places).
HTA = {"ranks": {"0": {"iterations": [4, 5], "comm_kernels": 4, "comm_us": 19_990.0, "overlap_pct": 14.31,
                       "step_us": [199_000.0, 209_000.0]}},
       "late": "get_potential_stragglers failed: ValueError: Encountered all NA values",
       "analysis_s": 2.0, "peak_mb": 146.0}


def test_collscope_figures_per_rank_and_on_htas_steps():
    fig = xc.collscope_figures(DOC, {0: 3})[0]
    assert fig.steps == (4, 5, 6) and fig.comm_kernels == 5 and fig.outside_window_kernels == 3
    assert fig.comm_us == 40_000.0 and fig.step_us_median == 210_000.0
    assert fig.overlap_pct == pytest.approx(100 * (1 - 37_000 / 40_000))  # 7.5
    calls, comm_us, pct = xc.on_steps(fig, [4, 5])
    assert (calls, comm_us) == (4, 20_000.0) and pct == pytest.approx(15.0)
    assert xc.collscope_late(DOC) == "no calls matched across ranks"
    assert xc.collscope_late({}) is None


def test_the_late_rank_line_names_the_first_row():
    doc = {"late_ranks": [{"rank": 1, "last_count": 3, "matched_calls": 18, "others_waited_us": 612_000.0},
                          {"rank": 0, "last_count": 15, "matched_calls": 18, "others_waited_us": 9_000.0}]}
    assert xc.collscope_late(doc) == "rank 1 last at 3 of 18 matched calls, others waited 612 ms for it"
    doc["late_ranks"][0]["others_waited_us"] = 0.0
    assert xc.collscope_late(doc) == "no rank waited for"


def test_hta_figures_and_a_nan_overlap():
    fig = xc.hta_figures(HTA)[0]
    assert fig.steps == (4, 5) and fig.comm_kernels == 4 and fig.comm_us == 19_990.0
    assert fig.overlap_pct == 14.31 and fig.step_us_median == 204_000.0
    cpu_only = {"ranks": {"34": {"iterations": [551], "comm_kernels": 0, "comm_us": 0.0, "overlap_pct": float("nan"),
                                 "step_us": []}}}
    fig = xc.hta_figures(cpu_only)[34]
    assert fig.overlap_pct is None and fig.step_us_median is None


def test_side_by_side_table():
    cs = xc.ToolRun(xc.collscope_figures(DOC, {0: 0}), wall_s=0.46, analysis_s=0.18, peak_mb=52.5,
                    late=xc.collscope_late(DOC))
    hta = xc.ToolRun(xc.hta_figures(HTA), wall_s=4.3, analysis_s=2.0, peak_mb=146.0, late=HTA["late"])
    (row,) = xc.side_by_side("a100-rank0", cs, hta)
    assert row.rank == 0
    assert row.cells == ("4-6 / 4-5", "5 / 4 / 4", "40 / 20 / 19.99", "7.50 / 15.00 / 14.31", "210 / 204",
                         "0.46 / 4.3", "0.18 / 2", "52.5 / 146")
    table = xc.render_table([row]).splitlines()
    assert table[0].count("|") == len(xc.COLUMNS) + 1 and table[1] == "|" + "---|" * len(xc.COLUMNS)
    assert table[2] == "| `a100-rank0` | 0 | " + " | ".join(row.cells) + " |"
    notes = xc.render_notes("a100-rank0", cs, hta)
    assert notes == ["`a100-rank0`: late rank: collscope no calls matched across ranks; HTA " + HTA["late"]]


def test_a_tool_that_failed_shows_in_its_cells_and_notes():
    cs = xc.ToolRun(xc.collscope_figures(DOC), wall_s=0.5, analysis_s=0.2, peak_mb=50.0)
    hta = xc.ToolRun({}, wall_s=1.2, analysis_s=None, peak_mb=None, error="exited 1: IndexError: out-of-bounds")
    (row,) = xc.side_by_side("t", cs, hta)
    assert row.cells[0] == "4-6 / failed" and row.cells[1] == "5 / - / failed" and row.cells[-1] == "50 / -"
    assert xc.render_notes("t", cs, hta)[-1] == "`t`: HTA failed: exited 1: IndexError: out-of-bounds"
    both = xc.side_by_side("t", xc.ToolRun({}, 0.1, None, None, error="x"), hta)
    assert [r.rank for r in both] == [-1] and both[0].cells[0] == "failed / failed"
    assert "| `t` | - | failed / failed |" in xc.render_table(both)


def test_the_figures_line_is_found_among_log_lines():
    out = ("Parsed rank0.json.gz time = 0.50 seconds\n" + xc.MARK + json.dumps({"n": 1}) + "\n"
           "leaving parse_traces duration=2.65 seconds\n")
    assert xc.child_figures(out) == {"n": 1}
    assert xc.child_figures("Traceback (most recent call last):\n") is None


def test_figures_of_a_real_collscope_report(tmp_path):
    """On a report collscope really makes (two ranks of a Kineto trace in the real shape), the figures are the
    document's own: every call counted, the overlap 1 - exposed / communication over the steps."""
    paths = [write(tmp_path / f"rank{r}.json", nccl_kernel_metadata(r, delay_us=300.0)) for r in (0, 1)]
    traces = read_traces([str(p) for p in paths])
    doc = analyze_traces(traces).to_dict()
    figs = xc.collscope_figures(doc, {t.rank: t.outside_window_kernels for t in traces})
    assert sorted(figs) == [0, 1]
    for rank, fig in figs.items():
        mine = [s for s in doc["steps"] if s["rank"] == rank]
        assert fig.steps == tuple(sorted(s["step"] for s in mine)) and len(fig.steps) == 2
        assert fig.comm_kernels == sum(c["rank"] == rank for c in doc["collectives"]) > 0
        comm = sum(s["comm_us"] for s in mine)
        assert fig.comm_us == pytest.approx(comm) and comm > 0
        assert fig.overlap_pct == pytest.approx(100 * (1 - sum(s["exposed_comm_us"] for s in mine) / comm))


def test_not_run_without_the_corpus_or_htas_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COLLSCOPE_CORPUS", str(tmp_path / "no-corpus"))
    monkeypatch.setattr(sys, "argv", ["hta_crosscheck.py"])
    assert xc.main() == 0
    assert capsys.readouterr().out.startswith(f"not run: no traces in {tmp_path / 'no-corpus' / 'traces'}")
    trace = write(tmp_path / "rank0.json", nccl_kernel_metadata(0))
    monkeypatch.setattr(sys, "argv", ["hta_crosscheck.py", str(trace), "--hta-venv", str(tmp_path / "no-venv")])
    assert xc.main() == 0
    assert capsys.readouterr().out.startswith(f"not run: HTA is not installed in {tmp_path / 'no-venv'} (run with "
                                              "--install-hta")
    monkeypatch.setattr(sys, "argv", ["hta_crosscheck.py", str(tmp_path / "missing.json")])
    assert xc.main() == 0
    assert capsys.readouterr().out == f"not run: {tmp_path / 'missing.json'} does not exist\n"


def test_trace_sets_of_a_directory_and_of_files(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    for name in ("rank1.json.gz", "rank0.json", "notes.txt"):
        (job / name).write_text("{}")
    (job / "sub.json").mkdir()
    single = write(tmp_path / "one.json", nccl_kernel_metadata(0))
    assert xc.trace_sets([str(job), str(single)]) == [("job", [str(job / "rank0.json"), str(job / "rank1.json.gz")]),
                                                      ("one", [str(single)])]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert xc.trace_sets([str(empty)]) == f"no .json or .json.gz files in {empty}"
