#!/usr/bin/env bash
# The single-GPU device check of issue 21 (see docs/troubleshooting.md, "The single-GPU device check").
#
#   bash tests/gpu/device_check.sh OUTDIR [--dry] [--only STEP]...
#
# Writes OUTDIR/summary.json, OUTDIR/summary.txt, OUTDIR/captures/ and OUTDIR/topo/; exits 1 when a step that
# ran failed, 2 on bad usage. --dry runs on any machine: the CUDA steps are skipped with the reason.
#
# Python: $PYTHON if set, else the first of the checkout's .venv/bin/python, python3, python whose torch sees
# CUDA (with --dry: the first that runs). torch is never installed here: a GPU machine's preinstalled CUDA torch
# is used, and the check says so when there is none. Missing pure dependencies (tests/gpu/requirements-device.txt)
# are installed without a package index from wheels in $WHEELS, else <checkout>/wheels, else <checkout>/../wheels
# (bash tests/gpu/prepare_wheels.sh fills that folder on a machine with an index), into a virtual environment
# that sees the system's packages ($DEVICE_CHECK_VENV, default ${TMPDIR:-/tmp}/collscope-device-venv).
#
# Nothing here changes a GPU setting: nvidia-smi is only queried (--query-gpu, topo -m, nvlink -s).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage() { echo "usage: bash tests/gpu/device_check.sh OUTDIR [--dry] [--only STEP]..." >&2; exit 2; }
[ $# -ge 1 ] || usage
OUTDIR=$1; shift
case "$OUTDIR" in -*|"") usage ;; esac
DRY=0
for arg in "$@"; do [ "$arg" = "--dry" ] && DRY=1; done

note() { echo "device_check: $*" >&2; }
setup_fail() {  # no Python that can run the check: say why in OUTDIR/summary.txt too
    mkdir -p "$OUTDIR"
    printf 'collscope device check: setup failed\n  FAIL     setup                  %s\nresult: FAIL (setup)\n' "$1" \
        | tee "$OUTDIR/summary.txt"
    exit 1
}

has_cuda_torch() { "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; }
runs() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' >/dev/null 2>&1; }

candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
[ -x "$REPO/.venv/bin/python" ] && candidates+=("$REPO/.venv/bin/python")
for name in python3 python; do command -v "$name" >/dev/null 2>&1 && candidates+=("$(command -v "$name")"); done
PY=""
if [ -n "${PYTHON:-}" ]; then
    runs "$PYTHON" || setup_fail "PYTHON=$PYTHON does not run Python >= 3.10"
    PY=$PYTHON
else
    if [ "$DRY" = 0 ]; then
        for c in "${candidates[@]}"; do if runs "$c" && has_cuda_torch "$c"; then PY=$c; break; fi; done
    fi
    if [ -z "$PY" ]; then
        for c in "${candidates[@]}"; do if runs "$c"; then PY=$c; break; fi; done
    fi
fi
[ -n "$PY" ] || setup_fail "no Python >= 3.10 found (tried: ${candidates[*]:-none}); set PYTHON=/path/to/python"
if [ "$DRY" = 0 ] && ! has_cuda_torch "$PY"; then
    note "torch with CUDA is missing for $PY (import torch; torch.cuda.is_available() is not True)."
    note "torch with CUDA cannot be installed from the wheels folder; use the machine's own CUDA torch"
    note "(PYTHON=/path/to/its/python). The check goes on and reports it in step 'environment'."
fi

# Missing pure dependencies -> a venv over this Python's packages, filled from the wheels folder.
missing() {  # the requirements this Python lacks, or has below their floor (name>=version)
    "$1" - "$REPO/tests/gpu/requirements-device.txt" <<'PYEOF'
import re, sys
from importlib.metadata import PackageNotFoundError, version

def numbers(text):
    return tuple(int(x) for x in re.findall(r"\d+", text.split("+")[0])[:3])

for line in open(sys.argv[1]):
    m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:>=\s*([0-9.]+))?", line)
    if not m or line.lstrip().startswith("#"):
        continue
    try:
        have = version(m.group(1))
    except PackageNotFoundError:
        print(line.strip())
        continue
    if m.group(2) and numbers(have) < numbers(m.group(2)):
        print(line.strip())
PYEOF
}
need=$(missing "$PY")
if [ -n "$need" ]; then
    WHEELS_DIR=""
    for d in "${WHEELS:-}" "$REPO/wheels" "$REPO/../wheels"; do
        if [ -n "$d" ] && [ -d "$d" ]; then WHEELS_DIR=$(cd "$d" && pwd); break; fi
    done
    [ -n "$WHEELS_DIR" ] || setup_fail "missing: $(echo $need); no wheels folder (\$WHEELS, $REPO/wheels or \
$REPO/../wheels): run bash tests/gpu/prepare_wheels.sh where a package index is reachable and copy the folder here"
    VENV=${DEVICE_CHECK_VENV:-${TMPDIR:-/tmp}/collscope-device-venv}
    note "missing: $(echo $need); installing from $WHEELS_DIR into $VENV (no package index)"
    [ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages "$VENV" \
        || setup_fail "could not create a virtual environment at $VENV with $PY -m venv"
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS_DIR" $need \
        || setup_fail "pip could not install $(echo $need) from $WHEELS_DIR (see above)"
    PY=$VENV/bin/python
    # torchrun from the venv's Python, so that the ranks it starts see the installed packages too
    if [ ! -e "$VENV/bin/torchrun" ]; then
        printf '#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' "$PY" >"$VENV/bin/torchrun"
        chmod +x "$VENV/bin/torchrun"
    fi
    left=$(missing "$PY")
    [ -z "$left" ] || setup_fail "still missing after installing from $WHEELS_DIR: $(echo $left)"
fi

note "python: $PY"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" "$REPO/tests/gpu/device_check.py" "$OUTDIR" "$@"
