#!/usr/bin/env bash
# Capture the topology of every node of a Slurm allocation, one directory per host.
#
#   sbatch -N 4 slurm/collect-topo.sh topo/          # or, inside an allocation:
#   salloc -N 4 bash slurm/collect-topo.sh topo/
#   collscope topo cluster topo/
#
# Optional: put an ibnetdiscover capture at topo/ibnetdiscover.txt so rails follow leaf switches
# (set COLLSCOPE_IBNETDISCOVER=1 to have node 0 run it; needs access to the fabric). Asked for and missing, or
# failing, it is an error: exit 2 before anything is captured when ibnetdiscover is not on PATH, exit 1 after
# the node captures when it fails.
#SBATCH --job-name=collscope-topo
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00
#SBATCH --output=collscope-topo-%j.out
set -euo pipefail

out=${1:-topo}
collscope=${COLLSCOPE:-collscope}
want_fabric=${COLLSCOPE_IBNETDISCOVER:-0}
if [ "$want_fabric" = "1" ] && ! command -v ibnetdiscover >/dev/null 2>&1; then
  echo "collscope-topo: error: COLLSCOPE_IBNETDISCOVER=1 asks for ibnetdiscover, but it is not on PATH on $(hostname -s): install infiniband-diags (it needs access to the fabric), or unset COLLSCOPE_IBNETDISCOVER to have rails follow NIC index" >&2
  exit 2
fi
mkdir -p "$out"

if [ -z "${SLURM_JOB_ID:-}" ]; then
  echo "not inside a Slurm allocation: capturing this node only" >&2
  [ "$want_fabric" = "1" ] || exec "$collscope" topo collect --out "$out/$(hostname -s)"
  "$collscope" topo collect --out "$out/$(hostname -s)"
else
  # One task per node; each writes $out/<short hostname>/ (the directory must be on a shared filesystem).
  srun --ntasks="${SLURM_JOB_NUM_NODES}" --ntasks-per-node=1 \
    bash -c '"$0" topo collect --out "$1/$(hostname -s)"' "$collscope" "$out"
fi

fabric_failed=0
if [ "$want_fabric" = "1" ] && ! timeout 300 ibnetdiscover > "$out/ibnetdiscover.txt"; then
  rm -f "$out/ibnetdiscover.txt"
  echo "collscope-topo: error: ibnetdiscover failed (COLLSCOPE_IBNETDISCOVER=1): no fabric capture, so rails will follow NIC index; the node captures are in $out" >&2
  fabric_failed=1
fi
echo "captured $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) node(s) into $out; next: $collscope topo cluster $out"
exit "$fabric_failed"
