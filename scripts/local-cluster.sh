#!/usr/bin/env bash
# A real multi-node Slurm cluster on this one machine, made of network namespaces, for collscope's tests.
#
#   scripts/local-cluster.sh up [--nodes N] [--rails R]   N nodes (4), R rails (2); idempotent when already up; clears
#                                                        a stale one (nothing alive in it); a fresh slurmctld state
#                                                        every time (-c: no job of an earlier `up`)
#   scripts/local-cluster.sh down                         stop what `up` started, delete the namespaces
#   scripts/local-cluster.sh status                       daemons, links and `sinfo`; exit 3 when not healthy
#   scripts/local-cluster.sh exec CMD...                  run CMD where the Slurm clients live (sbatch, srun)
#   scripts/local-cluster.sh on NODE CMD...               run CMD inside NODE (its network, /tmp, hostname)
#   scripts/local-cluster.sh slow NODE [--rail R] [RATE]  shape NODE's rail R (all rails) both ways (200mbit)
#   scripts/local-cluster.sh fast NODE                    remove the shaping of every rail of NODE
#   scripts/local-cluster.sh kill NODE                    a dead node: slurmd and its processes gone, links down
#   scripts/local-cluster.sh revive NODE                  links up, slurmd back, node resumed in Slurm
#   scripts/local-cluster.sh env                          print the exports `exec` uses
#
# What it is: namespaces `cs-sw` (one bridge per rail), `cs-ctl` (slurmctld and the clients) and `cs-node1..N`
# (one slurmd each), joined by veth pairs created from inside `cs-sw`; rail r is interface `cl<r>` with address
# 10.99.<r>.<i> on node i (ctl is 10.99.0.254, on rail 0). Nothing is added to the root namespace's
# interfaces, routes or qdiscs, and traffic only flows between these addresses. Every node has its own
# hostname, /etc/hosts, /tmp and /dev/shm (a private mount namespace); the directories named in
# COLLSCOPE_CLUSTER_SHARED are bound back into each node's /tmp like an NFS home, and everything outside /tmp
# (the checkout, /var/tmp) is shared as it is. One munged runs in the root namespace on a private socket.
# Behind every node are the same 2 real cores: timings show behaviour, not a fabric's speed.
#
# Settings (environment):
#   COLLSCOPE_CLUSTER_DIR     state dir: slurm.conf, env.sh, per-node spool/logs, pid files
#                             (/var/tmp/collscope-cluster: outside /tmp, which is private to each node)
#   COLLSCOPE_CLUSTER_SHARED  directories under /tmp shared by all nodes ("/tmp/pytest-of-$USER /tmp/collscope-shared")
#   COLLSCOPE_CLUSTER_WAIT_S  how long `up`/`revive` wait for the nodes to become idle (60)
#
# Facts this rests on (seen on this machine kind): slurmd 22.05 dies under `ip netns exec` (it remounts /sys
# and hides /sys/fs/cgroup), so daemons start with `nsenter --net` + `unshare --mount --uts`; a shared /tmp
# makes every node's PMIx plugin create the same /tmp/spmix_appdir_* and all steps fail; torch's TCPStore
# reverse-resolves v4-mapped peers, so the hosts files carry ::ffff: lines too; the PMIx plugin names the
# stepd sockets of other nodes by SlurmdSpoolDir without expanding %n (a "nodes/%n/spool" that exists nowhere:
# fences then hang, or end early on one node so that its rank's first message crashes a peer still in
# MPI_Init), so SlurmdSpoolDir is one path, $STATE_DIR/spool, with each node's own directory bound there.
set -euo pipefail

