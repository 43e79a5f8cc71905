#!/usr/bin/env bash
# A real two-node Slurm cluster on this machine, for `make test-slurm`:
#   tests/slurm/cluster.sh start   installs Slurm and munge if missing (root, apt),
#                                  starts munged, slurmctld and two slurmd (n1, n2)
#   tests/slurm/cluster.sh stop    cancels every job, stops what `start` started, by
#                                  its own pid files, and leaves nothing running
# Everything lives under $DDPGEN_SLURM_DIR (default /tmp/ddpgen-slurm); clients use
# it through SLURM_CONF=$DDPGEN_SLURM_DIR/slurm.conf.
set -euo pipefail

DIR=${DDPGEN_SLURM_DIR:-/tmp/ddpgen-slurm}
CONF=$DIR/slurm.conf
HOST=$(hostname)
export SLURM_CONF=$CONF

install_slurm() {
  if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "Slurm is not installed and this is not root: apt-get install slurm-wlm munge" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/jobs"
  cat >"$CONF" <<EOF
ClusterName=ddpgen-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=16817
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd-%n.log
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=60
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
GresTypes=gpu
NodeName=n[1-2] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=17001-17002 CPUs=1 State=UNKNOWN
PartitionName=test Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
EOF
  grep -qE '^127\.0\.0\.1[[:space:]].*\bn1\b' /etc/hosts || echo "127.0.0.1 n1 n2" >>/etc/hosts
}

start_munge() {
  if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    return  # a munged is already serving: not ours to stop
  fi
  mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  fi
  munged --force --pid-file="$DIR/munged.pid"
}

wait_for_nodes() {
  for _ in $(seq 1 60); do
    if [ "$(sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^idle$')" = 2 ]; then
      return
    fi
    sleep 1
  done
  echo "the Slurm nodes did not come up; logs in $DIR" >&2
  sinfo -N >&2 || true
  exit 1
}

start() {
  install_slurm
  stop_daemons
  rm -rf "$DIR/state" "$DIR/spool"
  write_config
  start_munge
  slurmctld -f "$CONF"
  slurmd -f "$CONF" -N n1
  slurmd -f "$CONF" -N n2
  wait_for_nodes
  echo "Slurm: 2 nodes up (SLURM_CONF=$CONF)"
}

stop_by_pid_file() {
  local file=$1
  [ -s "$file" ] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

stop_daemons() {
  stop_by_pid_file "$DIR/slurmd-n1.pid"
  stop_by_pid_file "$DIR/slurmd-n2.pid"
  stop_by_pid_file "$DIR/slurmctld.pid"
  stop_by_pid_file "$DIR/munged.pid"
}

stop() {
  if [ -f "$CONF" ] && [ -s "$DIR/slurmctld.pid" ]; then
    scancel --full --quiet --partition=test 2>/dev/null || true
  fi
  stop_daemons
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
