#!/usr/bin/env bash
# Run the proxy's test suite several times in a row on a machine made busy
# on purpose: two processes burn a CPU each for the whole run. A test that
# passes here does not depend on the machine being idle (sleeps, absolute
# time limits, lucky scheduling).
#
# Usage: bench/stress-proxy.sh [PACKAGES...]   (from anywhere in the repository)
#
# PACKAGES defaults to ./proxy/... (the whole live half: pooler, launchers,
# load driver, probes, validate). Environment: RUNS (default 5), BURNERS
# (CPU-burning processes, default 2), RACE=1 adds -race, TESTFLAGS (extra
# flags for go test, e.g. "-run TestSlowReader"). Each run is a fresh
# `go test -count=1`; the script stops at the first failing run, prints
# its output and exits 1. It prints one line per run with its wall time.
# The burners are this script's children and are killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH

RUNS=${RUNS:-5} BURNERS=${BURNERS:-2} RACE=${RACE:-} TESTFLAGS=${TESTFLAGS:-}
case $RUNS in '' | *[!0-9]*) echo "$0: RUNS=$RUNS: expected a whole number" >&2; exit 2 ;; esac
case $BURNERS in '' | *[!0-9]*) echo "$0: BURNERS=$BURNERS: expected a whole number" >&2; exit 2 ;; esac
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./proxy/...)
flags=(-count=1)
[ -n "$RACE" ] && flags+=(-race)
# shellcheck disable=SC2206 # TESTFLAGS is split on purpose
[ -n "$TESTFLAGS" ] && flags+=($TESTFLAGS)

tmp=$(mktemp -d)
burners=()
cleanup() {
	for pid in "${burners[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# Compile first, so the runs measure the tests and not the build.
go test "${flags[@]}" -run '^$' "${pkgs[@]}" >/dev/null

for _ in $(seq "$BURNERS"); do
	(while :; do :; done) &
	burners+=($!)
done
echo "# go test ${flags[*]} ${pkgs[*]}: $RUNS runs, $BURNERS CPU burners, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"

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
