"""Sizes and bandwidths in analyze's text and the report: one size formatter, no exponents (issue 11, finding 10)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collscope.analysis.compare import analyze
from collscope.analysis.compare_render import render_text
from collscope.analysis.formats import markdown_table, num_text, size_text
from collscope.analysis.load import load_results
from collscope.analysis.params import link_params

A100_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "all_reduce_perf-a100-8x1-10G-v2.17.6.txt"


@pytest.mark.parametrize(("size", "text"), [
    (976563, "954K"), (976 * 1024, "976K"), (1 << 20, "1M"), (9.5 * 2**20, "9.5M"), (10030, "9.79K"),
    (9 << 30, "9G"), (1023.7 * 1024, "1M"), (8, "8"), (1000, "1000"), (None, "-"), (float("nan"), "-"),
])
def test_sizes_print_with_binary_suffixes_and_no_exponent(size: float | None, text: str) -> None:
    assert size_text(size) == text


@pytest.mark.parametrize(("value", "text"), [(458.65, "459"), (1234.5, "1234"), (3.4, "3.4"), (0.01234, "0.0123"),
                                             (None, "-")])
def test_bandwidths_print_with_three_significant_figures(value: float | None, text: str) -> None:
    assert num_text(value) == text


def test_markdown_table_has_a_header_separator_and_escapes_pipes() -> None:
    assert markdown_table(["a", "b"], [["1", "x|y"]]) == ["| a | b |", "|---|---|", "| 1 | x\\|y |"]


def test_analyze_text_prints_n_half_as_a_size() -> None:
    result = analyze(load_results([A100_FIXTURE]),
                     params=lambda n, m: link_params(None, gpu="A100", nranks=n, nnodes=m))
    result.configs["n_half_bytes"] = 976563.0 * 1024  # what printed as 9.54e+05K
    result.configs["n_half_measured_bytes"] = 976563.0
    text = render_text(result)
    fits = text.split("Efficiency")[0]
    assert "954M" in fits and "954K" in fits
    assert not re.search(r"\d[eE][+-]\d", text), text
    assert "10G" in text and "97%" in text and "Ring/Simple" in text  # 233 of 239 GB/s (Ring/Simple with its ramp)
