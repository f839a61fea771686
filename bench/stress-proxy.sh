#!/usr/bin/env bash
# Run the proxy's test suite several times in a row on a machine made busy
# on purpose: two processes burn a CPU each for the whole run. A test that
# passes here does not depend on the machine being idle (sleeps, absolute
# time limits, lucky scheduling).
#
# Usage: bench/stress-proxy.sh [--burn COMMAND]... [PACKAGES...]
#        (from anywhere in the repository)
#
# PACKAGES defaults to ./proxy/... ./lab/... (the whole live half: the
# pooler, and the lab's launchers, load driver, probes and validate).
# Environment: RUNS (default 5), BURNERS (CPU-burning processes, default
# 2), RACE=1 adds -race, TESTFLAGS (extra flags for go test, e.g. "-run
# TestSlowReader"). Each run is a fresh
# `go test -count=1`; the script stops at the first failing run, prints
# its output and exits 1. It prints one line per run with its wall time.
# --burn gives a burner useful work: it runs COMMAND (a shell command
# line; its output is printed if it fails) and burns the CPU only once
# that ends, so that CPU-bound work that has to run anyway keeps the CPU
# busy (CI: the model's tests). There are at least as many burners as
# --burn commands; the script waits for every COMMAND to end and exits 1
# if one failed. The burners are this script's children, each in a
# process group of its own, and are killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

RUNS=${RUNS:-5} BURNERS=${BURNERS:-2} RACE=${RACE:-} TESTFLAGS=${TESTFLAGS:-}
case $RUNS in '' | *[!0-9]*) echo "$0: RUNS=$RUNS: expected a whole number" >&2; exit 2 ;; esac
case $BURNERS in '' | *[!0-9]*) echo "$0: BURNERS=$BURNERS: expected a whole number" >&2; exit 2 ;; esac
burn_cmds=()
while [ $# -gt 0 ] && [ "$1" = --burn ]; do
	[ $# -ge 2 ] || { echo "$0: --burn needs a COMMAND" >&2; exit 2; }
	burn_cmds+=("$2")
	shift 2
done
[ "$BURNERS" -ge ${#burn_cmds[@]} ] || BURNERS=${#burn_cmds[@]}
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./proxy/... ./lab/...)
flags=(-count=1)
[ -n "$RACE" ] && flags+=(-race)
# shellcheck disable=SC2206 # TESTFLAGS is split on purpose
[ -n "$TESTFLAGS" ] && flags+=($TESTFLAGS)

tmp=$(mktemp -d)
burners=()
cleanup() {
	for pid in "${burners[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# Compile first, so the runs measure the tests and not the build.
go test "${flags[@]}" -run '^$' "${pkgs[@]}" >/dev/null

# Burner i runs --burn command i first, if there is one (its status in
# $tmp/burn-i.rc), then spins.
for i in $(seq 0 $((BURNERS - 1))); do
	cmd=${burn_cmds[$i]:-true}
	# shellcheck disable=SC2016 # expanded by the burner's shell
	setsid bash -c '(eval "$1") >"$2.out" 2>&1; echo $? >"$2.rc"; while :; do :; done' burner "$cmd" "$tmp/burn-$i" &
	burners+=($!)
done
echo "# go test ${flags[*]} ${pkgs[*]}: $RUNS runs, $BURNERS CPU burners (${#burn_cmds[@]} of them running a command first), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

for run in $(seq "$RUNS"); do
	start=$(date +%s)
	if ! go test "${flags[@]}" "${pkgs[@]}" >"$tmp/out" 2>&1; then
		grep -v '^ok ' "$tmp/out" || true
		echo "run $run of $RUNS FAILED after $(($(date +%s) - start)) s"
		exit 1
	fi
	echo "run $run of $RUNS passed in $(($(date +%s) - start)) s"
done
echo "all $RUNS runs passed"
# The burners' commands: wait for each to end, and fail if one failed.
failed=0
for i in "${!burn_cmds[@]}"; do
	while [ ! -s "$tmp/burn-$i.rc" ]; do sleep 1; done
	rc=$(cat "$tmp/burn-$i.rc")
	if [ "$rc" != 0 ]; then
		cat "$tmp/burn-$i.out"
		echo "burner command FAILED (status $rc): ${burn_cmds[$i]}"
		failed=1
	else
		grep -E '^(ok|---)' "$tmp/burn-$i.out" || true
		echo "burner command passed: ${burn_cmds[$i]}"
	fi
done
exit "$failed"
