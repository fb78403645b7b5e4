"""The report a person reads (issue 26 item 8), in headless Chromium and in the library.

Chromium lays out two reports at a 1280 px window and a script reads the DOM: the recommendation box must not
overflow (scrollWidth > clientWidth: text hidden behind a scroll bar), no section may render empty, the page
must not scroll sideways, images must load and the topology drawing must be shown at the page's width; a
report without a default says "no baseline" in one line per collective instead of a blank heatmap area, and
a GPU-less capture is a table, not an empty canvas. Screenshots are kept in ``tmp_path`` (and copied to
``$COLLSCOPE_KEEP_LAYOUT_SHOTS`` when set) for a human to look at.

Without Chromium: the topology drawing's labels do not overlap, sit inside their boxes and are at least 9 px
high at the page's width; spread anomalies are grouped with the worst shown; the report counts configurations
as ``analyze`` does.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.topo.samples import sample_path
from tests.conftest import chromium, headless

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "results" / "mpi-algos-2rank"
GPU_RESULT = ROOT / "tests" / "analysis" / "fixtures" / "all_reduce_perf-b300-4x8-nvlstree-2035-shape.txt"
NO_GPU_CAPTURE = ROOT / "tests" / "fixtures" / "infiniband" / "ibstat-tabs-vpi-dualport-roce.txt"
PAGE_PX = 1100
"""The report's page width (its CSS max-width): images wider than this are shown scaled down to it."""
MIN_LABEL_PX = 9.0

_PROBE = """<script>
window.addEventListener('load', () => {
  const root = document.documentElement;
  const pre = document.querySelector('section.recommendation pre') || document.querySelector('pre');
  // a section: an h2 and what follows it up to the next heading of its level (inside a <section> or not)
  const sections = Array.from(document.querySelectorAll('h2')).map(h => {
    const content = [];
    for (let c = h.nextElementSibling; c && !/^H[12]$/.test(c.tagName); c = c.nextElementSibling) content.push(c);
    const shown = content.filter(c => !/^H[3-6]$/.test(c.tagName) && c.getBoundingClientRect().height > 0 &&
      (c.tagName === 'IMG' ? c.naturalWidth > 0 : c.innerText.trim().length > 0));
    return [h.innerText.trim(), shown.length];
  });
  const imgs = Array.from(document.images).map(i => [i.alt, i.naturalWidth, i.clientWidth, i.clientHeight]);
  const lines = Array.from(document.querySelectorAll('.no-baseline')).map(p => {
    const style = getComputedStyle(p);
    return [p.innerText, Math.round(p.getBoundingClientRect().height), parseFloat(style.lineHeight) ||
            1.2 * parseFloat(style.fontSize)];
  });
  document.title = 'PROBE ' + JSON.stringify({
    pre: pre ? [pre.scrollWidth, pre.clientWidth] : null, page: [root.scrollWidth, root.clientWidth],
    sections: sections, imgs: imgs, noBaseline: lines});
});
</script>"""


