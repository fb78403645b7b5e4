#!/usr/bin/env bash
# A real single-node Slurm (slurmctld + slurmd + munged) for collscope's tests and demo.
#
#   scripts/local-slurm.sh install   apt-get install slurm-wlm munge (and libpmix2) when missing; needs root
#   scripts/local-slurm.sh start     start munged, slurmctld, slurmd; wait until the node is idle; idempotent
#   scripts/local-slurm.sh stop      stop the daemons this script started (pid files in the state dir)
#   scripts/local-slurm.sh status    daemons and `sinfo`; exit 0 when all run and the node is usable, else 3
#   scripts/local-slurm.sh env       print `export SLURM_CONF=...` (also in $COLLSCOPE_SLURM_DIR/env.sh)
#
# `start` prints the export line on stdout (everything else goes to stderr), so
#     eval "$(scripts/local-slurm.sh start)"
# points the calling shell at this Slurm. When /etc/slurm/slurm.conf does not exist, `start` also links it to
# the generated file so that plain `sbatch`/`srun` find this cluster without SLURM_CONF (CI runs the tests in a
# fresh shell); `stop` removes that link. COLLSCOPE_SLURM_LINK_ETC=0 turns the link off.
#
# Settings (environment):
#   COLLSCOPE_SLURM_DIR      state dir: slurm.conf, env.sh, state/, spool/, logs, pid files (/tmp/collscope-slurm)
#   COLLSCOPE_SLURM_WAIT_S   how long `start` waits for the node to become idle (60)
#   COLLSCOPE_SLURM_PORTS    "CTLD_PORT SLURMD_PORT" (6817 6818)
#   COLLSCOPE_SLURM_LINK_ETC 1 (default) or 0, see above
#   COLLSCOPE_SLURM_MPI_DEFAULT  force MpiDefault (pmix, pmi2, none); see below
#
# The setup is cgroup-free (proctrack/linuxproc, task/none, no accounting) so it runs in containers as root.
# One partition `debug` with OverSubscribe=FORCE lets a 2-core machine host 2-rank jobs. MpiDefault=pmix when
# `install` has made Slurm's PMIx plugin loadable (Open MPI 5 from pip speaks only PMIx), else none; an
# explicit `srun --mpi=pmix` works either way once installed. Open MPI 5 under `srun --mpi=none|pmi2` does NOT
# fail: every rank silently becomes a size-1 singleton.
set -euo pipefail

STATE_DIR="${COLLSCOPE_SLURM_DIR:-/tmp/collscope-slurm}"
CONF="$STATE_DIR/slurm.conf"
ENV_FILE="$STATE_DIR/env.sh"
WAIT_S="${COLLSCOPE_SLURM_WAIT_S:-60}"
read -r CTLD_PORT SLURMD_PORT <<<"${COLLSCOPE_SLURM_PORTS:-6817 6818}"
LINK_ETC="${COLLSCOPE_SLURM_LINK_ETC:-1}"
ETC_CONF=/etc/slurm/slurm.conf
MUNGE_KEY=/etc/munge/munge.key
MUNGE_RUN=/run/munge
MUNGE_PID="$MUNGE_RUN/munged.pid"

log() { printf 'local-slurm: %s\n' "$*" >&2; }
die() { printf 'local-slurm: error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "$1"
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "$1 needs root (munged runs as the munge user, slurmd as root)"
}

# The pid in a pid file, printed only when that process is alive and is the daemon NAME (a stale pid file
# whose number was reused by another program is ignored, so `stop` never kills the wrong process).
live_pid() {
  local file=$1 name=$2 pid comm
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
  [ "$comm" = "$name" ] || return 1
  printf '%s\n' "$pid"
}

# Tail of a log file for error messages.
log_tail() {
  local file=$1
  if [ -s "$file" ]; then
    printf -- '--- last lines of %s ---\n' "$file" >&2
    tail -n 25 "$file" >&2 || true
  else
    printf -- '--- %s is empty or missing ---\n' "$file" >&2
  fi
}

