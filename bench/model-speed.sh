#!/usr/bin/env bash
# Speed and memory of the whole model (issue 19), as quoted in docs/speed.md (bench/speed.sh runs it):
#   1. the speed scenario (bench/model-speed.yaml: 200 clients x 500
#      transactions x 6 statements through a transaction pooler) as a whole
#      process, beside the same run of bench/speedref, a minimal handler
#      over the same engine: both print their events, transactions and
#      virtual wall time, which must agree, and the ratio of their times is
#      the model's overhead over the bare engine;
#   2. events per second of the full model, as a whole process (CPU and
#      wall time) and in process (BenchmarkSpeedScenario);
#   3. peak memory (RSS) of the speed scenario at 10^5, 10^6 and 10^7
#      transactions: exact samples below sim.ExactLimit, histograms past it;
#   4. 1,000 sweep points x 10 replications of the stochastic built-in
#      prepared-statements-live on two workers;
#   5. with BASE=<commit>, the speed scenario as built at that commit beside
#      today's, in turn: the speedup of the whole process;
#   6. the Go benchmarks of the hot paths.
# The machine is shared: every time is a median of RUNS runs, the model and
# the reference run in turn, and the load average is printed at both ends.
# Usage: bench/model-speed.sh     (from anywhere; RUNS=5, SWEEP_RUNS=3; HUGE=0 leaves out 10^7; BASE=commit)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
runs=${RUNS:-5}
sweepRuns=${SWEEP_RUNS:-3}

echo "# $(go version), $(nproc) cores, load average $(cut -d" " -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo none)"
go build -o "$tmp/poolsim" ./cmd/poolsim
go build -o "$tmp/speedref" ./bench/speedref

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# timed OUT CMD...: runs CMD with its stdout to OUT and prints "wall_s cpu_s maxrss_kB".
timed() {
	local out=$1
	shift
	/usr/bin/time -f '%e %U %S %M' -o "$tmp/time" "$@" >"$out"
	awk '{printf "%s %.3f %s\n", $1, $2+$3, $4}' "$tmp/time"
}

# 1 and 2: the speed scenario and the reference, in turn.
model=("$tmp/poolsim" run bench/model-speed.yaml --format json --quiet)
echo "# poolsim run bench/model-speed.yaml   vs   go run ./bench/speedref"
for _ in $(seq "$runs"); do
	timed "$tmp/model.json" "${model[@]}" >>"$tmp/model.t"
	timed "$tmp/ref.txt" "$tmp/speedref" >>"$tmp/ref.t"
done
events=$(grep -o '"events": [0-9]*' "$tmp/model.json" | grep -o '[0-9]*$')
txns=$(grep -o '"ok_txns": [0-9]*' "$tmp/model.json" | grep -o '[0-9]*$')
wallms=$(grep -o '"wall_ms": [0-9.]*' "$tmp/model.json" | grep -o '[0-9.]*$')
cat "$tmp/ref.txt"
read -r rEvents rTxns rWall <<<"$(awk '{gsub(",",""); print $2, $4, $7}' "$tmp/ref.txt")"
if [ "$events" != "$rEvents" ] || [ "$txns" != "$rTxns" ] || [ "$(printf '%.3f' "$wallms")" != "$rWall" ]; then
	echo "the model ($events events, $txns transactions, wall $wallms ms) and the reference ($rEvents, $rTxns, $rWall) ran different runs" >&2
	exit 1
fi
echo "poolsim: $events events, $txns transactions, wall $wallms ms (virtual) - the same run as the reference"
mw=$(cut -d' ' -f1 "$tmp/model.t" | median); mc=$(cut -d' ' -f2 "$tmp/model.t" | median)
rw=$(cut -d' ' -f1 "$tmp/ref.t" | median); rc=$(cut -d' ' -f2 "$tmp/ref.t" | median)
awk -v mw="$mw" -v mc="$mc" -v rw="$rw" -v rc="$rc" -v n="$runs" -v ev="$events" 'BEGIN {
	printf "whole process, median of %d: poolsim %.2f s wall, %.2f s cpu; reference %.2f s wall, %.2f s cpu\n", n, mw, mc, rw, rc
	printf "poolsim / reference: %.2fx wall, %.2fx cpu\n", mw/rw, mc/rc
	printf "events per second of the full model: %.1f M by cpu time, %.1f M by wall time (whole process)\n", ev/mc/1e6, ev/mw/1e6
}'
go test -run '^$' -bench 'SpeedScenario' -benchtime 5x ./models/system | grep -E '^Benchmark'

