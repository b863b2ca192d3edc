#!/usr/bin/env bash
# Start a single-node SLURM (munged, slurmctld, slurmd) on this Debian machine, as root, for the tests marked
# `slurm` (tests/test_slurm.py, run through profiles/slurm-ci). Stop it with .ci/slurm_down.sh.
#
# The node "localhost" (127.0.0.1) in partition "debug" has the CPUs and memory of this machine and one fake GPU
# (gres gpu:1 backed by /dev/null, so a --gpus=1 job gets CUDA_VISIBLE_DEVICES=0 without any CUDA). There is no
# accounting database: sacct says "accounting storage is disabled" and job states come from squeue, which keeps
# finished jobs for MinJobAge=600 s.
#
# Exits non-zero with a message when SLURM cannot be installed or started; it never overwrites a slurm.conf that
# it did not write (a machine with its own SLURM is left alone).
set -euo pipefail

STATE=/run/zoomeval-ci-slurm        # PIDs of the daemons started here, read by slurm_down.sh
CONF=/etc/slurm/slurm.conf
MARKER="# written by zoomeval .ci/slurm_up.sh"
WAIT_SECONDS=${SLURM_UP_WAIT_SECONDS:-60}

say() { echo "slurm_up: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (it installs packages and starts daemons)"
    exit 1
fi

all_alive() {  # every daemon recorded in $STATE/pids still runs
    local name pid
    while read -r name pid; do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    done <"$STATE/pids"
}
if [ -f "$STATE/pids" ]; then
    if all_alive && sinfo -h -o %T 2>/dev/null | grep -qx idle; then
        say "already running (PIDs in $STATE/pids)"
        exit 0
    fi
    "$(dirname "$0")/slurm_down.sh"  # started here before but not working: start afresh
fi

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null \
    || ! command -v munged >/dev/null; then
    say "installing slurmctld slurmd slurm-client munge with apt-get"
    if ! { timeout 300 apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client munge; } >/tmp/zoomeval-slurm-apt.log 2>&1; then
        tail -n 20 /tmp/zoomeval-slurm-apt.log >&2 || true
        say "could not install the SLURM packages (log: /tmp/zoomeval-slurm-apt.log)"
        exit 1
    fi
fi

if [ -f "$CONF" ] && ! grep -qxF "$MARKER" "$CONF"; then
    say "$CONF exists and was not written by this script: not touching this machine's SLURM"
    exit 1
fi

# What slurmd will detect; configuring more than that marks the node INVAL. nproc can be lower than the online
# CPUs (affinity), never higher; the memory (`free -m`'s total, read where free reads it: procps may be absent)
# is given 5% below the total to stay under slurmd's own reading.
cpus=$(nproc)
mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 * 0.95)}' /proc/meminfo)

mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge "$STATE"
cat >"$CONF" <<EOF
$MARKER
ClusterName=ci
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
GresTypes=gpu
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb Gres=gpu:1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
cat >/etc/slurm/gres.conf <<EOF
$MARKER
NodeName=localhost Name=gpu File=/dev/null Count=1
EOF

# munge: the package's postinst creates the key; create one if it is missing.
if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown munge:munge /etc/munge/munge.key /run/munge
chmod 400 /etc/munge/munge.key
mkdir -p /var/log/munge /var/lib/munge
chown munge:munge /var/log/munge /var/lib/munge

: >"$STATE/pids"
started() {  # NAME PIDFILE: record the PID the daemon wrote
    local pid
    for _ in $(seq 50); do
        if [ -s "$2" ] && pid=$(cat "$2") && kill -0 "$pid" 2>/dev/null; then
            echo "$1 $pid" >>"$STATE/pids"
            return 0
        fi
        sleep 0.1
    done
    say "$1 did not start"
    return 1
}

start=$(date +%s)
rm -f /run/slurmctld.pid /run/slurmd.pid
if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "using the munged that is already running"
else
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    started munged /run/munge/munged.pid
fi
/usr/sbin/slurmctld -c  # -c: forget the jobs of an earlier run
started slurmctld /run/slurmctld.pid
/usr/sbin/slurmd -N localhost  # -N: the node name is not `hostname`
started slurmd /run/slurmd.pid

state=""
for _ in $(seq "$((WAIT_SECONDS * 2))"); do
    state=$(sinfo -h -o %T 2>/dev/null || true)
    [ "$state" = idle ] && break
    case "$state" in  # a node that had drained (e.g. an earlier gres error) is put back
        drain*|down*|inval*) scontrol update nodename=localhost state=resume 2>/dev/null || true ;;
    esac
    sleep 0.5
done
if [ "$state" != idle ]; then
    say "the node is '${state:-unknown}', not idle, after ${WAIT_SECONDS}s; last log lines:"
    tail -n 15 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
    exit 1
fi
say "node localhost idle (CPUs=$cpus RealMemory=$mem_mb gres gpu:1) after $(($(date +%s) - start))s"
