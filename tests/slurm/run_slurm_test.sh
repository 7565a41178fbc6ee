#!/usr/bin/env bash
# `nautilus tune --executor slurm` against a real single-node Slurm cluster started here.
#
# Usage: run_slurm_test.sh NAUTILUS NAUTILUS_RUNNER FAKE_LIBCUDA SOURCE_DIR   (CTest passes them)
#
# It writes a munge key, slurm.conf and gres.conf into a fresh temporary directory, starts
# munged, slurmctld and slurmd there (Debian's slurm-wlm and munge, installed by
# tools/install-deps.sh; ports chosen free, so several copies can run at once), waits until the
# node is idle, then tunes assets/specs/gemm.nt through Slurm with the runner's fake CUDA driver
# (profiler/testing/fake_libcuda.cpp) and checks the tuning database and the queue:
#
#   node        the device query runs on the node: the tuner's own environment has no GPU
#               (NAUTILUS_FAKE_CUDA_INIT_ERROR=100) and a TaskProlog gives the node's jobs a GPU
#               with driver 12.8, so the records carry the node's identity, not the submitter's;
#               the real nautilus-runner runs every candidate (the fake driver lacks the compiled
#               kernels: each record is the runner's load_error, its report came back);
#   results     a stand-in runner (times a function of the generated code, every third candidate
#               wrong) on a node with two fake GPUs: ok and wrong_results records, the best is
#               the fastest validated one, two jobs ran at once;
#   job dies    the job is cancelled under the runner: a recorded job_failed outcome;
#   node fails  the runner takes its node down (scontrol): a recorded job_failed (NODE_FAIL);
#   timeout     the runner hangs past --slurm-wait: a recorded timeout, the job cancelled;
#   Ctrl-C      SIGINT while jobs run: the tuner ends, its jobs are cancelled (scancel), nothing
#               is recorded for them.
#
# The GPU request is real: the node offers gres gpu:2 backed by two empty files (gres.conf File=),
# and every job asks for --gres=gpu:1 (the default), so Slurm's GPU accounting is exercised on a
# machine without GPUs. Every wait is bounded; the daemons are always stopped (trap). If they
# cannot start, the test fails and prints their logs.
set -uo pipefail

