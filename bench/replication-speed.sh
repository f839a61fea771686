#!/usr/bin/env bash
# Speed of replications, as quoted in docs/speed.md (bench/speed.sh runs it): 'poolsim run erlang-c'
# (a stochastic built-in: Poisson arrivals, exponential statements) with
# REPS replications (default 40, plus the 5 pilot runs of its automatic
# warm-up), as a whole process with one worker and with two: replications
# per second for each, their ratio, and a check that the two outputs are
# byte-identical.
# Usage: bench/replication-speed.sh      (from anywhere; RUNS=5, REPS=40 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

reps=${REPS:-40}
runs=${RUNS:-5}
echo "# $(go version), $(nproc) cores, load average $(cut -d" " -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
go build -o "$tmp/poolsim" ./cmd/poolsim
args=(run erlang-c --replications "$reps" --format json --quiet)
echo "# poolsim ${args[*]} --workers 1|2"
"$tmp/poolsim" "${args[@]}" --workers 1 >"$tmp/w1.json"
"$tmp/poolsim" "${args[@]}" --workers 2 >"$tmp/w2.json"
cmp -s "$tmp/w1.json" "$tmp/w2.json" || { echo "workers=1 and workers=2 outputs differ" >&2; exit 1; }
echo "replications: $reps (+5 pilot runs); outputs with 1 and 2 workers are byte-identical"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for w in 1 2; do
	for _ in $(seq "$runs"); do
		s=$(date +%s%N)
		"$tmp/poolsim" "${args[@]}" --workers "$w" >/dev/null
		e=$(date +%s%N)
		echo $(((e - s) / 1000000))
	done >"$tmp/r$w"
	wall=$(median <"$tmp/r$w")
	awk -v w="$w" -v ms="$wall" -v n="$reps" -v runs="$runs" 'BEGIN {printf "workers=%d: median wall %d ms over %d runs, %.1f replications/s\n", w, ms, runs, n*1000/ms}'
	echo "$wall" >"$tmp/m$w"
done
awk -v a="$(cat "$tmp/m1")" -v b="$(cat "$tmp/m2")" 'BEGIN {printf "speedup workers=2 vs workers=1: %.2fx\n", a/b}'
