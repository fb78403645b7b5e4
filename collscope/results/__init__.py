"""The results layer: a sweep's results directory and strict Measurement decoding.

``ResultsDir`` reads and writes ``sweep.json``, ``points/`` and ``failures.jsonl``; ``read_jsonl`` and
``decode_records`` turn Measurement JSONL into records (a wrong type is a ParseError naming file, line and
field); ``SweepStatus`` is what ``collscope sweep status`` reports. ``schema`` holds the strict types of
``sweep.json`` and ``failures.jsonl``; ``points`` says whether a point's records file is missing, done or damaged.
"""

from collscope.results.decode import decode_records, read_jsonl
from collscope.results.store import LOG_TAIL_CHARS, FailureReason, ResultsDir, SweepStatus

__all__ = ["ResultsDir", "SweepStatus", "FailureReason", "LOG_TAIL_CHARS", "read_jsonl", "decode_records"]