if (($# != 4)); then
  echo "usage: $0 NAUTILUS NAUTILUS_RUNNER FAKE_LIBCUDA SOURCE_DIR" >&2
  exit 2
fi
nautilus=$1
runner=$2
fake_driver=$3
source_dir=$4
spec="$source_dir/assets/specs/gemm.nt"
sizes=(-D M=12 -D N=10 -D K=24)
export PATH="$PATH:/usr/sbin:/sbin"

work=$(mktemp -d "${TMPDIR:-/tmp}/nautilus-slurm-test.XXXXXX") || exit 1
chmod 700 "$work"
started=()  # pid files of the daemons this test started

log() { echo "slurm-test: [${SECONDS}s] $*"; }

dump_logs() {
  for f in munged.log slurmctld.log slurmd.log; do
    if [[ -f "$work/$f" ]]; then
      echo "---- $f (last 40 lines) ----"
      tail -n 40 "$work/$f"
    fi
  done
}

fail() {
  echo "slurm-test: FAIL: $*"
  dump_logs
  exit 1
}

stop_daemons() {
  # Jobs first (only this cluster's: SLURM_CONF names it), so no job step outlives its slurmd.
  if [[ -n "${SLURM_CONF:-}" ]] && [[ -f "$work/slurmctld.pid" ]]; then
    timeout 10 scancel --user="$(id -u)" >/dev/null 2>&1
    for _ in $(seq 50); do
      [[ -z "$(timeout 5 squeue --noheader --states=PENDING,RUNNING,COMPLETING 2>/dev/null)" ]] && break
      sleep 0.1
    done
  fi
  local pidfile pid
  for pidfile in "${started[@]}"; do
    [[ -f "$pidfile" ]] || continue
    pid=$(cat "$pidfile")
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
  done
  # A job step whose node "failed" can outlive its slurmd; this cluster's run in $work.
  local proc
  for proc in /proc/[0-9]*; do
    [[ "$(readlink "$proc/cwd" 2>/dev/null)" == "$work"* ]] || continue
    [[ "$(cat "$proc/comm" 2>/dev/null)" == slurmstepd ]] || continue
    kill -KILL "${proc#/proc/}" 2>/dev/null
  done
}

cleanup() {
  local status=$?
  stop_daemons
  if [[ -n "${NAUTILUS_KEEP_SLURM_TEST:-}" ]]; then
    log "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for command in munged slurmctld slurmd sbatch squeue scancel sinfo scontrol; do
  command -v "$command" >/dev/null ||
    fail "'$command' not found: install Slurm and munge (tools/install-deps.sh installs slurmctld, slurmd, slurm-client and munge)"
done

# Two free TCP ports (nothing answers on them); several runs of this test can share the machine.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
ports=()
base=$((20000 + ($$ * 7 + RANDOM) % 20000))
for ((p = base; p < base + 400 && ${#ports[@]} < 2; ++p)); do
  port_free "$p" && ports+=("$p")
done
((${#ports[@]} == 2)) || fail "no free TCP port near $base"

host=$(hostname -s)
user=$(id -un)

# munge: a private key and socket.
dd if=/dev/urandom of="$work/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge.key"
started+=("$work/munged.pid")
munged --force --socket="$work/munge.sock" --key-file="$work/munge.key" \
  --log-file="$work/munged.log" --pid-file="$work/munged.pid" --seed-file="$work/munged.seed" ||
  fail "munged did not start"

mkdir -p "$work/state" "$work/spool" "$work/shared"
: > "$work/fake-gpu0"
: > "$work/fake-gpu1"
# The node's jobs see a GPU with driver 12.8 even though the submitting environment has none.
cat > "$work/task_prolog.sh" <<PROLOG
#!/bin/sh
echo "unset NAUTILUS_FAKE_CUDA_INIT_ERROR"
echo "export NAUTILUS_FAKE_CUDA_DRIVER_VERSION=12080"
PROLOG
chmod 755 "$work/task_prolog.sh"
cat > "$work/slurm.conf" <<CONF
ClusterName=nautilus-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$work/munge.sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmdDebug=info
ProctrackType=proctrack/pgid
TaskPlugin=task/none
TaskProlog=$work/task_prolog.sh
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 Gres=gpu:2 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$work/gres.conf" <<CONF
NodeName=$host Name=gpu File=$work/fake-gpu0
NodeName=$host Name=gpu File=$work/fake-gpu1
CONF
export SLURM_CONF="$work/slurm.conf"
started+=("$work/slurmd.pid" "$work/slurmctld.pid")
slurmctld -i -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" || fail "slurmd did not start"

state=""
for _ in $(seq 150); do
  state=$(timeout 5 sinfo --noheader --format=%T 2>/dev/null)
  [[ "$state" == idle ]] && break
  sleep 0.1
done
[[ "$state" == idle ]] || fail "the node is not idle after 15 s (sinfo: '$state')"
log "cluster up on ports ${ports[*]} in $work"

# ---------------------------------------------------------------------------------------------
# Helpers.

# tune DB [ARGS...]: nautilus tune through Slurm, bounded; output in $work/out.txt.
tune() {
  local db=$1
  shift
  timeout 60 "$nautilus" tune "$spec" "${sizes[@]}" --db "$work/$db" --driver "$fake_driver" \
    --executor slurm --slurm-dir "$work/shared" --slurm-partition test "$@" > "$work/out.txt" 2>&1
}

# field DB NAME: the values of NAME in every measured record of DB, one a line (the export's
# records open with " {" and close with " }"; their fields are indented by exactly two spaces, a
# kernel's deeper). Records of schedules not run because their code is another record's
# (duplicate_of set) are left out: they are not measurements.
field() {
  "$nautilus" db export --format json --db "$work/$1" 2>/dev/null |
    awk -v key="\"$2\":" '
      /^ \{/ { has = 0; duplicate = 0 }
      /^  "/ && $1 == key { has = 1; value = $0; sub(/^  "[^"]*": /, "", value) }
      /^  "duplicate_of": / { duplicate = ($2 !~ /^null/) }
      /^ \}/ { if (has && !duplicate) print value }' |
    sed 's/,$//; s/^"//; s/"$//'
}

count_field() { field "$1" "$2" | grep -c -x -- "$3"; }

active_jobs() { timeout 5 squeue --noheader --states=PENDING,RUNNING,COMPLETING 2>/dev/null | wc -l; }

# A stand-in runner: the device query goes to the real runner; a run does what $work/mode says.
#   results  a validated time of 10 + (cksum of kernel.cu mod 90) µs, wrong results when the
#            checksum is divisible by 3; notes its job and the time in calls.txt
#   die      cancels its own job and waits
#   nodefail takes its node down and waits
#   hang     sleeps far past any wait
cat > "$work/runner.sh" <<RUNNER
#!/bin/sh
if [ "\$1" = --devices ]; then exec "$runner" "\$@"; fi
mode=\$(cat "$work/mode")
case "\$mode" in
  die) scancel "\$SLURM_JOB_ID"; sleep 60; exit 0 ;;
  nodefail) scontrol update NodeName="\$SLURMD_NODENAME" State=DOWN Reason=nautilus-test; sleep 60; exit 0 ;;
  hang) sleep 120; exit 0 ;;
esac
sum=\$(cksum < "\$1/kernel.cu" | cut -d' ' -f1)
us=\$(( 10 + sum % 90 ))
echo "\$SLURM_JOB_ID \$(date +%s.%N) start" >> "$work/calls.txt"
sleep 1
echo "\$SLURM_JOB_ID \$(date +%s.%N) end" >> "$work/calls.txt"
if [ \$(( sum % 3 )) -eq 0 ]; then
  echo '{"format": "nautilus-runner-report", "version": 1, "status": "wrong_results", "validation": {"status": "failed", "passed": false, "max_relative_error": 0.5}, "errors": [{"kind": "wrong_results", "message": "C differs from the reference"}]}'
  exit 1
fi
echo "{\"format\": \"nautilus-runner-report\", \"version\": 1, \"status\": \"ok\", \"device\": {\"name\": \"Nautilus Fake GPU 0\", \"sm_count\": 132}, \"timing\": {\"kernels\": [{\"name\": \"gemm_C\", \"median_us\": \$us, \"min_us\": \$us, \"max_us\": \$us}], \"total\": {\"median_us\": \$us, \"min_us\": \$us, \"max_us\": \$us}}, \"validation\": {\"status\": \"passed\", \"passed\": true, \"max_relative_error\": 0.001}, \"errors\": []}"
RUNNER
chmod 755 "$work/runner.sh"

# The submitting host has no GPU in every scenario: only the node's answer can name one.
export NAUTILUS_FAKE_CUDA_INIT_ERROR=100

# ---------------------------------------------------------------------------------------------
log "node: the real runner on the node, the node's identity"
tune node.db --budget 3 --runner "$runner"
status=$?
[[ $status == 1 ]] || fail "node: expected exit status 1 (nothing validated), got $status: $(cat "$work/out.txt")"
grep -q "3 measured" "$work/out.txt" || fail "node: 3 candidates not measured: $(cat "$work/out.txt")"
[[ $(count_field node.db status load_error) == 3 ]] ||
  fail "node: expected 3 load_error records, got: $(field node.db status | tr '\n' ' ') $(field node.db message | head -n 3)"
[[ $(count_field node.db device_name "Nautilus Fake GPU 0") == 3 ]] || fail "node: device name: $(field node.db device_name)"
[[ $(count_field node.db driver_version 12080) == 3 ]] ||
  fail "node: the records do not carry the node's driver (12080): $(field node.db driver_version | tr '\n' ' ')"
grep -q "named symbol not found" <(field node.db message) || fail "node: no runner report came back: $(field node.db message)"

log "results: ok and wrong results from two GPUs at once"
echo results > "$work/mode"
tune results.db --budget 6 --slurm-jobs 4 --runner "$work/runner.sh"
status=$?
[[ $status == 0 ]] || fail "results: exit status $status: $(cat "$work/out.txt")"
grep -q "6 measured" "$work/out.txt" || fail "results: $(cat "$work/out.txt")"
ok=$(count_field results.db status ok)
wrong=$(count_field results.db status wrong_results)
((ok >= 1 && ok + wrong == 6)) || fail "results: $ok ok and $wrong wrong_results of 6: $(field results.db status | tr '\n' ' ')"
[[ $(count_field results.db validation failed) == "$wrong" ]] || fail "results: validation of wrong results"
best=$(field results.db median_us | grep -v null | sort -g | head -n 1)
grep -q "best: $(printf '%.1f' "$best") µs" "$work/out.txt" ||
  fail "results: the best reported is not the fastest validated ($best): $(grep best: "$work/out.txt")"
# Two jobs overlapped: some start came before the previous end (the node has two GPUs).
overlap=$(sort -k2 -g "$work/calls.txt" | awk '$3 == "start" {n++; if (n > max) max = n} $3 == "end" {n--} END {print max}')
((overlap >= 2)) || fail "results: no two jobs ran at once: $(cat "$work/calls.txt")"

log "job dies: cancelled under the runner"
echo die > "$work/mode"
tune die.db --budget 2 --runner "$work/runner.sh"
[[ $(count_field die.db status job_failed) == 2 ]] || fail "die: $(field die.db status | tr '\n' ' ') $(cat "$work/out.txt")"
grep -q "ended CANCELLED" <(field die.db message) || fail "die: message: $(field die.db message)"

log "node fails: the runner takes its node down"
echo nodefail > "$work/mode"
tune nodefail.db --budget 1 --runner "$work/runner.sh" --slurm-arg=--no-requeue
[[ $(count_field nodefail.db status job_failed) == 1 ]] || fail "nodefail: $(field nodefail.db status) $(cat "$work/out.txt")"
grep -q "ended NODE_FAIL" <(field nodefail.db message) || fail "nodefail: message: $(field nodefail.db message)"
# The node may come back by itself (ReturnToService=2, slurmd registers again); else resume it.
for _ in $(seq 100); do
  state=$(timeout 5 sinfo --noheader --format=%T 2>/dev/null)
  [[ "$state" == idle ]] && break
  [[ "$state" == down* ]] && timeout 10 scontrol update NodeName="$host" State=RESUME >/dev/null 2>&1
  sleep 0.1
done
[[ "$state" == idle ]] || fail "nodefail: the node did not come back (sinfo: '$state')"

log "timeout: a runner that hangs past --slurm-wait"
echo hang > "$work/mode"
tune hang.db --budget 1 --slurm-wait 3s --runner "$work/runner.sh"
[[ $(count_field hang.db status timeout) == 1 ]] || fail "hang: $(field hang.db status) $(cat "$work/out.txt")"
grep -q "gave no result within 3 s" <(field hang.db message) || fail "hang: message: $(field hang.db message)"
for _ in $(seq 50); do [[ $(active_jobs) == 0 ]] && break; sleep 0.1; done
[[ $(active_jobs) == 0 ]] || fail "hang: the job was not cancelled: $(squeue)"

log "Ctrl-C: the jobs in flight are cancelled"
"$nautilus" tune "$spec" "${sizes[@]}" --db "$work/interrupt.db" --driver "$fake_driver" \
  --executor slurm --slurm-dir "$work/shared" --budget 4 --slurm-jobs 2 \
  --runner "$work/runner.sh" > "$work/out.txt" 2>&1 &
pid=$!
running=0
for _ in $(seq 150); do
  running=$(timeout 5 squeue --noheader --states=RUNNING --name=nautilus-tune-gemm 2>/dev/null | wc -l)
  ((running >= 1)) && break
  sleep 0.1
done
# At least one job: the first batch's other candidates lower to the first one's code (GEMM's
# leaves differ by launch decisions that change nothing at these sizes), so they are recorded as
# its duplicates without a job of their own.
((running >= 1)) || { kill -KILL $pid; fail "Ctrl-C: the jobs did not start: $(squeue)"; }
kill -INT $pid
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then
  kill -KILL $pid
  fail "Ctrl-C: the tuner did not end within 10 s of SIGINT"
fi
wait $pid
grep -q "interrupted" "$work/out.txt" || fail "Ctrl-C: $(cat "$work/out.txt")"
for _ in $(seq 50); do [[ $(active_jobs) == 0 ]] && break; sleep 0.1; done
[[ $(active_jobs) == 0 ]] || fail "Ctrl-C: jobs left in the queue: $(squeue)"
[[ -z $(field interrupt.db status) ]] || fail "Ctrl-C: cancelled candidates were recorded: $(field interrupt.db status)"

log "all passed"
