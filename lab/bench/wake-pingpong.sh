#!/usr/bin/env bash
# How long an idle vCPU takes to wake, by how long it idled: builds
# lab/bench/wake-pingpong.c and runs it on one core and on two for a list of
# work sizes (µs each process spins before it answers). Each line prints
# the round trip and the time per hand-off beyond the work: on one core a
# context switch, on two a wake-up of the other, idle, core - the
# idle-core wake-up poolsim's per-core model charges (pooler.wakeup,
# validate.wakeup).
#
# Usage: lab/bench/wake-pingpong.sh   (needs gcc and 2 or more cores)
# Environment: ROUNDS (hand-offs per run, 20000), WORKS (list of µs).
set -euo pipefail
ROUNDS=${ROUNDS:-20000} WORKS=${WORKS:-"0 5 10 20 30 40 60 100 200"}
die() { echo "$0: $*" >&2; exit 1; }
[ "$(nproc)" -ge 2 ] || die "needs 2 or more cores, this machine has $(nproc)"
command -v gcc >/dev/null || die "gcc not found: apt-get install gcc"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/pp" "$(dirname "$0")/wake-pingpong.c"
echo "# lab/bench/wake-pingpong.sh, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for w in $WORKS; do
	"$tmp/pp" 0 0 "$ROUNDS" "$w"
	"$tmp/pp" 0 1 "$ROUNDS" "$w"
done
