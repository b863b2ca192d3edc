#!/usr/bin/env bash
# Stop the daemons that .ci/slurm_up.sh started, by the PIDs it recorded (never by name). Safe to run when
# nothing was started. Jobs still running under slurmd are cancelled first.
set -uo pipefail

STATE=/run/zoomeval-ci-slurm
[ -f "$STATE/pids" ] || exit 0

active() { timeout 10 squeue -h -t PENDING,CONFIGURING,RUNNING,COMPLETING -o %i 2>/dev/null; }
jobs=$(active || true)
if [ -n "$jobs" ]; then
    # shellcheck disable=SC2086
    timeout 20 scancel $jobs 2>/dev/null
    for _ in $(seq 30); do
        [ -z "$(active || true)" ] && break
        sleep 0.5
    done
fi

# slurmd first, munged last (the SLURM daemons use it to authenticate to each other while stopping).
for name in slurmd slurmctld munged; do
    pid=$(awk -v n="$name" '$1 == n {print $2}' "$STATE/pids")
    [ -n "$pid" ] || continue
    # only a process of that name: the PID may have been reused after the daemon died by itself
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" != "$name" ]; then
        continue
    fi
    kill "$pid" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "slurm_down: $name ($pid) did not stop in 10 s; killing it" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
done
rm -f "$STATE/pids"
echo "slurm_down: stopped" >&2