SELF=$(readlink -f "$0")
STATE_DIR="${COLLSCOPE_CLUSTER_DIR:-/var/tmp/collscope-cluster}"
CONF="$STATE_DIR/slurm.conf"
ENV_FILE="$STATE_DIR/env.sh"
LAYOUT="$STATE_DIR/layout"
WAIT_S="${COLLSCOPE_CLUSTER_WAIT_S:-60}"
SHARED="${COLLSCOPE_CLUSTER_SHARED:-/tmp/pytest-of-$(id -un) /tmp/collscope-shared}"
MUNGE_DIR="$STATE_DIR/munge"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket"
MUNGE_KEY=/etc/munge/munge.key
NS_SW=cs-sw
NS_CTL=cs-ctl
CTL_ADDR=10.99.0.254
DEFAULT_RATE=200mbit

log() { printf 'local-cluster: %s\n' "$*" >&2; }
die() { printf 'local-cluster: error: %s\n' "$*" >&2; exit 1; }
usage() { sed -n '2,15p' "$SELF" | sed 's/^# \{0,1\}//' >&2; exit "$1"; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (network namespaces, slurmd)"; }
bounded() { timeout --kill-after=5 "$@"; }

# The pid in a pid file, only when that process is alive and is the program NAME (never a reused pid).
live_pid() {
  local file=$1 name=$2 pid comm
  [ -s "$file" ] || return 1
  pid=$(tr -dc '0-9' <"$file")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
  [ "$comm" = "$name" ] || return 1
  printf '%s\n' "$pid"
}

log_tail() {
  if [ -s "$1" ]; then
    printf -- '--- last lines of %s ---\n' "$1" >&2
    tail -n 20 "$1" >&2 || true
  fi
}

# ---- layout -----------------------------------------------------------------------------------------
NODES=0
RAILS=0
read_layout() {
  [ -s "$LAYOUT" ] || die "no cluster is up (no $LAYOUT): run '$0 up' first"
  # shellcheck disable=SC1090  # written by write_layout: NODES=.. RAILS=..
  . "$LAYOUT"
}
write_layout() { printf 'NODES=%d\nRAILS=%d\n' "$NODES" "$RAILS" >"$LAYOUT"; }
node_ns() { printf 'cs-%s\n' "$1"; }
node_index() {
  local name=$1 i
  [[ "$name" =~ ^node([0-9]+)$ ]] || die "no such node '$name' (the nodes are node1..node$NODES)"
  i=${BASH_REMATCH[1]}
  [ "$i" -ge 1 ] && [ "$i" -le "$NODES" ] || die "no such node '$name' (the nodes are node1..node$NODES)"
  printf '%s\n' "$i"
}
ns_exists() { [ -e "/run/netns/$1" ]; }
cluster_namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^cs-(sw|ctl|node[0-9]+)$' || true; }

# ---- running things inside a namespace ---------------------------------------------------------------
# A new mount + UTS namespace inside the network namespace NS, set up by `_inner`, then CMD.
ns_start() {
  local ns=$1 host=$2
  shift 2
  nsenter --net="/run/netns/$ns" -- unshare --uts --mount --propagation private -- "$SELF" _inner "$ns" "$host" "$@"
}

# Runs inside the new namespaces (called by ns_start): hostname, hosts file, private /tmp and /dev/shm.
cmd_inner() {
  local ns=$1 host=$2 dir rel
  shift 2
  hostname "$host"
  mount --bind "$STATE_DIR/etc/$ns/hosts" /etc/hosts
  mount --bind "$STATE_DIR/etc/$ns/resolv.conf" /etc/resolv.conf
  mount --bind /tmp "$STATE_DIR/roottmp"
  mount -t tmpfs -o mode=1777,size=2g tmpfs /tmp
  for dir in $SHARED; do
    case "$dir" in /tmp/?*) ;; *) continue ;; esac
    rel=${dir#/tmp/}
    [ -d "$STATE_DIR/roottmp/$rel" ] || continue
    mkdir -p "/tmp/$rel"
    mount --bind "$STATE_DIR/roottmp/$rel" "/tmp/$rel"
  done
  umount -l "$STATE_DIR/roottmp"
  mount -t tmpfs -o mode=1777,size=2g tmpfs /dev/shm
  if [ -d "$STATE_DIR/nodes/$host/spool" ]; then mount --bind "$STATE_DIR/nodes/$host/spool" "$STATE_DIR/spool"; fi
  exec "$@"
}

