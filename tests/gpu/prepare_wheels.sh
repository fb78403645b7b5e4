#!/usr/bin/env bash
# Download the wheels the device check installs on a GPU machine that has no package index.
#
#   bash tests/gpu/prepare_wheels.sh [--dest DIR] [--python 3.10|3.11|3.12|3.13]... [--arch x86_64|aarch64]
#
# Default DEST: <checkout>/../wheels (a "wheels" folder next to the checkout), where tests/gpu/device_check.sh
# looks (also <checkout>/wheels and $WHEELS). Default Pythons: 3.10, 3.11 and 3.12 (the GPU machine's own
# Python decides which wheels are used). Binary wheels only, for manylinux glibc >= 2.17.
# torch is NOT downloaded: a CUDA torch is large and must match the machine's driver; the device check uses
# the GPU machine's preinstalled torch and says so when it is missing.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEST="$REPO/../wheels"
ARCH=x86_64
PYTHONS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --dest) DEST=$2; shift 2 ;;
        --python) PYTHONS+=("$2"); shift 2 ;;
        --arch) ARCH=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "prepare_wheels.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#PYTHONS[@]} -gt 0 ] || PYTHONS=(3.10 3.11 3.12)
PIP=(python3 -m pip)
[ -x "$REPO/.venv/bin/python" ] && PIP=("$REPO/.venv/bin/python" -m pip)
mkdir -p "$DEST"
platforms=()
for tag in manylinux2014 manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28; do
    platforms+=(--platform "${tag}_${ARCH}")
done
for v in "${PYTHONS[@]}"; do
    abi="cp${v/./}"
    echo "prepare_wheels: Python $v ($ARCH) -> $DEST" >&2
    "${PIP[@]}" download --quiet --only-binary=:all: --implementation cp --python-version "$v" --abi "$abi" \
        "${platforms[@]}" -d "$DEST" -r "$REPO/tests/gpu/requirements-device.txt"
done
echo "prepare_wheels: $(ls "$DEST" | wc -l) files in $DEST; copy that folder next to the checkout on the GPU machine" >&2
