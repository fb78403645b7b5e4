#!/usr/bin/env bash
# Capture the topology of every node of a Slurm allocation, one directory per host.
#
#   sbatch -N 4 slurm/collect-topo.sh topo/          # or, inside an allocation:
#   salloc -N 4 bash slurm/collect-topo.sh topo/
#   collscope topo cluster topo/
#
# Optional: put an ibnetdiscover capture at topo/ibnetdiscover.txt so rails follow leaf switches
# (set COLLSCOPE_IBNETDISCOVER=1 to have node 0 run it; needs access to the fabric).
#SBATCH --job-name=collscope-topo
#SBATCH --ntasks-per-node=1
#SBATCH --time=00:10:00
#SBATCH --output=collscope-topo-%j.out
set -euo pipefail

out=${1:-topo}
collscope=${COLLSCOPE:-collscope}
mkdir -p "$out"

if [ -z "${SLURM_JOB_ID:-}" ]; then
  echo "not inside a Slurm allocation: capturing this node only" >&2
  exec "$collscope" topo collect --out "$out/$(hostname -s)"
fi

# One task per node; each writes $out/<short hostname>/ (the directory must be on a shared filesystem).
srun --ntasks="${SLURM_JOB_NUM_NODES}" --ntasks-per-node=1 \
  bash -c '"$0" topo collect --out "$1/$(hostname -s)"' "$collscope" "$out"

if [ "${COLLSCOPE_IBNETDISCOVER:-0}" = "1" ] && command -v ibnetdiscover >/dev/null; then
  timeout 300 ibnetdiscover > "$out/ibnetdiscover.txt" || echo "ibnetdiscover failed; rails will follow NIC index" >&2
fi
echo "captured $(find "$out" -mindepth 1 -maxdepth 1 -type d | wc -l) node(s) into $out; next: $collscope topo cluster $out"