# Join the namespaces of a running daemon (PID) and run CMD there, in the caller's directory.
join() {
  local pid=$1
  shift
  nsenter -t "$pid" -n -m -u --wd="$PWD" -- env "$@"
}

cluster_env() {
  printf 'SLURM_CONF=%s\n' "$CONF"
  # Open MPI over TCP on rail 0 unless told otherwise; gloo likewise (rail r: cl<r>).
  printf '%s\n' OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=cl0 OMPI_MCA_oob_tcp_if_include=cl0 \
    OMPI_MCA_mpi_yield_when_idle=1 GLOO_SOCKET_IFNAME=cl0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# The environment for `exec`/`on`: the cluster's defaults, then whatever the caller exported (caller wins).
env_args() {
  local line name
  while IFS= read -r line; do
    name=${line%%=*}
    if [ -z "${!name+x}" ] || [ "$name" = SLURM_CONF ]; then
      printf '%s\n' "$line"
    fi
  done < <(cluster_env)
}

# ---- munge --------------------------------------------------------------------------------------------
start_munge() {
  local pid
  id munge >/dev/null 2>&1 || die "no munge user: install munge (apt-get install munge)"
  install -d -o munge -g munge -m 0700 /etc/munge
  if [ ! -s "$MUNGE_KEY" ]; then
    log "creating munge key $MUNGE_KEY"
    mungekey --create --keyfile="$MUNGE_KEY" --force
  fi
  chown munge:munge "$MUNGE_KEY"
  chmod 0400 "$MUNGE_KEY"
  install -d -o munge -g munge -m 0755 "$MUNGE_DIR"
  if pid=$(live_pid "$MUNGE_DIR/munged.pid" munged); then
    log "munged already running (pid $pid)"
    return 0
  fi
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  bounded 20 runuser -u munge -- munged --force --socket="$MUNGE_SOCKET" --pid-file="$MUNGE_DIR/munged.pid" \
    --log-file="$MUNGE_DIR/munged.log" --seed-file="$MUNGE_DIR/munged.seed" --key-file="$MUNGE_KEY" \
    || { log_tail "$MUNGE_DIR/munged.log"; die "munged did not start"; }
  live_pid "$MUNGE_DIR/munged.pid" munged >/dev/null || { log_tail "$MUNGE_DIR/munged.log"; die "munged exited"; }
}

# ---- network ------------------------------------------------------------------------------------------
write_hosts() {
  local ns=$1 i
  install -d -m 0755 "$STATE_DIR/etc/$ns"
  {
    printf '127.0.0.1 localhost\n::1 localhost\n'
    printf '%s ctl\n::ffff:%s ctl\n' "$CTL_ADDR" "$CTL_ADDR"
    for i in $(seq 1 "$NODES"); do
      printf '10.99.0.%d node%d\n::ffff:10.99.0.%d node%d\n' "$i" "$i" "$i" "$i"
    done
  } >"$STATE_DIR/etc/$ns/hosts"
  printf 'nameserver 127.0.0.1\n' >"$STATE_DIR/etc/$ns/resolv.conf"
}

make_network() {
  local r i ns
  ip netns add "$NS_SW"
  ip -n "$NS_SW" link set lo up
  for r in $(seq 0 $((RAILS - 1))); do
    ip -n "$NS_SW" link add "br$r" type bridge
    ip -n "$NS_SW" link set "br$r" up
  done
  ip netns add "$NS_CTL"
  ip -n "$NS_CTL" link set lo up
  ip -n "$NS_SW" link add p0-ctl type veth peer name cl0 netns "$NS_CTL"
  ip -n "$NS_SW" link set p0-ctl master br0 up
  ip -n "$NS_CTL" addr add "$CTL_ADDR/24" dev cl0
  ip -n "$NS_CTL" link set cl0 up
  write_hosts "$NS_CTL"
  for i in $(seq 1 "$NODES"); do
    ns=$(node_ns "node$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    for r in $(seq 0 $((RAILS - 1))); do
      ip -n "$NS_SW" link add "p$r-node$i" type veth peer name "cl$r" netns "$ns"
      ip -n "$NS_SW" link set "p$r-node$i" master "br$r" up
      ip -n "$ns" addr add "10.99.$r.$i/24" dev "cl$r"
      ip -n "$ns" link set "cl$r" up
    done
    write_hosts "$ns"
  done
}

# ---- slurm --------------------------------------------------------------------------------------------
mpi_default() {
  if compgen -G '/usr/lib/*/slurm-wlm/mpi_pmix.so' >/dev/null && compgen -G '/usr/lib/*/pmix2/lib/libpmix.so' >/dev/null; then
    printf 'pmix\n'
  else
    printf 'none\n'
  fi
}

write_conf() {
  local cpus mem i
  cpus=$(nproc)
  mem=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / NODES))
  {
    cat <<EOF
# Generated by scripts/local-cluster.sh: $NODES nodes x $RAILS rails in network namespaces on one machine.
ClusterName=collscope-sim
SlurmctldHost=ctl($CTL_ADDR)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
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
SlurmdTimeout=10
MessageTimeout=5
MinJobAge=600
KillWait=5
InactiveLimit=0
Waittime=0
StateSaveLocation=$STATE_DIR/ctld
SlurmctldPidFile=$STATE_DIR/slurmctld.pid
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdSpoolDir=$STATE_DIR/spool
SlurmdPidFile=$STATE_DIR/nodes/%n/slurmd.pid
SlurmdLogFile=$STATE_DIR/nodes/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$STATE_DIR/plugstack.conf
EOF
    for i in $(seq 1 "$NODES"); do
      printf 'NodeName=node%d NodeAddr=10.99.0.%d CPUs=%d RealMemory=%d State=UNKNOWN\n' "$i" "$i" "$cpus" "$mem"
    done
    printf 'PartitionName=sim Nodes=node[1-%d] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE\n' "$NODES"
  } >"$CONF"
  : >"$STATE_DIR/plugstack.conf"
  { cluster_env | sed 's/^/export /'; } >"$ENV_FILE"
}

