#!/usr/bin/env bash
# Speed of the simulator, as quoted in docs/speed.md (bench/speed.sh runs it): the engine's hold
# benchmark, a million-transaction run, the pgbouncer-modes scenario in
# process, and 'poolsim run pgbouncer-modes' as a whole process.
# Usage: bench/sim-speed.sh            (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "# $(go version), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
go test -run '^$' -bench 'Hold|Samples' -benchtime 2s ./sim | grep -E '^Benchmark'
go test -run '^$' -bench 'MillionTransactions' -benchmem -benchtime 3x ./models/system | grep -E '^Benchmark'
go test -run '^$' -bench 'PgbouncerModes' -benchmem ./scenarios | grep -E '^Benchmark'

go build -o "$tmp/poolsim" ./cmd/poolsim
runs=${RUNS:-21}
for _ in $(seq "$runs"); do
	s=$(date +%s%N)
	"$tmp/poolsim" run pgbouncer-modes >/dev/null
	e=$(date +%s%N)
	echo $(((e - s) / 1000))
done | sort -n | awk -v n="$runs" '{a[NR]=$1} END {printf "poolsim run pgbouncer-modes, whole process: median %.1f ms, max %.1f ms over %d runs\n", a[int((n+1)/2)]/1000, a[n]/1000, n}'
