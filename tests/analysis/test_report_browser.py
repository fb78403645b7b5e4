"""The HTML report in a real browser: headless Chromium loads report/index.html offline, every image decodes,
and the page logs no console error. The screenshot is kept next to the report for a human to look at."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.samples import sample_path
from tests.conftest import chromium, headless

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
_PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = Array.from(document.images);
  document.title = 'PROBE ' + JSON.stringify(imgs.map(i => [i.alt, i.complete && i.naturalWidth > 0,
                                                           i.naturalWidth, i.naturalHeight]));
});
</script>"""


def test_report_renders_in_chromium_with_every_image_and_no_console_error(tmp_path: Path) -> None:
    browser = chromium()
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["report", str(EXAMPLE), "--out", str(out), "--topo", str(sample_path())])
    assert result.exit_code == 0, result.output
    page = out / "index.html"
    html = page.read_text()
    assert html.count("<img") >= 3  # busbw curve and heatmap per op, the topology

    probed = out / "probe.html"  # the same page plus a script that reports on its images in the title
    probed.write_text(html.replace("</body>", _PROBE + "</body>") if "</body>" in html else html + _PROBE)
    dom = headless(browser, "--dump-dom", probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"<title>PROBE (.*?)</title>", dom.stdout, re.S)
    assert m, f"the probe did not run; DOM head: {dom.stdout[:500]}"
    images = json.loads(m.group(1).replace("&quot;", '"'))
    assert len(images) == html.count("<img")
    broken = [alt for alt, ok, width, height in images if not (ok and width > 100 and height > 100)]
    assert not broken, f"images that did not load: {broken}"

    shot = out / "screenshot.png"
    rendered = headless(browser, f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    assert rendered.returncode == 0 and shot.stat().st_size > 10_000, rendered.stderr[-2000:]
    # The report has no script of its own and the probe logs nothing: any console message (Chromium prints
    # them as INFO:CONSOLE lines without their level) is a problem, as is a resource that failed to load.
    errors = [line for line in (dom.stderr + rendered.stderr).splitlines()
              if ":CONSOLE" in line or "Failed to load resource" in line]
    assert not errors, "console messages:\n" + "\n".join(errors)
    keep = os.environ.get("COLLSCOPE_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