ctld_pid() { live_pid "$STATE_DIR/slurmctld.pid" slurmctld; }
slurmd_pid() { live_pid "$STATE_DIR/nodes/$1/slurmd.pid" slurmd; }

# A Slurm client command, run in ctl.
client() {
  local pid
  pid=$(ctld_pid) || die "slurmctld is not running: '$0 status'"
  join "$pid" SLURM_CONF="$CONF" timeout --kill-after=5 20 "$@"
}

start_slurmd() {
  local node=$1
  install -d -m 0755 "$STATE_DIR/nodes/$node/spool" "$STATE_DIR/spool"
  ns_start "$(node_ns "$node")" "$node" timeout --kill-after=5 30 slurmd -f "$CONF" -N "$node" \
    || { log_tail "$STATE_DIR/nodes/$node/slurmd.log"; die "slurmd of $node did not start"; }
}

node_state() { client sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n 1 || true; }

wait_idle() {
  local deadline=$((SECONDS + WAIT_S)) node state pending
  while [ "$SECONDS" -lt "$deadline" ]; do
    pending=""
    for node in "$@"; do
      state=$(node_state "$node")
      case "$state" in
        idle | mixed | allocated | completing) ;;
        down* | drain*) client scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true; pending+=" $node" ;;
        *) pending+=" $node" ;;
      esac
    done
    [ -n "$pending" ] || return 0
    sleep 1
  done
  client sinfo -N -l >&2 || true
  log_tail "$STATE_DIR/slurmctld.log"
  die "nodes not idle after ${WAIT_S}s:$pending (logs in $STATE_DIR)"
}