# True when something accepts connections on 127.0.0.1:PORT.
port_busy() {
  # shellcheck disable=SC2016  # $1 is expanded by the inner bash, from its argument
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# Run a command with a timeout so a hung daemon never hangs the caller.
bounded() { timeout --kill-after=5 "$@"; }

# Slurm's mpi/pmix plugin dlopens <pmix2>/lib/libpmix.so, which Debian ships only in libpmix-dev (with
# autotools and -dev packages); the runtime package has libpmix.so.2, so a link is all the plugin needs.
link_libpmix() {
  local so2
  so2=$(dpkg -L libpmix2 2>/dev/null | grep '/pmix2/lib/libpmix\.so\.2$' | head -n 1 || true)
  [ -n "$so2" ] || { log "libpmix2 is not installed: 'srun --mpi=pmix' will not work"; return 0; }
  if [ ! -e "${so2%.2}" ]; then
    ln -s "$(basename "$so2")" "${so2%.2}"
    log "linked ${so2%.2} -> $(basename "$so2") (for srun --mpi=pmix)"
  fi
}

cmd_install() {
  local missing=() tool
  for tool in slurmctld slurmd sbatch srun munged mungekey; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
  done
  dpkg -s libpmix2 >/dev/null 2>&1 || missing+=(libpmix2)
  if [ ${#missing[@]} -eq 0 ]; then
    log "slurm, munge and libpmix2 already installed"
  else
    need_root install
    log "installing slurm-wlm munge libpmix2 (missing: ${missing[*]})"
    export DEBIAN_FRONTEND=noninteractive
    bounded 600 apt-get update -qq >&2
    # No recommends: they add ~35 plugin packages (hdf5, influxdb, rrd, ...) that a test cluster never loads.
    # libpmix2: Open MPI 5 (pip) speaks only PMIx, so MPI programs under srun need `srun --mpi=pmix`.
    bounded 900 apt-get install -y -qq --no-install-recommends slurm-wlm munge libpmix2 >&2
  fi
  need_root install
  link_libpmix
  log "installed: $(slurmctld -V), $(munged --version 2>&1 | awk '{print $1; exit}')"
}

start_munge() {
  local pid
  id munge >/dev/null 2>&1 || die "no munge user: run '$0 install' first"
  install -d -o munge -g munge -m 0755 "$MUNGE_RUN"
  install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
  if [ ! -s "$MUNGE_KEY" ]; then
    log "creating munge key $MUNGE_KEY"
    if command -v mungekey >/dev/null 2>&1; then
      mungekey --create --keyfile="$MUNGE_KEY" --force
    else
      dd if=/dev/urandom of="$MUNGE_KEY" bs=1 count=1024 status=none
    fi
  fi
  chown munge:munge "$MUNGE_KEY"
  chmod 0400 "$MUNGE_KEY"
  if pid=$(live_pid "$MUNGE_PID" munged); then
    log "munged already running (pid $pid)"
  else
    rm -f "$MUNGE_PID" "$MUNGE_RUN/munge.socket.2" "$MUNGE_RUN/munge.socket.2.lock"
    log "starting munged as munge"
    bounded 20 runuser -u munge -- munged --force \
      || { log_tail /var/log/munge/munged.log; die "munged did not start"; }
    pid=$(live_pid "$MUNGE_PID" munged) || { log_tail /var/log/munge/munged.log; die "munged exited after start"; }
    # Remember that we started it, so `stop` never kills a munged that someone else runs.
    printf '%s\n' "$pid" >"$STATE_DIR/munged.pid"
  fi
  bounded 10 munge -n </dev/null | bounded 10 unmunge >/dev/null \
    || { log_tail /var/log/munge/munged.log; die "munge credential round trip failed"; }
}

# The node line of `slurmd -C` (CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory).
node_hardware() {
  local line
  line=$(bounded 20 slurmd -C | sed -n 's/^NodeName=[^ ]* //p' | head -n 1)
  [ -n "$line" ] || die "could not read the node's hardware from 'slurmd -C'"
  printf '%s\n' "$line"
}

# The MPI plugin types `srun --mpi=list` names (it lists pmix even when libpmix cannot be loaded).
mpi_types() {
  SLURM_CONF="$CONF" bounded 20 srun --mpi=list 2>&1 | sed -n 's/^\(srun: *\)\{0,1\}[[:space:]]\{1,\}\([a-z0-9_]\{1,\}\)$/\2/p' \
    | paste -sd, - || true
}

# pmix when Slurm's pmix plugin can load its library (Open MPI 5 ranks under a plain `srun` then form one
# world; under mpi/none each would be a singleton), else none. COLLSCOPE_SLURM_MPI_DEFAULT overrides.
mpi_default() {
  if [ -n "${COLLSCOPE_SLURM_MPI_DEFAULT:-}" ]; then
    printf '%s\n' "$COLLSCOPE_SLURM_MPI_DEFAULT"
  elif compgen -G '/usr/lib/*/slurm-wlm/mpi_pmix.so' >/dev/null && compgen -G '/usr/lib/*/pmix2/lib/libpmix.so' >/dev/null; then
    printf 'pmix\n'
  else
    printf 'none\n'
  fi
}

write_conf() {
  local node=$1 hw=$2 tmp
  tmp=$(mktemp "$STATE_DIR/slurm.conf.XXXXXX")
  cat >"$tmp" <<EOF
# Generated by scripts/local-slurm.sh: a single-node Slurm for collscope's tests and demo.
ClusterName=collscope
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=$(mpi_default)
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MinJobAge=600
KillWait=5
InactiveLimit=0
Waittime=0
StateSaveLocation=$STATE_DIR/state
SlurmdSpoolDir=$STATE_DIR/spool
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmdPidFile=$STATE_DIR/slurmd.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdLogFile=$STATE_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$STATE_DIR/plugstack.conf
NodeName=$node NodeAddr=127.0.0.1 $hw State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  mv -f "$tmp" "$CONF"
  chmod 0644 "$CONF"
  : >"$STATE_DIR/plugstack.conf"
  printf 'export SLURM_CONF=%q\n' "$CONF" >"$ENV_FILE"
}

link_etc_conf() {
  [ "$LINK_ETC" = 1 ] || return 0
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$CONF" ]; then
    return 0
  fi
  if [ -e "$ETC_CONF" ] || [ -L "$ETC_CONF" ]; then
    log "leaving the existing $ETC_CONF alone; use: source $ENV_FILE"
    return 0
  fi
  mkdir -p "$(dirname "$ETC_CONF")"
  ln -s "$CONF" "$ETC_CONF"
  log "linked $ETC_CONF -> $CONF"
}

node_state() {
  SLURM_CONF="$CONF" bounded 10 sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n 1 || true
}

wait_idle() {
  local node=$1 state="" deadline=$((SECONDS + WAIT_S)) resumed=0
  while [ "$SECONDS" -lt "$deadline" ]; do
    state=$(node_state "$node")
    case "$state" in
      idle | mixed | allocated | completing) return 0 ;;
      drained | draining | down)
        if [ "$resumed" -eq 0 ]; then
          log "node $node is $state; resuming it"
          SLURM_CONF="$CONF" bounded 10 scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
          resumed=1
        fi
        ;;
    esac
    sleep 1
  done
  log "node $node is not idle after ${WAIT_S}s (state: '${state:-unknown}')"
  SLURM_CONF="$CONF" bounded 10 sinfo -N -l >&2 || true
  log_tail "$STATE_DIR/slurmctld.log"
  log_tail "$STATE_DIR/slurmd.log"
  die "slurm did not come up; logs are in $STATE_DIR"
}

wait_ctld() {
  local deadline=$((SECONDS + WAIT_S))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if SLURM_CONF="$CONF" bounded 10 scontrol ping 2>/dev/null | grep -q 'UP'; then
      return 0
    fi
    live_pid "$STATE_DIR/slurmctld.pid" slurmctld >/dev/null || { log_tail "$STATE_DIR/slurmctld.log"; die "slurmctld exited"; }
    sleep 1
  done
  log_tail "$STATE_DIR/slurmctld.log"
  die "slurmctld does not answer 'scontrol ping' after ${WAIT_S}s"
}

cmd_start() {
  need_root start
  local tool node hw pid
  for tool in slurmctld slurmd sinfo scontrol munged munge; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool not found: run '$0 install' (apt-get install slurm-wlm munge)"
  done
  install -d -m 0755 "$STATE_DIR" "$STATE_DIR/state" "$STATE_DIR/spool"
  start_munge

  node=$(hostname -s)
  [ -n "$node" ] || die "empty host name"
  hw=$(node_hardware)
  if pid=$(live_pid "$STATE_DIR/slurmctld.pid" slurmctld) && [ -s "$CONF" ]; then
    log "slurmctld already running (pid $pid), keeping $CONF"
  else
    write_conf "$node" "$hw"
    log "wrote $CONF ($node: $hw, MpiDefault=$(mpi_default))"
    ! port_busy "$CTLD_PORT" || die "port $CTLD_PORT is in use (another slurmctld?); set COLLSCOPE_SLURM_PORTS"
    log "starting slurmctld"
    bounded 30 slurmctld -f "$CONF" || { log_tail "$STATE_DIR/slurmctld.log"; die "slurmctld did not start"; }
  fi
  link_etc_conf
  wait_ctld
  if pid=$(live_pid "$STATE_DIR/slurmd.pid" slurmd); then
    log "slurmd already running (pid $pid)"
  else
    ! port_busy "$SLURMD_PORT" || die "port $SLURMD_PORT is in use (another slurmd?); set COLLSCOPE_SLURM_PORTS"
    log "starting slurmd"
    bounded 30 slurmd -f "$CONF" -N "$node" || { log_tail "$STATE_DIR/slurmd.log"; die "slurmd did not start"; }
    sleep 0.5
    live_pid "$STATE_DIR/slurmd.pid" slurmd >/dev/null || { log_tail "$STATE_DIR/slurmd.log"; die "slurmd exited after start"; }
  fi
  wait_idle "$node"
  compgen -G '/usr/lib/*/pmix2/lib/libpmix.so' >/dev/null \
    || log "warning: no libpmix.so for Slurm's pmix plugin; 'srun --mpi=pmix' fails until '$0 install'"
  log "node $node is $(node_state "$node"); MPI types: $(mpi_types)"
  cat "$ENV_FILE"
}

stop_pid_file() {
  local name=$1 file=$2 pid _
  if ! pid=$(live_pid "$file" "$name"); then
    rm -f "$file"
    return 0
  fi
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$name did not stop in 10s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

cmd_stop() {
  stop_pid_file slurmd "$STATE_DIR/slurmd.pid"
  stop_pid_file slurmctld "$STATE_DIR/slurmctld.pid"
  stop_pid_file munged "$STATE_DIR/munged.pid"
  if [ -L "$ETC_CONF" ] && [ "$(readlink "$ETC_CONF")" = "$CONF" ]; then
    rm -f "$ETC_CONF"
    log "removed the link $ETC_CONF"
  fi
}

cmd_status() {
  local ok=0 pid name file node state
  for name in slurmctld slurmd; do
    file="$STATE_DIR/$name.pid"
    if pid=$(live_pid "$file" "$name"); then
      printf '%-10s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-10s stopped\n' "$name"
      ok=3
    fi
  done
  if pid=$(live_pid "$MUNGE_PID" munged); then
    printf '%-10s running (pid %s)%s\n' munged "$pid" "$(live_pid "$STATE_DIR/munged.pid" munged >/dev/null || echo ', not started by this script')"
  else
    printf '%-10s stopped\n' munged
    ok=3
  fi
  printf 'conf       %s\n' "$([ -s "$CONF" ] && echo "$CONF" || echo 'none')"
  if [ "$ok" -eq 0 ]; then
    node=$(hostname -s)
    state=$(node_state "$node")
    printf 'node       %s %s\n' "$node" "${state:-unknown}"
    case "$state" in idle | mixed | allocated | completing) ;; *) ok=3 ;; esac
    SLURM_CONF="$CONF" bounded 10 sinfo || ok=3
  fi
  return "$ok"
}

cmd_env() {
  [ -s "$ENV_FILE" ] || die "no $ENV_FILE: run '$0 start' first"
  cat "$ENV_FILE"
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) cmd_env ;;
  -h | --help | help) usage 0 ;;
  *) usage 2 ;;
esac
