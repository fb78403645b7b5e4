"""The canary's HTML report: written, self-contained (no external src/href), holding the decision, the ranges, the
bands and the why; and rendered by headless Chromium offline with every image decoded and no console message."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from collscope.canary.compare_results import judge_results, results_frame
from collscope.canary.report import write_canary_report
from collscope.canary.report_plot import PERCENTILE_FROM_BLOCKS, band_name, side_curves
from collscope.canary.why import ChoiceChange, Why
from collscope.errors import ConfigError
from tests.analysis.test_report_browser import _PROBE  # the page's image check, as the report test does it
from tests.conftest import chromium, headless

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "canary_results"
A, B = FIXTURES / "srun-three-runs-a.txt", FIXTURES / "srun-three-runs-b.txt"
LABELS = {"A": "NCCL 2.27.3", "B": "NCCL 2.28.9 <candidate>"}
WHY = Why(changes=(ChoiceChange(op="all_reduce", min_bytes=64 << 20, max_bytes=1 << 30, a_choice="NVLSTree/Simple",
                                b_choice="Ring/LL128", source="NCCL TUNING log lines"),),
          statements=("B is slower at 64M-1G because NCCL now picks Ring/LL128 instead of NVLSTree/Simple",),
          tuner_rules=(), tuner_csv="allreduce,67108864,1073741824,nvlstree,simple,-1,-1,-1\n",
          notes=("B's NCCL_DEBUG log lacks the TUNING table at 1M",))


@pytest.fixture(scope="module")
def no_go_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    frame = results_frame([A], [B])
    verdict = judge_results([A], [B], n_boot=400)
    assert verdict.decision == "no-go"
    page = write_canary_report(frame, verdict, tmp_path_factory.mktemp("report"), why=WHY, labels=LABELS)
    return page, page.read_text()


def test_the_page_is_written_self_contained(no_go_report: tuple[Path, str]) -> None:
    page, text = no_go_report
    assert page.name == "index.html" and page.exists()
    sources = re.findall(r"""\b(?:src|href)\s*=\s*['"]([^'"]*)""", text)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources), sources
    assert "<script" not in text and "url(" not in text
    assert (page.parent / "canary-00.png").exists()


def test_the_headline_holds_the_decision_and_what_it_rests_on(no_go_report: tuple[Path, str]) -> None:
    _, text = no_go_report
    assert "NO-GO <small>(exit 1)</small>" in text
    for said in ("workload change", "+9.", "95%", "A/A noise", "per block", "blocks</dt><dd>3",
                 "no: existing results of each side, judged unpaired", "one call per measured size",
                 "not interleaved", "NCCL 2.28.9 &lt;candidate&gt;"):
        assert said in text, said
    assert "<candidate>" not in text  # labels are escaped


def test_the_range_table_names_the_losing_range(no_go_report: tuple[Path, str]) -> None:
    _, text = no_go_report
    rows = re.findall(r"<tr class='(\w+)'><td>all_reduce</td><td>([^<]*)</td><td>([^<]*)</td>", text)
    losing = [sizes for kind, sizes, said in rows if kind == "loses" and said == "loses"]
    assert losing and all(s.split("..")[0] in ("64M", "128M", "256M", "512M", "1G") for s in losing), rows
    assert all(kind in ("loses", "gains", "same") for kind, _, _ in rows)


def test_the_why_and_the_tuner_csv_are_shown(no_go_report: tuple[Path, str]) -> None:
    _, text = no_go_report
    assert "B is slower at 64M-1G because NCCL now picks Ring/LL128 instead of NVLSTree/Simple" in text
    assert "<pre class='tuner'>allreduce,67108864,1073741824,nvlstree,simple,-1,-1,-1" in text
    assert "<td>NVLSTree/Simple</td><td>Ring/LL128</td>" in text
    assert "lacks the TUNING table" in text


def test_the_bands_are_named_for_the_blocks_they_span(no_go_report: tuple[Path, str]) -> None:
    _, text = no_go_report
    assert "A: min-max over blocks (3 blocks)" in text
    assert band_name(PERCENTILE_FROM_BLOCKS) == "10-90th percentile over blocks"