# ---- commands -----------------------------------------------------------------------------------------
cmd_up() {
  need_root up
  local want_nodes=4 want_rails=2 tool i
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) want_nodes=${2:?--nodes needs a number}; shift 2 ;;
      --rails) want_rails=${2:?--rails needs a number}; shift 2 ;;
      *) die "up: unknown argument '$1' (usage: up [--nodes N] [--rails R])" ;;
    esac
  done
  [[ "$want_nodes" =~ ^[0-9]+$ ]] && [ "$want_nodes" -ge 1 ] && [ "$want_nodes" -le 250 ] \
    || die "--nodes must be 1..250, got '$want_nodes'"
  [[ "$want_rails" =~ ^[0-9]+$ ]] && [ "$want_rails" -ge 1 ] && [ "$want_rails" -le 8 ] \
    || die "--rails must be 1..8, got '$want_rails'"
  local left_ns
  left_ns=$(cluster_namespaces)
  if [ -n "$left_ns" ] && remnant_is_stale; then
    log "stale cluster namespaces, nothing alive in them (a reboot, or a run killed before 'down'); clearing them"
    cmd_down >&2
  elif [ -s "$LAYOUT" ] && ns_exists "$NS_SW"; then
    read_layout
    [ "$NODES" = "$want_nodes" ] && [ "$RAILS" = "$want_rails" ] \
      || die "a cluster of $NODES nodes x $RAILS rails is up; '$0 down' first"
    log "cluster already up ($NODES nodes x $RAILS rails)"
    cmd_status >&2 && { cat "$ENV_FILE"; return 0; }
    die "the cluster is up but not healthy; '$0 down' then '$0 up'"
  elif [ -n "$left_ns" ]; then
    die "namespaces cs-* exist without a running cluster and still hold processes: '$0 down' first"
  fi
  for tool in slurmctld slurmd sinfo scontrol munged nsenter unshare ip tc; do
    command -v "$tool" >/dev/null 2>&1 || install_packages
  done
  NODES=$want_nodes
  RAILS=$want_rails
  install -d -m 0755 "$STATE_DIR" "$STATE_DIR/ctld" "$STATE_DIR/nodes" "$STATE_DIR/roottmp"
  for dir in $SHARED; do
    case "$dir" in /tmp/?*) install -d -m 1777 "$dir" ;; esac
  done
  write_layout
  start_munge
  make_network
  write_conf
  log "network: $NODES nodes x $RAILS rails (cl0..cl$((RAILS - 1))); starting slurmctld in ctl"
  ns_start "$NS_CTL" ctl timeout --kill-after=5 30 slurmctld -c -f "$CONF" || { log_tail "$STATE_DIR/slurmctld.log"; die "slurmctld did not start"; }
  local deadline=$((SECONDS + WAIT_S))
  until client scontrol ping 2>/dev/null | grep -q UP; do
    [ "$SECONDS" -lt "$deadline" ] || { log_tail "$STATE_DIR/slurmctld.log"; die "slurmctld does not answer"; }
    sleep 0.5
  done
  for i in $(seq 1 "$NODES"); do start_slurmd "node$i"; done
  wait_idle $(seq -f 'node%g' 1 "$NODES")
  log "up: $(client sinfo -h -o '%D nodes %T' | paste -sd, -); MpiDefault=$(mpi_default)"
  cat "$ENV_FILE"
}

install_packages() {
  log "installing slurm-wlm munge libpmix2 iproute2 (missing tools)"
  need_root install
  export DEBIAN_FRONTEND=noninteractive
  bounded 600 apt-get update -qq >&2
  bounded 900 apt-get install -y -qq --no-install-recommends slurm-wlm munge libpmix2 iproute2 util-linux >&2
  local so2
  so2=$(dpkg -L libpmix2 2>/dev/null | grep '/pmix2/lib/libpmix\.so\.2$' | head -n 1 || true)
  [ -z "$so2" ] || [ -e "${so2%.2}" ] || ln -s "$(basename "$so2")" "${so2%.2}"
}

