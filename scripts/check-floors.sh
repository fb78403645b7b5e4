#!/usr/bin/env bash
# The oldest versions pyproject.toml allows, tested: a venv with every runtime dependency at its floor (`name>=X`
# becomes `name==X.*`), then the tests that need neither MPI nor torch (those engines have their own floors and
# tests in the main venv). Run it after changing a floor or using a newer library feature.
#
#   bash scripts/check-floors.sh [VENV_DIR]     (default /tmp/collscope-floors; the suite's output at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-/tmp/collscope-floors}"
python3 - > "$venv.requirements" <<'PY'
import re
import tomllib

with open("pyproject.toml", "rb") as fh:
    project = tomllib.load(fh)["project"]
for dep in project["dependencies"]:
    m = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", dep.replace(" ", ""))
    if m is None:
        raise SystemExit(f"pyproject.toml: dependency {dep!r} is not 'name>=version'; cannot pin its floor")
    print(f"{m[1]}=={m[2]}.*" if m[2].count(".") < 2 else f"{m[1]}=={m[2]}")
PY
echo "floors:" $(cat "$venv.requirements")
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q -r "$venv.requirements" pytest hypothesis
"$venv/bin/pip" list 2>/dev/null | grep -i -E "^($(sed 's/[=<>].*//' "$venv.requirements" | paste -sd'|')) " || true
PYTHONPATH="$PWD" "$venv/bin/python" -m pytest -q -p no:cacheprovider -W ignore \
  tests/analysis tests/topo tests/results tests/traces tests/locate tests/collectives/test_nccl_tests.py \
  tests/collectives/test_nccl_tests_fixed.py tests/collectives/test_nccl_tests_machine.py \
  tests/collectives/test_nccl_log.py tests/sweeps/test_spec*.py $(ls tests/test_*.py | grep -v notebooks)
