"""Property tests: whatever bytes or JSON a user hands us as sweep.json or failures.jsonl, the readers either
decode them or raise a ParseError naming the file; nothing else escapes (DESIGN.md, How we test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collscope.errors import ParseError
from collscope.results import ResultsDir
from collscope.results.schema import SweepDoc, convert_doc, decode_failure_lines

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                     max_leaves=20)
_SWEEP_KEYS = ("sweep_id", "created_at", "spec", "plan", "versions", "hosts", "strategy", "rounds")
_SWEEPISH = st.fixed_dictionaries({}, optional={k: _JSON for k in _SWEEP_KEYS}) | _JSON
_PLANISH = st.fixed_dictionaries({"sweep_id": st.just("sw"), "plan": st.fixed_dictionaries(
    {}, optional={"points": st.lists(st.fixed_dictionaries({}, optional={
        k: _JSON for k in ("point_id", "op", "settings", "repeat", "sizes")}) | _JSON, max_size=3),
        "skipped": _JSON})})


@given(st.binary(max_size=200))
def test_failures_bytes_decode_or_raise_parse_error(data):
    try:
        entries, notes = decode_failure_lines(data, "F")
    except ParseError as exc:
        assert exc.source == "F" and exc.line is not None
    else:
        assert len(notes) <= 1


@given(st.lists(_JSON | st.fixed_dictionaries({}, optional={
    k: _JSON for k in ("point_id", "reason", "detail", "resolved", "duration_s")}), max_size=4))
def test_failures_json_lines_decode_or_name_their_line(docs):
    data = "".join(json.dumps(d) + "\n" for d in docs).encode()
    try:
        decode_failure_lines(data, "F")
    except ParseError as exc:
        assert exc.line is not None and 1 <= exc.line <= len(docs)


@given(_SWEEPISH | _PLANISH)
def test_sweep_json_values_convert_or_raise_parse_error(doc):
    try:
        typed = convert_doc(doc, SweepDoc, "S", None, root="sweep.json")
    except ParseError as exc:
        assert exc.source == "S" and exc.expected
    else:
        assert isinstance(typed.sweep_id, str)


@pytest.fixture
def results(tmp_path: Path) -> ResultsDir:
    out = ResultsDir(tmp_path / "r")
    out.prepare("sw", {}, {"points": [{"point_id": "a"}]}, {})
    return out


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=120))
def test_status_of_any_sweep_json_bytes_is_a_status_or_a_parse_error(results, data):
    results.sweep_json.write_bytes(data)
    try:
        results.status()
    except ParseError as exc:
        assert exc.source == str(results.sweep_json)