# 3: memory against the run's length.
echo "# peak memory: poolsim run bench/model-speed.yaml --set workload.txns_per_session=N"
sizes=(500 5000)
if [ "${HUGE:-1}" != 0 ]; then sizes+=(50000); fi
for n in "${sizes[@]}"; do
	read -r w c kb <<<"$(timed "$tmp/size.csv" "$tmp/poolsim" run bench/model-speed.yaml --set "workload.txns_per_session=$n" --format csv --quiet --yes)"
	t=$(cut -d, -f2 "$tmp/size.csv" | tail -1)
	p99=$(awk -F, 'NR==1 {for (i=1;i<=NF;i++) if ($i=="p99_ms") k=i} NR==2 {print $k}' "$tmp/size.csv")
	awk -v t="$t" -v w="$w" -v c="$c" -v kb="$kb" -v p="$p99" 'BEGIN {printf "%9d transactions: peak RSS %4.0f MB, %6.2f s wall, %6.2f s cpu, p99_ms %s\n", t, kb/1024, w, c, p}'
done

# 4: a sweep of small stochastic runs on two workers.
sweep=("$tmp/poolsim" sweep prepared-statements-live --vary pooler.default_pool_size=1..40 --vary workload.clients=10,20,30,40,50
	--replications 10 --workers 2 --format csv --quiet)
echo "# ${sweep[*]#"$tmp/"}"
for _ in $(seq "$sweepRuns"); do
	timed "$tmp/sweep.csv" "${sweep[@]}" >>"$tmp/sweep.t"
done
points=$(($(wc -l <"$tmp/sweep.csv") - 1))
sw=$(cut -d' ' -f1 "$tmp/sweep.t" | median); sc=$(cut -d' ' -f2 "$tmp/sweep.t" | median)
awk -v p="$points" -v w="$sw" -v c="$sc" -v n="$sweepRuns" 'BEGIN {printf "%d points x 10 replications (%d runs): median of %d %.2f s wall, %.2f s cpu on 2 workers\n", p, p*10, n, w, c}'

# 5: against an earlier build.
if [ -n "${BASE:-}" ]; then
	mkdir "$tmp/base"
	git archive "$BASE" | tar -x -C "$tmp/base"
	(cd "$tmp/base" && go build -o "$tmp/poolsim-base" ./cmd/poolsim)
	echo "# poolsim run bench/model-speed.yaml built at $BASE and now, in turn"
	for _ in $(seq "$runs"); do
		timed "$tmp/base.json" "$tmp/poolsim-base" run bench/model-speed.yaml --format json --quiet >>"$tmp/base.t"
		timed "$tmp/now.json" "${model[@]}" >>"$tmp/now.t"
	done
	bw=$(cut -d' ' -f1 "$tmp/base.t" | median); bc=$(cut -d' ' -f2 "$tmp/base.t" | median)
	nw=$(cut -d' ' -f1 "$tmp/now.t" | median); nc=$(cut -d' ' -f2 "$tmp/now.t" | median)
	awk -v bw="$bw" -v bc="$bc" -v nw="$nw" -v nc="$nc" -v n="$runs" -v ev="$events" 'BEGIN {
		printf "median of %d: at BASE %.2f s wall, %.2f s cpu; now %.2f s wall, %.2f s cpu\n", n, bw, bc, nw, nc
		printf "now / BASE: %.2fx wall, %.2fx cpu; events per second by cpu time: %.1f M at BASE, %.1f M now\n", nw/bw, nc/bc, ev/bc/1e6, ev/nc/1e6
	}'
fi

# 6: the hot paths in process.
go test -run '^$' -bench 'Lanes|Hold/pending=100$|SamplesPastLimit' -benchtime 1s ./sim | grep -E '^Benchmark'
echo "# load average at the end $(cut -d" " -f1-3 /proc/loadavg)"
