"""``collscope trace --report DIR``: a per-step timeline (exposed communication in its own colour) and busbw per
call against the sweep, in a page headless Chromium renders with every image."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.traces.load import read_traces
from collscope.traces.report import analyze_traces
from tests.conftest import chromium, headless
from tests.traces import trace_fixtures as fx

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "results" / "mpi-algos-2rank"


def test_report_has_timeline_busbw_and_the_summary(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    for r in (0, 1):
        fx.write(tmp_path / "traces" / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    out = tmp_path / "report"
    res = CliRunner().invoke(main, ["trace", str(tmp_path / "traces"), "--report", str(out), "--against",
                                    str(EXAMPLE)])
    assert res.exit_code == 0, res.output
    page = (out / "index.html").read_text()
    assert page.count("<img src='data:image/png;base64,") == 2 and "<script" not in page
    assert (out / "timeline.png").stat().st_size > 5000 and (out / "busbw.png").stat().st_size > 5000
    report = analyze_traces(read_traces([tmp_path / "traces"]))
    assert len(re.findall(r"<tr><td>", page)) == len(report.summary) > 0
    assert "rank 0 step" not in page  # the step labels live in the figure, not as text


def test_report_renders_in_chromium(tmp_path: Path) -> None:
    browser = chromium()
    from tests.analysis.test_report_browser import _PROBE

    (tmp_path / "traces").mkdir()
    for r in (0, 1):
        fx.write(tmp_path / "traces" / f"rank{r}.json", fx.nccl_kernel_metadata(r, delay_us=250))
    out = tmp_path / "report"
    assert CliRunner().invoke(main, ["trace", str(tmp_path / "traces"), "--report", str(out)]).exit_code == 0
    probed = out / "probe.html"
    probed.write_text((out / "index.html").read_text().replace("</body>", _PROBE + "</body>"))
    dom = headless(browser, "--dump-dom", probed.as_uri())
    found = re.search(r"<title>PROBE (.*?)</title>", dom.stdout, re.S)
    assert found, dom.stderr[-1000:]
    images = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(images) == 2 and all(ok and w > 100 and h > 100 for _, ok, w, h in images)
    assert not [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
