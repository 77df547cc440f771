#!/usr/bin/env bash
# slurm-check.sh — opt-in check of bench/slurm/suite.sbatch on a real Slurm:
# a single-node cluster on this machine (localhost), a 2-task job array
# running a tiny suite, the shards merged as bench/slurm/README.md says, and
# every record checked. Not part of `meson test` or scripts/test.sh.
#
#   tests/slurm-check.sh [LOG]        as root on Debian 12
#
# It installs Debian's slurm-wlm and munge (apt-get, when missing), builds
# deqbench (scripts/setup.sh), writes a munge key and a minimal slurm.conf
# into a temporary directory (state, spool, logs and pid files there too:
# nothing under /etc is changed), starts munged, slurmctld and slurmd
# directly (no systemd needed: a container works), runs
#   sbatch --array=0-1 --wait ... bench/slurm/suite.sbatch tests/fixtures/slurm-tiny.json
# merges the two shard files, and checks: every run of the suite's dry run
# has exactly one record, every record has status ok, no suite.index twice,
# and `deqbench validate --strict` passes. The daemons it started are
# stopped on exit. Output goes to the terminal and to LOG (default
# results/slurm/slurm-check.log). Exit 0 when every check passed.
#
# Slurm setup: ProctrackType=proctrack/linuxproc, TaskPlugin=task/none and
# no accounting, so no cgroups are needed; SelectType=select/cons_tres;
# NodeName=localhost CPUs=2 with RealMemory from `slurmd -C`; SlurmUser and
# the jobs run as root; ports SLURMCTLD_PORT (default 6817) and
# SLURMD_PORT (6818) on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
log="${1:-results/slurm/slurm-check.log}"
suite=tests/fixtures/slurm-tiny.json
ntasks=2

if [ "$(id -u)" -ne 0 ]; then
	echo "slurm-check: run as root: it installs slurm-wlm and munge and" \
		"starts their daemons" >&2
	exit 2
fi
mkdir -p "$(dirname "$log")"
exec > >(tee "$log") 2>&1

step() { echo; echo "== $*"; }
fail() { echo "slurm-check: FAIL: $*"; exit 1; }

step "slurm-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release; echo "$PRETTY_NAME"), $(uname -r))"
echo "repository: $(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD 2>/dev/null || echo -dirty)"

