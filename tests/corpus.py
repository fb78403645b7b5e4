"""Where the shared corpus of real captured outputs lives, and how to read one file of it.

The corpus sits beside the repository (``../shared/corpus``); ``COLLSCOPE_CORPUS`` overrides it.
Tests that need it skip with the path in the reason when it is absent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("COLLSCOPE_CORPUS", REPO.parent / "shared" / "corpus")).resolve()
_HEADER = re.compile(r"^# (source|what|note):")


def skip_reason(path: Path = CORPUS) -> str:
    return f"shared corpus not found at {path}"


def strip_corpus_header(text: str) -> str:
    """Drop the leading ``# source:``/``# what:``/``# note:`` lines the corpus adds."""
    lines = text.splitlines(keepends=True)
    start = 0
    while start < len(lines) and _HEADER.match(lines[start]):
        start += 1
    return "".join(lines[start:])


def corpus_params(paths: list[Path]) -> list:
    """Parametrize values for corpus files; one skipped placeholder (with the reason) when there are none."""
    import pytest

    if paths:
        return [pytest.param(p, id=p.name) for p in paths]
    return [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(reason=skip_reason()))]
