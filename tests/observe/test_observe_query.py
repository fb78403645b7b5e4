"""observe query (issue 27 item 3): DuckDB SQL over records/runs, as text, --json and --csv; errors as one line."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from collscope.cli import main
from collscope.observe import ingest

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "observe"
TEXT = FIXTURES / "all_reduce_perf-v2.19.6-nccl2.29.2-2x8-info-git-plugins.txt"
NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("observe") / "store"
    ingest([TEXT, FIXTURES / "locate-4nodes-one-broken.json"], root, cluster="alpha", time_=NIGHT)
    return root


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["observe", "query", *args])
    return result.exit_code, result.output


def test_json_rows_with_times_maps_and_lists_as_json_has_them(store: Path) -> None:
    code, out = _run("SELECT date, cluster, run_time, size_bytes, busbw_gbps, settings, tags, hosts, net_plugin "
                     "FROM records WHERE kind = 'nccl-tests' AND NOT in_place ORDER BY size_bytes",
                     "--store", str(store), "--json")
    assert code == 0, out
    rows = json.loads(out)
    assert [r["size_bytes"] for r in rows] == [1 << 20, 1 << 22, 1 << 24, 1 << 26]
    assert rows[0] == {"date": "2026-11-30", "cluster": "alpha", "run_time": "2026-11-30T02:00:00+00:00",
                       "size_bytes": 1 << 20, "busbw_gbps": rows[0]["busbw_gbps"], "settings": {}, "tags": None,
                       "hosts": ["h200-n017", "h200-n018"], "net_plugin": "NCCL RDMA Plugin v11"}
    assert rows[-1]["busbw_gbps"] == pytest.approx(179.17, abs=0.005)  # the fixture's 64 MiB out-of-place row
    code, out = _run("SELECT tags FROM records WHERE kind = 'locate' ORDER BY busbw_gbps LIMIT 1",
                     "--store", str(store), "--json")
    assert json.loads(out) == [{"tags": {"test_kind": "pair", "status": "slow", "round": "1", "repeats": "3"}}]


def test_csv_has_a_header_and_one_line_per_row(store: Path) -> None:
    code, out = _run("SELECT kind, records, hosts FROM runs ORDER BY kind, records DESC", "--store", str(store),
                     "--csv")
    assert code == 0, out
    rows = list(csv.reader(io.StringIO(out)))
    assert rows == [["kind", "records", "hosts"], ["locate", "1", '["gb-c01","gb-c02"]'],
                    ["locate", "1", '["gb-c03","gb-c04"]'], ["nccl-tests", "8", '["h200-n017","h200-n018"]']]


def test_text_table_and_user_errors(store: Path, tmp_path: Path) -> None:
    code, out = _run("SELECT kind, count(*) AS n FROM records GROUP BY kind ORDER BY kind", "--store", str(store))
    assert code == 0 and out.splitlines() == ["kind        n", "locate      2", "nccl-tests  8", "(2 rows)"]
    code, out = _run("SELECT nope FROM records", "--store", str(store))
    assert code == 2 and out.startswith("error: the SQL failed: ") and "nope" in out and "Traceback" not in out
    assert len(out.strip().splitlines()) == 1
    code, out = _run("SELECT 1", "--store", str(tmp_path / "absent"))
    assert code == 2 and "no such directory" in out
    code, out = _run("SELECT 1", "--store", str(store), "--json", "--csv")
    assert code == 2 and "exclude each other" in out


def test_an_empty_store_answers_with_no_rows(tmp_path: Path) -> None:
    (tmp_path / "s" / "records").mkdir(parents=True)
    code, out = _run("SELECT count(*) AS n, count(DISTINCT run_id) AS runs FROM records", "--store",
                     str(tmp_path / "s"), "--json")
    assert code == 0 and json.loads(out) == [{"n": 0, "runs": 0}]
    code, out = _run("SELECT * FROM runs", "--store", str(tmp_path / "s"), "--csv")
    assert code == 0 and out.startswith("run_id,date,cluster,run_time,")
