#!/usr/bin/env bash
# The advise examples the README and docs/advise.md show: runs each one,
# writes its whole output (and its pgbouncer.ini and plot where it has one)
# to results/advise/, and rewrites every block between the markers
#
#   <!-- advise example NAME: begin (bash bench/advise-examples.sh rewrites this block) -->
#   <!-- advise example NAME: end -->
#
# in README.md and docs/*.md with the command and the first lines of its
# output (as many as the block's begin marker says after "lines", default
# 12; with from "TEXT" in the marker, the lines from the first that starts
# with TEXT).
#
# Usage: bench/advise-examples.sh [--rewrite] [NAME ...]   (--rewrite: only
# the blocks, from the outputs already in results/advise/)
#
# Takes a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
rewrite=
if [ "${1:-}" = --rewrite ]; then
	rewrite=1
	shift
fi
export PATH=/usr/local/go/bin:$PATH
bin=$(mktemp -d)/poolsim
[ -n "$rewrite" ] || go build -o "$bin" ./cmd/poolsim
out=results/advise
mkdir -p "$out"

# name | arguments to poolsim advise (a file name ending .ini or .png after
# --emit or --plot is written into results/advise/)
examples=(
	"rails-1x|rails-app --slo-p99 web=200ms --max-wait jobs=1s --features jobs=advisory_locks,cable=listen --emit rails-1x.ini --plot rails-1x.png"
	"rails-2x|rails-app --set classes.web.workload.arrival_rate=1000/s --set classes.jobs.workload.arrival_rate=120/s --slo-p99 web=200ms --max-wait jobs=1s --features jobs=advisory_locks,cable=listen"
	"rails-2x-xact|rails-app --set classes.web.workload.arrival_rate=1000/s --set classes.jobs.workload.arrival_rate=120/s --slo-p99 web=200ms --max-wait jobs=1s --features jobs=advisory_locks,cable=listen --assume jobs=xact_locks --emit rails-2x-xact.ini"
	"web-app|web-app --slo-p99 100ms --plot web-app.png"
	"web-app-overload|web-app --slo-p99 100ms --set workload.arrival_rate=1300/s"
	"pgbouncer-modes-prepared|pgbouncer-modes --set workload.clients=200 --features prepared --slo-p99 100ms"
	"web-and-report|web-and-report --slo-p99 web=150ms --features report=with_hold --emit web-and-report.ini"
)

want=" $* "
for ex in "${examples[@]}"; do
	[ -z "$rewrite" ] || break
	name=${ex%%|*}
	args=${ex#*|}
	[ $# -eq 0 ] || [[ $want == *" $name "* ]] || continue
	shown=$args
	run=()
	for a in $args; do
		case $a in
		*.ini | *.png) run+=("$out/$a") ;;
		*) run+=("$a") ;;
		esac
	done
	echo "== $(date -u +%T) poolsim advise $shown" >&2
	{
		echo "\$ poolsim advise $shown"
		"$bin" advise "${run[@]}" --quiet
	} >"$out/$name.txt"
done

python3 - "$out" README.md docs/*.md <<'PY'
import re, sys
out, files = sys.argv[1], sys.argv[2:]
pat = re.compile(r'(<!-- advise example (\S+): begin([^\n]*)-->\n)(.*?)(<!-- advise example \2: end -->)', re.S)
for f in files:
    text = open(f).read()
    def block(m):
        name, opts = m.group(2), m.group(3)
        n = int((re.search(r'lines (\d+)', opts) or [0, 12])[1])
        frm = re.search(r'from "([^"]*)"', opts)
        lines = open(f"{out}/{name}.txt").read().rstrip("\n").split("\n")
        head, rest = lines[:1], lines[1:]
        if frm:
            at = next((i for i, l in enumerate(rest) if l.startswith(frm.group(1))), None)
            if at is None:
                sys.exit(f"{f}: example {name} has no line starting {frm.group(1)!r}")
            head, rest = head + ["..."], rest[at:]
        body = head + rest[:n]
        if len(rest) > n:
            body.append("...")
        return m.group(1) + "```\n" + "\n".join(body) + "\n```\n" + m.group(5)
    new = pat.sub(block, text)
    if new != text:
        open(f, "w").write(new)
        print(f"rewrote the advise examples in {f}", file=sys.stderr)
PY
