#!/usr/bin/env bash
# Find the slow or broken node (or rail) of an allocation: the sbatch entry point of `collscope locate`.
#
#   sbatch -N 16 slurm/locate.sh                          every node of the job, every rail together
#   sbatch -N 16 slurm/locate.sh --rails 2 --json         each rail alone; JSON in the job's output
#   sbatch -N 8 --gpus-per-node=8 --ntasks-per-node=8 slurm/locate.sh --expect-busbw 180
#                                                         GPU nodes: nccl-tests on every GPU (docs/locate.md)
#   salloc -N 4 slurm/locate.sh                           inside an salloc, the same
#
# It runs, with every argument passed through unchanged:
#   collscope locate --nodes $SLURM_JOB_NODELIST --out DIR ARGS...
# adding --nodes and --out only when ARGS do not give them (what the user passes always wins). Results
# directory: --out from ARGS, else $COLLSCOPE_OUT, else results/locate-<job id>. Exit status is locate's: 0
# nothing found, 1 suspects (their --exclude= string and drain line are printed), 2 bad input.
#
# --no-kill: a node that dies during the search must not end the job, so the other nodes are still tested.
# --ntasks-per-node=2: a node test on CPU runs 2 ranks inside the node (GPU clusters: one per GPU, so ask for
# --ntasks-per-node=G). On GPU nodes locate reads the GPUs per node from the allocation (SLURM_GPUS_ON_NODE,
# SLURM_GPUS_PER_NODE, SLURM_JOB_GPUS, SLURM_GRES), runs nccl-tests on every GPU and refuses the host engines
# unless --gpus-per-node 0 is passed. The collscope executable is $COLLSCOPE if set, else `collscope` on PATH.
#SBATCH --job-name=collscope-locate
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --no-kill
#SBATCH --time=00:30:00
#SBATCH --output=collscope-locate-%j.out
set -euo pipefail

# The helpers below (die, has_option, finding collscope) repeat those of the other slurm/*.sh on purpose:
# sbatch runs a copy of this file from Slurm's spool directory, so a file beside it cannot be sourced.

die() {
  printf 'collscope-locate: error: %s\n' "$*" >&2
  exit 2
}

# True when ARGS (after the first argument, the option name) contain that option, as `--opt V` or `--opt=V`.
has_option() {
  local name=$1 arg
  shift
  for arg in "$@"; do
    [ "$arg" = "--" ] && return 1
    case "$arg" in "$name" | "$name="*) return 0 ;; esac
  done
  return 1
}

collscope=${COLLSCOPE:-}
if [ -z "$collscope" ]; then
  collscope=$(command -v collscope || true)
  [ -n "$collscope" ] || die "collscope not found on PATH: activate its environment before sbatch, or set COLLSCOPE=/path/to/collscope (pip install collscope)"
elif [ ! -x "$collscope" ] && ! command -v "$collscope" >/dev/null 2>&1; then
  die "COLLSCOPE=$collscope is not an executable"
fi

[ -n "${SLURM_JOB_ID:-}" ] && [ -n "${SLURM_JOB_NODELIST:-}" ] \
  || die "not inside a Slurm allocation: submit with 'sbatch -N 4 slurm/locate.sh', or run it inside 'salloc -N 4'"

added=()
has_option --nodes "$@" || added+=(--nodes "$SLURM_JOB_NODELIST")
has_option --out "$@" || added+=(--out "${COLLSCOPE_OUT:-results/locate-$SLURM_JOB_ID}")

printf 'collscope-locate: job %s on %s at %s\n' "$SLURM_JOB_ID" "$SLURM_JOB_NODELIST" "$(date -Is)" >&2
cmd=("$collscope" locate "${added[@]}" "$@")
printf 'collscope-locate: +%s\n' "$(printf ' %q' "${cmd[@]}")" >&2
exec "${cmd[@]}"
