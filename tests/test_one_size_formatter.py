"""One size formatter for the whole project (issue 26 item 8): :func:`collscope.units.format_size`, binary K/M/G
as nccl-tests' ``-b``/``-e`` take them, in text (analyze, recommend), JSON reasons, HTML/Markdown and plots.

The trace commands print sizes the same way (their size table, verdict lines and HTML page).
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest

from collscope.analysis.formats import size_text
from collscope.analysis.plots import size_ticks
from collscope.analysis.recommend.core import recommend, render_json
from collscope.analysis.recommend.env import render_env
from collscope.analysis.recommend.tuner import render_tuner
from collscope.units import format_size
from tests.analysis.recommend_frames import cell_rows, frame

ROOT = Path(__file__).resolve().parents[1]
_NCCL_TESTS_SIZE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)$")
"""What nccl-tests' parsesize reads (src/common.cu: sscanf "%lf %1s", then K, M or G as powers of 1024; any
other letter is an error), restricted to what a person should see: no exponent, no space."""


def _as_nccl_tests_reads_it(text: str) -> float:
    m = _NCCL_TESTS_SIZE.match(text)
    assert m, f"{text!r} is not a size nccl-tests' -b/-e reads"
    return float(m.group(1)) * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}[m.group(2)]


@pytest.mark.parametrize(("size", "text"), [
    (0, "0"), (8, "8"), (1000, "1000"), (1023, "1023"), (1024, "1K"), (1536, "1.5K"), (976563, "954K"),
    (976 * 1024, "976K"), (1000 * 1024, "1000K"), (1 << 20, "1M"), (9.5 * 2**20, "9.5M"), (1.125 * 2**20, "1.125M"),
    (10030, "9.79K"), (9 << 30, "9G"), (1023.7 * 1024, "1M"), (16 << 40, "16384G"), (523.7, "524"),
])
def test_sizes_print_in_binary_units_as_nccl_tests_takes_them(size: float, text: str) -> None:
    assert format_size(size) == text
    assert abs(_as_nccl_tests_reads_it(text) - size) <= max(0.005 * size, 0.5)


def test_every_size_of_a_sweep_reads_back_in_nccl_tests() -> None:
    for size in [8 << i for i in range(35)] + [3 << i for i in range(30)] + list(range(1, 5000, 7)):
        assert abs(_as_nccl_tests_reads_it(format_size(size)) - size) <= 0.005 * size


def test_a_table_cell_is_the_same_formatter_or_a_dash() -> None:
    for size in (8, 1536, 976563, 9 << 30):
        assert size_text(size) == format_size(size)
    assert size_text(None) == size_text(float("nan")) == "-"


def test_plot_axes_label_sizes_with_it() -> None:
    fig, ax = plt.subplots()
    try:
        size_ticks(ax, np.array([8.0, 1 << 20]))
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert labels == [format_size(int(t)) for t in ax.get_xticks()] and "512K" in labels and "8" in labels
    finally:
        plt.close(fig)


def test_recommend_text_json_and_tuner_reasons_use_it() -> None:
    """Ring/Simple wins from 32K and loses up to 4K: every range in every format is written as format_size does."""
    sizes = [8 * 8**i for i in range(9)]
    ring = cell_rows(knobs={"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}, sizes=sizes,
                     busbw=lambda s: 8.8 if s <= 4096 else 13.5)
    rec = recommend(frame(cell_rows(sizes=sizes, busbw=10.0), ring))
    env, tuner, js = render_env(rec), render_tuner(rec), render_json(rec)
    assert "at 32K..128M" in env and "at 8..4K" in env and "32K..128M:" in tuner
    for text in (env, tuner, js):
        assert not re.search(r"\d ?[KMGT]iB|\d B\b", text), text


def test_no_module_keeps_its_own_size_units() -> None:
    """A byte-unit table ("KiB", "MB", 1e6 ...) in a module other than units.py is a second formatter. Skipped:
    traces/inspector_prom.py, which reads NCCL Inspector's bucket labels, and observe/export.py, whose "1-2MB"
    labels are Inspector's Prometheus message_size buckets (another tool's format, reproduced to match its
    series)."""
    unit_literal = re.compile(r"""["'](?:[KMGT]i?B)["']""")
    outside = ("collscope/units.py", "collscope/observe/export.py", "collscope/traces/inspector_prom.py")
    found = []
    for path in sorted((ROOT / "collscope").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(outside):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if unit_literal.search(line) or re.search(r"\b(?:1024|1 << 10)\b.*\"[KMG]\"", line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "size formatting outside collscope.units.format_size:\n" + "\n".join(found)