def test_the_curves_are_the_median_over_blocks_of_each_run_s_out_of_place_busbw_from_its_time() -> None:
    frame = results_frame([A], [B])
    curves = side_curves(frame, "all_reduce")
    a = frame[(frame["side"] == "A") & ~frame["in_place"] & (frame["size_bytes"] == 1 << 30)]
    runs = ((1 << 30) / a.sort_values("block")["time_us"] / 1e3 * 2 * 7 / 8).to_numpy()  # 8 ranks
    assert runs == pytest.approx(a.sort_values("block")["busbw_gbps"].to_numpy(), abs=0.006)  # as printed
    i = list(curves["A"].size_bytes).index(float(1 << 30))
    assert curves["A"].busbw_gbps[i] == pytest.approx(sorted(runs)[1])
    assert (curves["A"].low_gbps[i], curves["A"].high_gbps[i]) == pytest.approx((runs.min(), runs.max()))
    assert curves["A"].blocks == 3


def test_sizes_nccl_tests_prints_as_0_00_gb_s_are_drawn_from_their_time() -> None:
    frame = results_frame([FIXTURES / "tag-output-a.txt"], [FIXTURES / "tag-output-b.txt"])
    assert (frame[frame["size_bytes"] == 8]["busbw_gbps"] == 0).all()
    curve = side_curves(frame, "all_reduce")["A"]
    assert curve.size_bytes[0] == 8 and 0 < curve.busbw_gbps[0] < 0.005


def test_without_why_or_labels_the_page_says_a_and_b(tmp_path: Path) -> None:
    frame = results_frame([FIXTURES / "full-output-good.txt"], [FIXTURES / "full-output-bad.txt"])
    verdict = judge_results([FIXTURES / "full-output-good.txt"], [FIXTURES / "full-output-bad.txt"])
    text = write_canary_report(frame, verdict, tmp_path).read_text()
    assert "INCONCLUSIVE" in text and "B against A" in text
    assert "no range: too few blocks" in text
    assert "class='why'" not in text


def test_a_frame_without_the_canary_columns_is_refused(tmp_path: Path) -> None:
    verdict = judge_results([A], [B], n_boot=400)
    with pytest.raises(ConfigError, match=r"lacks side, block"):
        write_canary_report(pd.DataFrame({"op": ["all_reduce"]}), verdict, tmp_path)


def test_the_page_renders_in_chromium_with_every_image_and_no_console_message(no_go_report: tuple[Path, str]
                                                                              ) -> None:
    browser = chromium()
    page, text = no_go_report
    probed = page.parent / "probe.html"  # the same page plus a script that reports on its images in the title
    probed.write_text(text.replace("</body>", _PROBE + "</body>"))
    dom = headless(browser, "--dump-dom", probed.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r"<title>PROBE (.*?)</title>", dom.stdout, re.S)
    assert m, f"the probe did not run; DOM head: {dom.stdout[:500]}"
    images = json.loads(m.group(1).replace("&quot;", '"'))
    assert len(images) == text.count("<img") >= 1
    broken = [alt for alt, ok, width, height in images if not (ok and width > 400 and height > 300)]
    assert not broken, f"images that did not load: {broken}"
    shot = page.parent / "screenshot.png"
    rendered = headless(browser, f"--screenshot={shot}", "--window-size=1280,2400", page.as_uri())
    assert rendered.returncode == 0 and shot.stat().st_size > 10_000, rendered.stderr[-2000:]
    errors = [line for line in (dom.stderr + rendered.stderr).splitlines()
              if ":CONSOLE" in line or "Failed to load resource" in line]
    assert not errors, "console messages:\n" + "\n".join(errors)


def test_one_figure_per_op_and_labels_with_dollars_and_markup_are_text(tmp_path: Path) -> None:
    from tests.analysis.recommend_frames import cell_rows, write_results

    sizes = [1 << 16, 1 << 20, 1 << 24]
    sides = {}
    for side, bw in (("a", 10.0), ("b", 9.0)):
        sides[side] = write_results(tmp_path / side, cell_rows(sizes=sizes, busbw=bw, sweep_id=side),
                                    cell_rows(op="all_gather", sizes=sizes, busbw=bw, sweep_id=side))
    frame = results_frame([sides["a"]], [sides["b"]])
    verdict = judge_results([sides["a"]], [sides["b"]], n_boot=400)
    labels = {"A": "$HOME/nccl-2.28 $x$", "B": "<b>2.29</b> & co"}
    page = write_canary_report(frame, verdict, tmp_path / "out", labels=labels)
    text = page.read_text()
    assert text.count("<img") == 2
    assert "<h2>all_gather</h2>" in text and "<h2>all_reduce</h2>" in text
    assert "$HOME/nccl-2.28 $x$" in text and "&lt;b&gt;2.29&lt;/b&gt; &amp; co" in text
    assert sorted(p.name for p in page.parent.glob("*.png")) == ["canary-00.png", "canary-01.png"]