step "packages"
pkgs=(slurm-wlm munge)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if ((${#missing[@]})); then
	echo "installing ${missing[*]}"
	apt-get update -qq
	# policy-rc.d (containers) or a missing init keeps the services
	# from starting here; this script starts its own daemons below
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends "${missing[@]}" >/dev/null
fi
dpkg-query -W -f='${Package} ${Version}\n' slurm-wlm slurmctld slurmd \
	slurm-client munge

step "build"
nice scripts/setup.sh
deqbench="$root/build/bench/deqbench"
"$deqbench" --version

tmp="$(mktemp -d /tmp/deqbench-slurm.XXXXXX)"
chmod 0755 "$tmp"
pids=()
cleanup() {
	local rc=$?
	step "stopping the daemons this script started"
	# jobs of this private cluster only (SLURM_CONF is its slurm.conf)
	[ -n "${SLURM_CONF:-}" ] && scancel --user=root 2>/dev/null
	for ((k = ${#pids[@]} - 1; k >= 0; k--)); do
		pid="${pids[k]}"
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
			echo "stopped pid $pid"
		fi
	done
	step "daemon logs"
	for f in "$tmp"/slurmctld.log "$tmp"/slurmd.log "$tmp"/munge/munged.log; do
		[ -f "$f" ] || continue
		echo "--- $f"
		cat "$f"
	done
	rm -rf "$tmp"
	echo "slurm-check: exit $rc"
}
trap cleanup EXIT

step "munge ($tmp/munge)"
mkdir -p "$tmp/munge"
chmod 0755 "$tmp/munge" # clients need to reach the socket
mungekey --create --keyfile="$tmp/munge/munge.key"
socket="$tmp/munge/munge.socket"
# in the foreground munged logs to stderr, not to --log-file
munged --foreground --force --socket="$socket" \
	--key-file="$tmp/munge/munge.key" --log-file="$tmp/munge/munged.log" \
	--pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge/munged.seed" \
	>"$tmp/munge/munged.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
	[ -S "$socket" ] && break
	sleep 0.1
done
munge --socket="$socket" -n | unmunge --socket="$socket" | grep STATUS

step "slurm.conf"
mem="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
mem=$((mem * 9 / 10))
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF="$tmp/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=deqbench-check
SlurmctldHost=localhost
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=$mem State=UNKNOWN
PartitionName=check Nodes=localhost Default=YES MaxTime=60 State=UP
EOF
cat "$SLURM_CONF"
sbatch --version

step "slurmctld, slurmd"
# in the foreground (-D) as background jobs of this script, so their pids
# are known; their logs go to the files of slurm.conf (shown at the end)
slurmctld -D -i >/dev/null 2>&1 &
pids+=($!)
slurmd -D -N localhost >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do
	state="$(sinfo -h -n localhost -o %T 2>/dev/null || true)"
	[ "$state" = idle ] && break
	sleep 0.2
done
sinfo
[ "$state" = idle ] || {
	tail -20 "$tmp/slurmctld.log" "$tmp/slurmd.log"
	fail "node localhost is '$state', not idle"
}

runs="$("$deqbench" suite "$suite" --dry-run | tail -1 | cut -d' ' -f1)"
name="$(basename "$suite" .json)"

# run_array SPEC DIR: the suite as the job array SPEC (2 tasks) with the
# shards in DIR, merged and checked as bench/slurm/README.md says.
run_array() {
	local spec="$1" shards="$2" rc merged="$2/merged.jsonl"
	step "sbatch --array=$spec --wait bench/slurm/suite.sbatch $suite"
	echo "the dry run lists $runs runs"
	# resources for this machine instead of the script's cluster
	# defaults; the job's output files in $tmp
	set +e
	OUT_DIR="$shards" sbatch --array="$spec" --wait \
		--cpus-per-task=1 --mem=1G --time=00:10:00 \
		--output="$tmp/job-%A_%a.out" \
		bench/slurm/suite.sbatch "$suite"
	rc=$?
	set -e
	echo "sbatch --wait exited $rc"
	for f in "$tmp"/job-*.out; do
		echo "--- $(basename "$f")"
		cat "$f"
		rm "$f"
	done
	scontrol show job | grep -E 'JobId=|JobState=' | sed 's/^ */  /'
	[ "$rc" -eq 0 ] || fail "sbatch --wait exited $rc"

	step "merge and check the records of --array=$spec"
	ls -l "$shards"
	cat "$shards/$name".shard-*-of-$ntasks.jsonl >"$merged"
	wc -l <"$merged"
	"$deqbench" report "$merged"
	python3 - "$merged" "$runs" <<'EOF'
import json, sys
path, runs = sys.argv[1], int(sys.argv[2])
recs = [json.loads(l) for l in open(path) if l.strip()]
idx = sorted(r["suite"]["index"] for r in recs)
bad = [r["suite"]["index"] for r in recs if r["status"] != "ok"]
print(f"{len(recs)} records, suite.index {idx}, statuses "
      f"{sorted(set(r['status'] for r in recs))}")
assert len(recs) == runs, f"{len(recs)} records for {runs} runs"
assert idx == list(range(runs)), f"indices {idx}: a run missing or twice"
assert not bad, f"runs {bad} not ok"
print("every run once, every record ok")
EOF
	"$deqbench" validate --strict "$merged"
}

# the array as bench/slurm/README.md shows it, then one whose indices
# neither start at 0 nor follow each other (tasks 1 and 3)
run_array "0-$((ntasks - 1))" "$tmp/shards"
run_array "1-3:2" "$tmp/shards-stepped"
cp "$tmp/shards/merged.jsonl" "$(dirname "$log")/$name.jsonl"

echo
echo "slurm-check: PASS ($runs runs in $ntasks array tasks)"
