#!/usr/bin/env bash
# Speed of 'poolsim sweep' on 1,000 points of pgbouncer-modes (250 client
# counts x 4 modes), as quoted in docs/speed.md (bench/speed.sh runs it): the whole process with one
# worker and with two, the speedup, and the in-process Go benchmark.
# Usage: bench/sweep-speed.sh            (from anywhere; RUNS=5 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# $(go version), $(nproc) cores, load average $(cut -d" " -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
go build -o "$tmp/poolsim" ./cmd/poolsim
args=(sweep pgbouncer-modes --vary workload.clients=1..250 --vary pooler.mode=direct,session,transaction,statement --format csv)
echo "# poolsim ${args[*]}"
"$tmp/poolsim" "${args[@]}" --workers 1 >"$tmp/w1.csv"
"$tmp/poolsim" "${args[@]}" --workers 2 >"$tmp/w2.csv"
cmp -s "$tmp/w1.csv" "$tmp/w2.csv" || { echo "workers=1 and workers=2 outputs differ" >&2; exit 1; }
echo "points: $(($(wc -l <"$tmp/w1.csv") - 1)); outputs with 1 and 2 workers are byte-identical"

runs=${RUNS:-5}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_ms() { # workers -> median wall ms over $runs runs; also prints cpu%
	local w=$1
	for _ in $(seq "$runs"); do
		/usr/bin/env time -f '%e %U %S' -o "$tmp/t" "$tmp/poolsim" "${args[@]}" --workers "$w" >/dev/null 2>/dev/null || {
			s=$(date +%s%N); "$tmp/poolsim" "${args[@]}" --workers "$w" >/dev/null; e=$(date +%s%N)
			echo "$(((e - s) / 1000000)) 0"; continue; }
		awk '{printf "%d %d\n", $1*1000, ($2+$3)*1000}' "$tmp/t"
	done
}
for w in 1 2; do
	time_ms "$w" >"$tmp/r$w"
	wall=$(cut -d' ' -f1 "$tmp/r$w" | median)
	cpu=$(cut -d' ' -f2 "$tmp/r$w" | median)
	echo "workers=$w: median wall ${wall} ms, cpu ${cpu} ms over $runs runs"
	echo "$wall" >"$tmp/m$w"
done
awk -v a="$(cat "$tmp/m1")" -v b="$(cat "$tmp/m2")" 'BEGIN {printf "speedup workers=2 vs workers=1: %.2fx\n", a/b}'
go test -run '^$' -bench 'Sweep1000' -benchtime 3x ./cmd/poolsim | grep -E '^Benchmark'
