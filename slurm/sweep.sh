#!/usr/bin/env bash
# Run a collscope sweep inside a Slurm allocation: the sbatch entry point.
#
#   sbatch slurm/sweep.sh SPEC.yaml [collscope sweep run options]
#   sbatch slurm/sweep.sh --preset mpi-algos --max-bytes 64M
#   sbatch -N 2 --ntasks-per-node=8 --gpus-per-node=8 slurm/sweep.sh --preset nccl-algo-proto --out results/h100
#   sbatch --array=0-2 slurm/sweep.sh --preset nccl-algo-proto  # 3 shards (one per repeat), one results directory
#
# It runs, with every argument passed through unchanged:
#   collscope sweep run --launcher srun --nranks $SLURM_NTASKS --nnodes $SLURM_JOB_NUM_NODES --out DIR [--shard I/N] ARGS...
# adding each of those options only when ARGS do not already give it (what the user passes always wins).
#
# Results directory: --out from ARGS, else $COLLSCOPE_OUT, else results/sweep-<job id> (relative to the
# directory sbatch was run from). The job id is SLURM_ARRAY_JOB_ID for array jobs (all shards share one
# directory) and SLURM_JOB_ID otherwise. Requeue-safe: a requeued job keeps its SLURM_JOB_ID, so it reruns the
# same command on the same directory and `collscope sweep run` resumes, skipping finished points; this script
# runs with --requeue and --open-mode=append so the log of every attempt stays in one file.
#
# Job arrays: with SLURM_ARRAY_TASK_ID set, the sweep's points are split into SLURM_ARRAY_TASK_COUNT shards
# and this task runs shard (TASK_ID - TASK_MIN) / TASK_STEP, passed as `--shard I/N` (the sweep CLI's
# option; `I/N` runs repeats I, I+N, ... of every configuration, so N is at most the sweep's repeats). Use a
# contiguous range: --array=0-(N-1).
#
# Logs: collscope-sweep-<job id>.out, and for an array task collscope-sweep-<array job id>_<task id>.out (what
# Slurm's %A_%a would give; one #SBATCH --output cannot say both: %A_%a names a plain job <id>_4294967294). Slurm
# opens the log by the task's own job id (%j), and the script renames it at start, so shard k's log says its array
# and task; a requeued task (same job id) puts its new lines after the earlier ones in that file. A log named by
# your own sbatch --output is left as it is.
#
# The collscope executable is $COLLSCOPE if set, else `collscope` on PATH (activate the environment before
# sbatch: Slurm exports the submitting shell's environment by default). Ranks are started with srun, so MPI
# programs need a PMI that the MPI library speaks: Open MPI 5 only speaks PMIx (`srun --mpi=pmix`).
#SBATCH --job-name=collscope-sweep
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=01:00:00
#SBATCH --output=collscope-sweep-%j.out
#SBATCH --requeue
#SBATCH --open-mode=append
set -euo pipefail

# The helpers below (die, has_option, finding collscope) repeat those of the other slurm/*.sh on purpose:
# sbatch runs a copy of this file from Slurm's spool directory, so a file beside it cannot be sourced.

die() {
  printf 'collscope-sweep: error: %s\n' "$*" >&2
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
  || die "not inside a Slurm allocation: submit with 'sbatch slurm/sweep.sh ...', or run 'collscope sweep run ... --launcher local' directly"
[ "$#" -gt 0 ] || die "no sweep given: sbatch slurm/sweep.sh SPEC.yaml | --preset NAME [options] (see 'collscope sweep run --help')"

# An array task's log takes the name <array job id>_<task id> (see above). Only the script's default name is
# renamed; the log stays the same open file. A requeued task's Slurm starts a fresh %j file: the earlier
# attempts' lines go first, then the file takes the name (only when Slurm opened it for appending).
name_array_log() {
  [ -n "${SLURM_ARRAY_JOB_ID:-}" ] && [ -n "${SLURM_ARRAY_TASK_ID:-}" ] || return 0
  local own target flags
  own=$(readlink -f "/proc/$$/fd/1" 2>/dev/null) || return 0
  [ "${own##*/}" = "collscope-sweep-${SLURM_JOB_ID}.out" ] && [ -f "$own" ] || return 0
  target="${own%/*}/collscope-sweep-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.out"
  [ "$own" != "$target" ] || return 0
  if [ -e "$target" ]; then
    flags=$(sed -n 's/^flags:[[:space:]]*//p' "/proc/$$/fdinfo/1" 2>/dev/null || true)
    [ -n "$flags" ] && (( 8#$flags & 8#2000 )) || return 0  # not O_APPEND: rewriting it would be overwritten
    cat -- "$target" "$own" > "$own.earlier" && cat -- "$own.earlier" > "$own" && rm -f -- "$own.earlier" \
      || return 0
  fi
  mv -f -- "$own" "$target" || true
}
name_array_log

added=()
has_option --launcher "$@" || added+=(--launcher srun)
if ! has_option --nranks "$@" && [ -n "${SLURM_NTASKS:-}" ]; then
  added+=(--nranks "$SLURM_NTASKS")
fi
if ! has_option --nnodes "$@" && [ -n "${SLURM_JOB_NUM_NODES:-}" ]; then
  added+=(--nnodes "$SLURM_JOB_NUM_NODES")
fi
if ! has_option --out "$@"; then
  added+=(--out "${COLLSCOPE_OUT:-results/sweep-${SLURM_ARRAY_JOB_ID:-$SLURM_JOB_ID}}")
fi
if [ -n "${SLURM_ARRAY_TASK_ID:-}" ] && ! has_option --shard "$@"; then
  count=${SLURM_ARRAY_TASK_COUNT:?SLURM_ARRAY_TASK_COUNT is not set}
  offset=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))
  step=${SLURM_ARRAY_TASK_STEP:-1}
  if [ "$offset" -lt 0 ] || [ $((offset % step)) -ne 0 ] || [ $((offset / step)) -ge "$count" ]; then
    die "array task $SLURM_ARRAY_TASK_ID does not map to a shard of $count: submit a contiguous --array=0-$((count - 1))"
  fi
  added+=(--shard "$((offset / step))/$count")
fi

printf 'collscope-sweep: job %s (restart %s) on %s at %s\n' "$SLURM_JOB_ID" "${SLURM_RESTART_COUNT:-0}" \
  "${SLURM_JOB_NODELIST:-?}" "$(date -Is)" >&2
cmd=("$collscope" sweep run "${added[@]}" "$@")
printf 'collscope-sweep: +%s\n' "$(printf ' %q' "${cmd[@]}")" >&2
exec "${cmd[@]}"
