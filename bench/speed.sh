#!/usr/bin/env bash
# The figures of docs/speed.md: runs the speed scripts in turn and rewrites
# the block between docs/speed.md's "speed figures" markers with their
# output, the commit, the date and the load average before and after each
# script (the machine may be shared: read the ratios each script prints
# between runs of one invocation, not the absolute seconds).
#
#   bench/model-speed.sh        the whole model against bench/speedref (the
#                               same run on the bare engine), peak memory,
#                               1,000 points x 10 replications, and the
#                               build of BASE against this one
#   bench/sim-speed.sh          the engine's and the model's Go benchmarks
#   bench/sweep-speed.sh        a 1,000-point sweep, one worker against two
#   bench/replication-speed.sh  40 replications, one worker against two
#   bench/proxy-vs-pgbouncer.sh poolsim proxy against PgBouncer, interleaved
#                               rounds, CPU per transaction (PERF=1)
#
# Usage: bench/speed.sh [--print]   (from anywhere; --print writes the block
#        to stdout and leaves docs/speed.md alone)
# Environment: BASE (the earlier build model-speed.sh compares with; default
# fc36f99, where the previous figures were taken), PROXY_ROUNDS (4),
# SKIP_PROXY=1 leaves out the proxy (no PostgreSQL or PgBouncer needed).
# Takes about ten minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/go/bin:$PATH
doc=docs/speed.md
begin='<!-- speed figures: begin (bash bench/speed.sh rewrites this block) -->'
end='<!-- speed figures: end -->'
print=
case ${1:-} in --print) print=1 ;; '') ;; *) echo "usage: $0 [--print]" >&2; exit 2 ;; esac
if [ -z "$print" ]; then
	grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "$0: $doc lacks the speed figures markers" >&2; exit 1; }
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/runs"
: >"$tmp/summary"
load() { cut -d' ' -f1-3 /proc/loadavg; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo none)
dirty=
[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && dirty=" (with uncommitted changes)"

# run LABEL CMD...: one script, its output in a fenced block headed by the
# command and the load average at both ends.
run() {
	local label=$1
	shift
	local before after
	before=$(load)
	echo "== $(date -u +%T) $label" >&2
	"$@" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/out" "$tmp/err" >&2; echo "$0: $label failed" >&2; exit 1; }
	after=$(load)
	{
		printf '`%s` (load average %s before, %s after):\n\n```\n' "$label" "$before" "$after"
		cat "$tmp/out"
		printf '```\n\n'
	} >>"$tmp/runs"
	# The lines that compare two things measured in turn, for the summary.
	grep -E "$summary" "$tmp/out" | sed "s|^|${label##* }: |" >>"$tmp/summary" || true
}
# The lines of each script's output that the summary repeats: ratios
# within one run, memory, and the byte-identity checks.
summary='poolsim / reference|now / BASE|peak RSS|points x 10 replications|byte-identical|speedup workers|whole process: median|^proxy/pgbouncer|^paired'

{
	echo "$begin"
	echo
	echo "Commit \`$commit\`$dirty, $(date -u '+%Y-%m-%d %H:%M UTC'), $(go version | cut -d' ' -f3-), $(nproc) cores, kernel $(uname -r)."
	echo
} >"$tmp/block"
base=${BASE:-fc36f99}
run "BASE=$base bash bench/model-speed.sh" env BASE="$base" bash bench/model-speed.sh
run "bash bench/sim-speed.sh" bash bench/sim-speed.sh
run "bash bench/sweep-speed.sh" bash bench/sweep-speed.sh
run "bash bench/replication-speed.sh" bash bench/replication-speed.sh
if [ "${SKIP_PROXY:-}" != 1 ]; then
	rounds=${PROXY_ROUNDS:-4}
	run "ROUNDS=$rounds PERF=1 bash bench/proxy-vs-pgbouncer.sh" env ROUNDS="$rounds" PERF=1 bash bench/proxy-vs-pgbouncer.sh
fi
{
	echo "Summary (each line from the script named; read ratios, not seconds):"
	echo
	echo '```'
	cat "$tmp/summary"
	echo '```'
	echo
	cat "$tmp/runs"
	echo "$end"
} >>"$tmp/block"

if [ -n "$print" ]; then
	cat "$tmp/block"
	exit 0
fi
awk -v begin="$begin" -v end="$end" -v block="$tmp/block" '
	$0 == begin { while ((getline line < block) > 0) print line; skip = 1; next }
	$0 == end { skip = 0; next }
	!skip' "$doc" >"$tmp/doc"
cp "$tmp/doc" "$doc"
echo "rewrote the figures block of $doc" >&2
