"""observe report (issue 27 item 5): one self-contained page with the changes and outliers ``observe changes``
finds and one trend figure per series, changes marked; headless Chromium renders it with every figure."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.observe import ingest
from collscope.observe.changes import Change
from collscope.observe.plots import Trend, daily_medians, representative_sizes, trend_figure
from collscope.observe.report import write_observe_report
from collscope.observe.series import changes_report
from tests.conftest import chromium, headless
from tests.observe.history import BAD_NIGHT, PLANTED, PLANTED_NIGHT, QUIET, night_time, write_history

NOW = night_time(PLANTED.nights)
_PROBE = """<script>
window.addEventListener('load', () => {
  const rows = sel => document.querySelectorAll(sel + ' table tbody tr').length;
  document.title = 'PROBE ' + JSON.stringify({
    images: Array.from(document.images).map(i => [i.alt, i.complete && i.naturalWidth > 0, i.naturalWidth,
                                                   i.naturalHeight]),
    changes: rows('section.changes'), outliers: rows('section.outliers'),
    series: document.querySelectorAll('section.series').length,
    coincide: Array.from(document.querySelectorAll('section.changes td')).map(td => td.textContent)
      .filter(t => t.includes(' -> '))});
});
</script>"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 nights of two clusters: alpha with -10% at 64 MiB..1 GiB from night 35 (NCCL 2.28.9 -> 2.29.2), beta
    with a harmless upgrade and one bad night (tests/observe/history.py)."""
    root = tmp_path_factory.mktemp("history")
    report = ingest(write_history(root / "nights", [PLANTED, QUIET]), root / "store")
    assert not report.problems, report.problems
    return root / "store"


def test_the_page_has_the_changes_the_outliers_and_a_figure_per_series(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["observe", "report", "--store", str(store), "--out", str(out), "--since",
                                       "all"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"wrote {out / 'index.html'}"
    page = (out / "index.html").read_text()
    found = changes_report(store)
    assert [c.cluster for c in found.changes] == ["alpha"] and [o.cluster for o in found.outliers] == ["beta"]
    assert page.count("<img src='data:image/png;base64,") == 2 and "<script" not in page  # self-contained
    assert sorted(p.name for p in out.glob("*.png")) == ["trend-000.png", "trend-001.png"]
    changes = re.search(r"<section class=\"changes\">.*?</section>", page, re.S)
    assert changes is not None
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", changes.group(0), re.S)
    assert len(rows) == 1
    cells = rows[0].split("</td><td>")
    c = found.changes[0]
    assert cells[0] == c.at.strftime("%Y-%m-%d %H:%M") and abs(c.at - night_time(PLANTED_NIGHT)) <= timedelta(days=2)
    assert cells[1] == "alpha: all_reduce, 16 ranks, 2 nodes, float, default"
    assert cells[2].startswith("64M..") and cells[5] == f"{c.change_pct:+.1f}%" and -13 < c.change_pct < -7
    assert cells[8] == "nccl_version 2.28.9 -&gt; 2.29.2"
    outliers = re.search(r"<section class=\"outliers\">.*?</section>", page, re.S)
    assert outliers is not None and outliers.group(0).count("<tr><td>") == 1
    assert night_time(BAD_NIGHT).strftime("%Y-%m-%d %H:%M") in outliers.group(0)
    # the series with a change or an outlier first: alpha's (its change), then beta's (its outlier)
    titles = re.findall(r"<section class='series'><h3>(.*?)</h3>", page)
    assert titles == ["alpha: all_reduce, 16 ranks, 2 nodes, float, default",
                      "beta: all_reduce, 16 ranks, 2 nodes, float, default"]


def test_the_page_renders_in_chromium_with_every_figure(store: Path, tmp_path: Path) -> None:
    browser = chromium()
    out = tmp_path / "report"
    index = write_observe_report(store, out, now=NOW)
    probed = out / "probe.html"
    probed.write_text(index.read_text().replace("</body>", _PROBE + "</body>"))
    dom = headless(browser, "--dump-dom", probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"<title>PROBE (.*?)</title>", dom.stdout, re.S)
    assert m, f"the probe did not run; DOM head: {dom.stdout[:500]}"
    seen = json.loads(m.group(1).replace("&quot;", '"').replace("&gt;", ">").replace("&amp;", "&"))
    assert seen["series"] == 2 and seen["changes"] == 1 and seen["outliers"] == 1
    assert seen["coincide"] == ["nccl_version 2.28.9 -> 2.29.2"]
    broken = [alt for alt, ok, width, height in seen["images"] if not (ok and width > 500 and height > 200)]
    assert len(seen["images"]) == 2 and not broken, seen["images"]
    errors = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line or "Failed to load resource" in line]
    assert not errors, "console messages:\n" + "\n".join(errors)


def test_cluster_since_and_an_empty_selection(store: Path, tmp_path: Path) -> None:
    index = write_observe_report(store, tmp_path / "beta", cluster="beta", now=NOW)
    page = index.read_text()
    assert page.count("<section class='series'>") == 1 and "alpha:" not in page
    assert "<section class=\"changes\"><h2>Changes</h2><p>none</p>" in page
    # changes since night 50: alpha's is older, so none is listed; the figures still start at the baseline
    index = write_observe_report(store, tmp_path / "late", since=night_time(50), now=NOW)
    assert "<section class=\"changes\"><h2>Changes</h2><p>none</p>" in index.read_text()
    assert index.read_text().count("<section class='series'>") == 2
    result = CliRunner().invoke(main, ["observe", "report", "--store", str(store), "--out", str(tmp_path / "x"),
                                       "--cluster", "nowhere"])
    assert result.exit_code == 2 and "no record of cluster 'nowhere' with a busbw" in result.output
    assert not (tmp_path / "x").exists()
    result = CliRunner().invoke(main, ["observe", "report", "--store", str(store), "--out", str(tmp_path / "y"),
                                       "--since", "yesterday"])
    assert result.exit_code == 2 and "--since 'yesterday' is invalid" in result.output


def test_representative_sizes_keep_the_changed_size_and_the_ends() -> None:
    counts = {1 << k: 10 for k in range(16, 33)} | {1 << 40: 2}  # 1 TiB in 2 of 10 runs: not a common size
    assert representative_sizes(counts, 10) == [1 << 16, 1 << 24, 1 << 32]
    change = Change(cluster="a", op="all_reduce", nranks=16, nnodes=2, settings="default", dtype="float",
                    size_min_bytes=64 << 20, size_max_bytes=1 << 30, at=NOW, before_busbw_gbps=1.0,
                    after_busbw_gbps=0.9, change_pct=-10.0, ci_low_pct=-11.0, ci_high_pct=-9.0, coincides_with={},
                    kind="regression", representative_size_bytes=256 << 20)
    assert representative_sizes(counts, 10, [change]) == [1 << 16, 1 << 24, 256 << 20, 1 << 32]
    assert representative_sizes(counts, 10, [change], limit=2) == [1 << 16, 256 << 20]


def test_runs_of_one_day_draw_as_dots_and_the_days_median() -> None:
    base = np.datetime64("2026-11-01T02:00:00", "us")
    times = base + np.array([0, 3600, 7200, 86_400, 90_000], dtype="timedelta64[s]").astype("timedelta64[us]")
    days, medians = daily_medians(times, np.array([10.0, 30.0, 20.0, 5.0, 7.0]))
    assert list(medians) == [20.0, 6.0]
    assert list(days) == [base + np.timedelta64(3600, "s"), base + np.timedelta64(86_400 + 1800, "s")]
    one_a_day = base + np.array([0, 1, 2], dtype="timedelta64[D]")
    assert len(daily_medians(one_a_day, np.ones(3))[0]) == 3
    fig = trend_figure(Trend("t", {1 << 20: (times, np.array([10.0, 30.0, 20.0, 5.0, 7.0]))}))
    lines = fig.axes[0].get_lines()
    assert [np.size(line.get_xdata()) for line in lines] == [5, 2]  # the runs as dots, the line through 2 days