def _report(out: Path, *args: str) -> Path:
    result = CliRunner().invoke(main, ["report", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "index.html"


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's kind of report: a 2-rank Open MPI sweep (two collectives) and the bundled 8-GPU sample."""
    return _report(tmp_path_factory.mktemp("demo") / "report", str(EXAMPLE), "--topo", str(sample_path()))


@pytest.fixture(scope="module")
def baseline_less_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No default measured (two forced all_reduce algorithms only) and a capture of a node without GPUs."""
    base = tmp_path_factory.mktemp("nodefault")
    records = base / "forced.jsonl"
    points = sorted(EXAMPLE.glob("points/all-reduce-allralgo[13]-*.jsonl"))
    assert len(points) == 6
    records.write_text("".join(p.read_text() for p in points))
    return _report(base / "report", str(records), "--topo", str(NO_GPU_CAPTURE))


def _probe(page: Path, shot_name: str) -> dict[str, Any]:
    """The probe's findings for ``page`` laid out at 1280 px, and a screenshot of it."""
    browser = chromium()
    probed = page.with_name("probe.html")
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    dom = headless(browser, "--window-size=1280,2400", "--dump-dom", probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"<title>PROBE (.*?)</title>", dom.stdout, re.S)
    assert m, f"the probe did not run; DOM head: {dom.stdout[:500]}"
    shot = page.with_name(shot_name)
    rendered = headless(browser, f"--screenshot={shot}", "--window-size=1280,5000", page.as_uri())
    assert rendered.returncode == 0 and shot.stat().st_size > 10_000, rendered.stderr[-2000:]
    keep = os.environ.get("COLLSCOPE_KEEP_LAYOUT_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot_name)
    found: dict[str, Any] = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return found


def _assert_readable(found: dict[str, Any]) -> None:
    scroll, client = found["pre"]
    assert scroll <= client, f"the recommendation overflows its box ({scroll} > {client} px): it must wrap"
    assert found["page"][0] <= found["page"][1], f"the page scrolls sideways: {found['page']}"
    empty = [name for name, shown in found["sections"] if not shown]
    assert not empty, f"sections that render empty: {empty}"
    broken = [alt for alt, natural, width, height in found["imgs"] if not (natural > 100 and width > 100)]
    assert not broken, f"images that did not load: {broken}"


def test_the_probe_sees_an_overflowing_box_and_an_empty_section(tmp_path: Path) -> None:
    """The checks can fail: a page with an unwrapped long line in a <pre> and a heading with nothing under it."""
    page = tmp_path / "bad.html"
    page.write_text("<!doctype html><html><head><style>body { max-width: 600px; } pre { overflow-x: auto; }</style>"
                    "</head><body><h2>Recommendation</h2><pre>" + "# a long comment line " * 20 + "</pre>"
                    "<h2>Topology</h2><div></div><h2>Anomalies</h2><p>none</p></body></html>")
    found = _probe(page, "probe-self-test.png")
    assert found["pre"][0] > found["pre"][1]
    assert [name for name, shown in found["sections"] if not shown] == ["Topology"]
    with pytest.raises(AssertionError, match="overflows its box"):
        _assert_readable(found)


def test_demo_report_wraps_the_recommendation_and_fills_every_section(demo_report: Path) -> None:
    found = _probe(demo_report, "demo-report.png")
    _assert_readable(found)
    assert [name for name, _ in found["sections"]] == ["Recommendation", "all_gather", "all_reduce",
                                                       "Against the model", "Topology", "Anomalies",
                                                       "How to read this"]
    topo = [(natural, width) for alt, natural, width, _ in found["imgs"] if alt == "topology"]
    assert len(topo) == 1 and topo[0][1] >= min(topo[0][0], PAGE_PX) - 2, \
        f"the topology drawing is not shown at the page's width: {topo}"
    assert found["noBaseline"] == []


def test_a_gpu_report_with_its_efficiency_table_fits_the_page(tmp_path: Path) -> None:
    """Eleven columns of verdicts (32 B300 ranks on 4 hosts, the GPU read from the rank lines) wrap inside the
    page instead of making it scroll sideways."""
    page = _report(tmp_path / "gpu", str(GPU_RESULT), "--nic-gbit", "800")
    found = _probe(page, "gpu-report.png")
    _assert_readable(found)
    assert "Against the model" in [name for name, _ in found["sections"]]


def test_without_a_default_each_collective_says_no_baseline_in_one_line(baseline_less_report: Path) -> None:
    found = _probe(baseline_less_report, "no-baseline-report.png")
    _assert_readable(found)
    assert len(found["noBaseline"]) == 1  # one collective (all_reduce), one line
    text, height, line_px = found["noBaseline"][0]
    assert text.startswith("no baseline:") and height <= 2 * line_px + 1, found["noBaseline"]
    assert not [alt for alt, *_ in found["imgs"] if alt in ("heatmap", "topology")]  # no blank heatmap or canvas


def test_a_gpu_less_node_is_a_table_of_its_nics(baseline_less_report: Path) -> None:
    page = baseline_less_report.read_text()
    assert not baseline_less_report.with_name("topology.png").exists()
    topo = page[page.index("<section class='topology'>"):]
    topo = topo[:topo.index("</section>")]
    assert "no GPU in" in topo and all(f"<td>{nic}</td>" in topo for nic in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_10"))
    md = baseline_less_report.with_name("report.md").read_text()
    assert "| mlx5\\_1 |" in md and "![topology]" not in md and "![heatmap]" not in md
    assert md.count("no baseline: the default of all\\_reduce") == 1


def test_topology_labels_are_legible_at_page_width_and_do_not_overlap() -> None:
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch
    from matplotlib.text import Text

    from collscope.topo.draw import draw_figure
    from collscope.topo.load import load_one_node

    fig = draw_figure(load_one_node([str(sample_path())]))
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        labels = [t for t in fig.axes[0].texts if str(t.get_gid() or "").startswith("label:")]
        assert len(labels) >= 8 + 12  # every GPU and NIC of the sample has its label
        scale = min(1.0, PAGE_PX / (fig.get_size_inches()[0] * fig.dpi))
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
        small = [t.get_text() for t in texts if t.get_fontsize() * fig.dpi / 72 * scale < MIN_LABEL_PX]
        assert not small, f"text below {MIN_LABEL_PX} px at {PAGE_PX} px page width: {small[:5]}"
        extents = {t.get_gid(): t.get_window_extent(renderer) for t in labels}
        overlapping = [(a, b) for (a, ea), (b, eb) in itertools.combinations(extents.items(), 2) if ea.overlaps(eb)]
        assert not overlapping, overlapping
        boxes = [p.get_window_extent(renderer) for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]
        outside = [gid for gid, e in extents.items()
                   if not any(b.x0 <= e.x0 and e.x1 <= b.x1 and b.y0 <= e.y0 and e.y1 <= b.y1 for b in boxes)]
        assert not outside, f"labels wider than their boxes: {outside}"
    finally:
        plt.close(fig)


def test_spread_anomalies_are_grouped_with_the_worst_shown(demo_report: Path) -> None:
    page = demo_report.read_text()
    anomalies = page[page.index("<section class=\"anomalies\">"):]
    rows = re.findall(r"<tr><td>(\w+)</td>", anomalies)
    assert 0 < rows.count("spread") <= 5, rows
    m = re.search(r"(\d+) more spread group\(s\) \((\d+) size\(s\), spread up to (\d+)%\) not shown", anomalies)
    assert m, "the spread groups left out are not counted"
    shown = [int(p) for p in re.findall(r"worst at \w+: run-to-run spread (\d+)%", anomalies)]
    assert shown == sorted(shown, reverse=True) and min(shown) >= int(m.group(3)), (shown, m.group(0))


def test_report_counts_configurations_as_analyze_does(demo_report: Path) -> None:
    analyzed = CliRunner().invoke(main, ["analyze", str(EXAMPLE)])
    assert analyzed.exit_code == 0, analyzed.output
    said = re.search(r"(\d+) records, (\d+) configuration\(s\)", analyzed.output)
    reported = re.search(r"(\d+) records, (\d+) configuration\(s\)", demo_report.read_text())
    md = re.search(r"(\d+) records, (\d+) configuration\(s\)", demo_report.with_name("report.md").read_text())
    assert said and reported and md
    assert reported.groups() == said.groups() == md.groups() == ("540", "9")


def test_a_configuration_at_two_rank_counts_is_two_lines_each_against_its_own_default() -> None:
    """Rows that differ in what else names a configuration (ranks here; an input, a backend) never pool into one
    line, and each heatmap row is divided by the default of its own group."""
    import matplotlib.pyplot as plt
    import numpy as np

    from collscope.analysis.fit import aggregate
    from collscope.analysis.plots import busbw_vs_size, gain_heatmap
    from tests.analysis.recommend_frames import cell_rows, frame

    sizes = [1 << 20, 4 << 20, 16 << 20]
    ring = {"NCCL_ALGO": "Ring"}
    agg = aggregate(frame(cell_rows(sizes=sizes, busbw=10.0, nranks=8), cell_rows(knobs=ring, sizes=sizes, busbw=13.5,
                                                                                   nranks=8),
                          cell_rows(sizes=sizes, busbw=5.0, nranks=16), cell_rows(knobs=ring, sizes=sizes, busbw=4.5,
                                                                                   nranks=16)))
    curves = busbw_vs_size(agg, "all_reduce")
    heat = gain_heatmap(agg, "all_reduce")
    try:
        labels = sorted(t.get_text() for t in curves.axes[0].get_legend().get_texts())
        assert labels == ["ALGO=Ring [16r]", "ALGO=Ring [8r]", "default (nothing forced) [16r]",
                          "default (nothing forced) [8r]"]
        rows = [t.get_text() for t in heat.axes[0].get_yticklabels()]
        ratios = dict(zip(rows, np.asarray(heat.axes[0].images[0].get_array()).mean(axis=1), strict=True))
        assert ratios == pytest.approx({"ALGO=Ring [16r]": 0.9, "ALGO=Ring [8r]": 1.35, "default [16r]": 1.0,
                                        "default [8r]": 1.0})
    finally:
        plt.close(curves)
        plt.close(heat)
