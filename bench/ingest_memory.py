"""Peak memory of ``collscope ingest`` on a large nccl-tests text output, next to the file's size (issue 22 item
13: a 2.4 GB log took 7.9 GB). Generates the log of bench/ingest_speed.py (a 2-node x 8-GPU all_reduce_perf,
``-d all -o all``) into a temporary file (in a child process), runs ``collscope ingest FILE --out OUT`` as a
child process, and prints the file's MB, the child's peak resident memory (``ru_maxrss``) in MB, their ratio
and the wall time. ``--text`` measures reading and decoding alone (``collscope.files.read_input_text``).

    .venv/bin/python bench/ingest_memory.py [--mb 200] [--text]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_TEXT_ONLY = "import sys; from collscope.files import read_input_text; print(len(read_input_text(sys.argv[1])))"


def _peak_mb(argv: list[str]) -> tuple[float, float, int]:
    """(peak RSS MB, wall seconds, exit code) of ``argv`` run as a child."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, time.perf_counter() - start, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of the generated log (MB)")
    parser.add_argument("--text", action="store_true", help="read and decode the file only (no parse)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="collscope-ingest-mem-") as tmp:
        log = Path(tmp) / "all_reduce_perf.log"
        # written by a child: a fork of this process holding the text would count it in the child's peak
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
                        "from ingest_speed import generate; "
                        f"open({str(log)!r}, 'w').write(generate({int(args.mb * 1e6)}))"], check=True)
        size_mb = log.stat().st_size / 1e6
        baseline, _, _ = _peak_mb([sys.executable, "-c", "import collscope.cli"])
        argv = [sys.executable, "-c", _TEXT_ONLY, str(log)] if args.text else \
            [sys.executable, "-m", "collscope", "ingest", str(log), "--out", str(Path(tmp) / "out.jsonl")]
        peak, wall, code = _peak_mb(argv)
        what = "read + decode" if args.text else "collscope ingest"
        print(f"{what}: file {size_mb:.1f} MB -> peak RSS {peak:.0f} MB ({peak / size_mb:.2f}x the file; "
              f"{baseline:.0f} MB of it is Python and collscope's imports), {wall:.1f} s, exit {code}")


if __name__ == "__main__":
    main()
