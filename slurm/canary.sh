#!/usr/bin/env bash
# Run a collscope canary (B against A, interleaved) inside one Slurm allocation: the sbatch entry point.
#
#   sbatch -N 2 slurm/canary.sh --b-env NCCL_PROTO=Simple --engine nccl-tests --op all_reduce --budget 10m
#   sbatch -N 2 --ntasks-per-node=8 --gpus-per-node=8 slurm/canary.sh --a-lib /shared/nccl-2.27/lib \
#          --b-lib /shared/nccl-2.28/lib --workload job.json --budget 20m --out results/nccl-2.28
#   sbatch --wait -N 2 slurm/canary.sh ... ; echo $?      # 0 go, 1 no-go, 3 inconclusive, 2 bad input
#
# It runs, with every argument passed through unchanged:
#   collscope canary --launcher srun --nranks $SLURM_NTASKS --nnodes $SLURM_JOB_NUM_NODES --out DIR ARGS...
# adding each of those options only when ARGS do not already give it (what the user passes always wins). Both
# sides, A and B, run in this one allocation on the same nodes, block after block (ABBA), so drift in load or
# temperature hits both alike; that is the point of a canary, and why the script runs one job, never an array.
#
# Results directory: --out from ARGS, else $COLLSCOPE_OUT, else results/canary-<job id> (relative to the directory
# sbatch was run from). It is a normal results directory (both sides' records, tagged) that `collscope analyze`,
# `report` and `observe ingest` read; the verdict is written beside them (verdict.json). Requeue-safe: a requeued
# job keeps its SLURM_JOB_ID, so it reruns the same command on the same directory and the canary resumes, keeping
# the points already measured; the same arguments in a new job with the same --out do the same. This script runs
# with --requeue and --open-mode=append, so the log of every attempt stays in one file.
#
# Exit status: collscope's own (the script execs it), so the job's state says the decision: COMPLETED (exit 0)
# is go; FAILED with exit 1 is no-go, 3 inconclusive, 2 bad input (the job log's last lines say which, and
# why). `sbatch --wait` returns that exit status. Judging two existing results directories
# (`collscope canary --from-results A B`) and drawing a report (`collscope canary report`) need no allocation:
# the script refuses them, run them directly.
#
# Log: collscope-canary-<job id>.out in the directory sbatch was run from.
#
# The collscope executable is $COLLSCOPE if set, else `collscope` on PATH (activate the environment before
# sbatch: Slurm exports the submitting shell's environment by default). Ranks are started with srun, so MPI
# programs need a PMI that the MPI library speaks: Open MPI 5 only speaks PMIx (`srun --mpi=pmix`).
#SBATCH --job-name=collscope-canary
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=01:00:00
#SBATCH --output=collscope-canary-%j.out
#SBATCH --requeue
#SBATCH --open-mode=append
set -euo pipefail

# The helpers below (die, has_option, finding collscope) repeat those of the other slurm/*.sh on purpose:
# sbatch runs a copy of this file from Slurm's spool directory, so a file beside it cannot be sourced.

die() {
  printf 'collscope-canary: error: %s\n' "$*" >&2
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

[ -n "${SLURM_JOB_ID:-}" ] \
  || die "not inside a Slurm allocation: submit with 'sbatch slurm/canary.sh ...', or run 'collscope canary ... --launcher local' directly"
if [ -n "${SLURM_ARRAY_TASK_ID:-}" ]; then
  die "array task ${SLURM_ARRAY_JOB_ID:-?}_$SLURM_ARRAY_TASK_ID: a canary is one job (A and B interleaved on the same nodes); submit it without --array (for more blocks, raise --budget or --blocks)"
fi
[ "$#" -gt 0 ] || die "nothing to compare: sbatch slurm/canary.sh --a-env K=V|--a-lib DIR|... --b-env K=V|--b-lib DIR|... --engine E --op OP --budget 10m (see 'collscope canary --help')"
if [ "$1" = "report" ]; then
  die "'collscope canary report' draws existing results and needs no allocation: run it directly, not through sbatch"
fi
if has_option --from-results "$@"; then
  die "'collscope canary --from-results A_DIR B_DIR' judges existing results and needs no allocation: run it directly, not through sbatch"
fi

added=()
has_option --launcher "$@" || added+=(--launcher srun)
if ! has_option --nranks "$@" && [ -n "${SLURM_NTASKS:-}" ]; then
  added+=(--nranks "$SLURM_NTASKS")
fi
if ! has_option --nnodes "$@" && [ -n "${SLURM_JOB_NUM_NODES:-}" ]; then
  added+=(--nnodes "$SLURM_JOB_NUM_NODES")
fi
if ! has_option --out "$@"; then
  added+=(--out "${COLLSCOPE_OUT:-results/canary-$SLURM_JOB_ID}")
fi

printf 'collscope-canary: job %s (restart %s) on %s at %s\n' "$SLURM_JOB_ID" "${SLURM_RESTART_COUNT:-0}" \
  "${SLURM_JOB_NODELIST:-?}" "$(date -Is)" >&2
cmd=("$collscope" canary "${added[@]}" "$@")
printf 'collscope-canary: +%s\n' "$(printf ' %q' "${cmd[@]}")" >&2
exec "${cmd[@]}"