stop_pid() {
  local name=$1 file=$2 pid _
  pid=$(live_pid "$file" "$name") || { rm -f "$file"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

# Kill every process left inside network namespace NS (job steps, ranks).
kill_ns_pids() {
  local ns=$1 pids _
  ns_exists "$ns" || return 0
  for _ in 1 2 3 4 5; do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086  # a list of pids
    kill -KILL $pids 2>/dev/null || true
    sleep 0.2
  done
}

# True when what an earlier `up` left behind has nothing alive in it: no slurmctld or slurmd of ours and no
# process in any cs-* namespace (munged, in the root namespace, is reused as it is). Such a remnant (after a
# reboot, or a run killed before its `down`) holds nothing to lose, so `up` clears it; anything alive is left to
# the user's `down`.
remnant_is_stale() {
  local node ns
  ctld_pid >/dev/null && return 1
  if [ -s "$LAYOUT" ]; then
    read_layout
    for node in $(seq -f 'node%g' 1 "$NODES"); do slurmd_pid "$node" >/dev/null && return 1; done
  fi
  for ns in $(cluster_namespaces); do
    [ -z "$(ip netns pids "$ns" 2>/dev/null || true)" ] || return 1
  done
  return 0
}

cmd_down() {
  need_root down
  local ns node left
  if [ -s "$LAYOUT" ]; then
    read_layout
    for node in $(seq -f 'node%g' 1 "$NODES"); do stop_pid slurmd "$STATE_DIR/nodes/$node/slurmd.pid"; done
  fi
  stop_pid slurmctld "$STATE_DIR/slurmctld.pid"
  stop_pid munged "$MUNGE_DIR/munged.pid"
  for ns in $(cluster_namespaces); do
    kill_ns_pids "$ns"
    ip netns del "$ns"
  done
  rm -rf "$STATE_DIR/etc" "$LAYOUT"
  left=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^cs-' || true)
  printf 'left: namespaces: %s; daemons: %s\n' "${left:-none}" \
    "$(pgrep -a -f "$STATE_DIR" | grep -v -e pgrep -e "$SELF" | paste -sd';' - || true)"
  [ -z "$left" ] && printf 'left: none\n'
}

cmd_status() {
  local ok=0 pid node i r state link
  read_layout
  if pid=$(live_pid "$MUNGE_DIR/munged.pid" munged); then echo "munged     running (pid $pid)"; else echo "munged     stopped"; ok=3; fi
  if pid=$(ctld_pid); then echo "slurmctld  running in ctl (pid $pid)"; else echo "slurmctld  stopped"; ok=3; fi
  for i in $(seq 1 "$NODES"); do
    node=node$i
    if pid=$(slurmd_pid "$node"); then state="slurmd pid $pid"; else state="slurmd stopped"; ok=3; fi
    for r in $(seq 0 $((RAILS - 1))); do
      link=$(ip -n "$NS_SW" -br link show "p$r-$node" 2>/dev/null | awk '{print $2}')
      [ "$link" = UP ] || ok=3
      state+=", cl$r ${link:-missing}"
      if nsenter --net="/run/netns/$(node_ns "$node")" -- tc qdisc show dev "cl$r" 2>/dev/null | grep -q 'qdisc tbf'; then state+=" (slowed)"; fi
    done
    printf '%-10s %s\n' "$node" "$state"
  done
  if [ "$ok" -eq 0 ]; then
    client sinfo -N -o '%N %T' || ok=3
    if client sinfo -h -N -o '%T' | grep -qvE '^(idle|mixed|allocated|completing)$'; then ok=3; fi
  fi
  [ "$ok" -eq 0 ] && echo "healthy: $NODES nodes x $RAILS rails" || echo "not healthy"
  return "$ok"
}

cmd_exec() {
  [ $# -gt 0 ] || die "exec needs a command"
  read_layout
  local pid
  pid=$(ctld_pid) || die "slurmctld is not running: '$0 status'"
  mapfile -t envs < <(env_args)
  join "$pid" "${envs[@]}" "$@"
}

cmd_on() {
  [ $# -gt 1 ] || die "on needs a node and a command"
  read_layout
  local node=$1 pid
  shift
  node_index "$node" >/dev/null
  mapfile -t envs < <(env_args)
  if pid=$(slurmd_pid "$node"); then
    join "$pid" "${envs[@]}" "$@"
  else
    ns_start "$(node_ns "$node")" "$node" env "${envs[@]}" "$@"
  fi
}

rails_of() { # NODE [R]: the rails to act on
  if [ -n "${1:-}" ]; then
    [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -lt "$RAILS" ] || die "no rail '$1' (rails 0..$((RAILS - 1)))"
    printf '%s\n' "$1"
  else
    seq 0 $((RAILS - 1))
  fi
}

cmd_slow() {
  need_root slow
  read_layout
  local node=${1:?slow needs a node} rail="" rate=$DEFAULT_RATE r
  shift
  node_index "$node" >/dev/null
  while [ $# -gt 0 ]; do
    case "$1" in
      --rail) rail=${2:?--rail needs a number}; shift 2 ;;
      *) rate=$1; shift ;;
    esac
  done
  [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$ ]] || die "rate must look like 200mbit, got '$rate'"
  for r in $(rails_of "$rail"); do
    # Both directions: the node's egress on cl<r>, and the switch port's egress towards the node.
    nsenter --net="/run/netns/$(node_ns "$node")" -- tc qdisc replace dev "cl$r" root tbf rate "$rate" burst 64kb latency 50ms
    nsenter --net="/run/netns/$NS_SW" -- tc qdisc replace dev "p$r-$node" root tbf rate "$rate" burst 64kb latency 50ms
    log "$node rail $r (cl$r) shaped to $rate both ways"
  done
}

cmd_fast() {
  need_root fast
  read_layout
  local node=${1:?fast needs a node} r
  node_index "$node" >/dev/null
  for r in $(rails_of ""); do
    nsenter --net="/run/netns/$(node_ns "$node")" -- tc qdisc del dev "cl$r" root 2>/dev/null || true
    nsenter --net="/run/netns/$NS_SW" -- tc qdisc del dev "p$r-$node" root 2>/dev/null || true
  done
  log "$node: shaping removed on every rail"
}

cmd_kill() {
  need_root kill
  read_layout
  local node=${1:?kill needs a node} r
  node_index "$node" >/dev/null
  stop_pid slurmd "$STATE_DIR/nodes/$node/slurmd.pid"
  kill_ns_pids "$(node_ns "$node")"
  for r in $(rails_of ""); do ip -n "$NS_SW" link set "p$r-$node" down; done
  log "$node is dead: slurmd and its processes killed, links down"
}

cmd_revive() {
  need_root revive
  read_layout
  local node=${1:?revive needs a node} r
  node_index "$node" >/dev/null
  for r in $(rails_of ""); do ip -n "$NS_SW" link set "p$r-$node" up; done
  slurmd_pid "$node" >/dev/null || start_slurmd "$node"
  client scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
  wait_idle "$node"
  log "$node revived: $(node_state "$node")"
}

cmd_env() { read_layout; cat "$ENV_FILE"; }

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) shift; cmd_exec "$@" ;;
  on) shift; cmd_on "$@" ;;
  slow) shift; cmd_slow "$@" ;;
  fast) shift; cmd_fast "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  revive) shift; cmd_revive "$@" ;;
  env) cmd_env ;;
  _inner) shift; cmd_inner "$@" ;;
  -h | --help | help) usage 0 ;;
  *) usage 2 ;;
esac
