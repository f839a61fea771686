#!/usr/bin/env bash
# PgBouncer's own test suite (release 1.19.0's 82 pytest tests) against
# `poolsim proxy` and, for reference, the installed PgBouncer: the count of
# each, and every test by outcome with pytest's one-line reason.
#
#   bash bench/pgbouncer-suite.sh [--pooler proxy|pgbouncer|both] [--tcp] [--out DIR] [-k EXPR] [--gate LIST]
#
# --pooler   which pooler (default both, PgBouncer first).
# --tcp      the suite's Windows switch: the console over TCP with trust
#            (USE_UNIX_SOCKETS and HAVE_GETPEEREID off in test/utils.py)
#            instead of a Unix socket with peer authentication.
# --out DIR  writes DIR/POOLER-MODE.txt: the counts and every test with its
#            outcome and pytest's one-line reason; default: print only.
# -k EXPR    passed to pytest (a subset of the tests).
# JOBS       pytest-xdist workers (default 2; most tests wait on timers and
#            sockets, so 4 on two cores halves the time).
# --gate LIST exits 1 unless every test that failed or errored is listed in
#            LIST (a line per test: "file.py::test<TAB>why"; # comments)
#            or passes when run once more alone (which it reports), and
#            says which listed tests passed (the list is then stale).
#            CI runs the proxy's suite with its list,
#            results/pgbouncer-suite/proxy-fails.txt.
#
# SUITE names the suite's folder (default third_party/pgbouncer-suite, the
# suite as received; its README says what it needs). The suite runs in
# a copy owned by the postgres account (initdb refuses root), with
# PostgreSQL's server binaries on PATH and Debian's python3 (pytest,
# pytest-asyncio, -timeout, -xdist, psycopg, filelock), on both cores:
# about three minutes per pooler and mode. It starts its own PostgreSQL
# and poolers on ports it locks; nothing is left running.
#
# The suite runs `test/../pgbouncer --quiet test.ini` (and --version,
# --help, --reboot): for the proxy that is a two-line wrapper, `exec
# poolsim proxy "$@"` - the proxy takes PgBouncer's command line as it is.
# PgBouncer 1.18 cannot load the suite's test.ini as shipped (auth_dbname
# is 1.19's): its copy drops that one setting, as the suite's README does
# for 1.18's reference figures; the proxy runs the file as shipped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
pooler=both tcp=0 out="" kexpr="" gate=""
while [ $# -gt 0 ]; do
  case $1 in
  --pooler) pooler=$2; shift 2 ;;
  --tcp) tcp=1; shift ;;
  --out) out=$2; shift 2 ;;
  -k) kexpr=$2; shift 2 ;;
  --gate) gate=$2; shift 2 ;;
  *) echo "bench/pgbouncer-suite.sh: unknown argument $1 (want --pooler proxy|pgbouncer|both, --tcp, --out DIR, -k EXPR, --gate LIST)" >&2; exit 2 ;;
  esac
done
case $pooler in
proxy | pgbouncer) poolers=$pooler ;;
both) poolers="pgbouncer proxy" ;;
*) echo "bench/pgbouncer-suite.sh: --pooler $pooler: want proxy, pgbouncer or both" >&2; exit 2 ;;
esac
[ -z "$gate" ] || [ -r "$gate" ] || { echo "bench/pgbouncer-suite.sh: --gate $gate: no such file" >&2; exit 2; }
suite=${SUITE:-$root/third_party/pgbouncer-suite}
[ -d "$suite/test" ] || { echo "bench/pgbouncer-suite.sh: no suite at $suite (set SUITE)" >&2; exit 2; }
py=/usr/bin/python3 # Debian's, with the suite's packages
"$py" -c 'import pytest, pytest_asyncio, pytest_timeout, xdist, psycopg, filelock' 2>/dev/null || {
  echo "bench/pgbouncer-suite.sh: $py lacks the suite's packages: apt-get install python3-pytest python3-pytest-asyncio python3-pytest-timeout python3-pytest-xdist python3-psycopg python3-filelock" >&2
  exit 2
}
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pgbin/initdb" ] || { echo "bench/pgbouncer-suite.sh: no PostgreSQL server binaries in /usr/lib/postgresql/*/bin" >&2; exit 2; }
bouncer=$(command -v pgbouncer || echo /usr/sbin/pgbouncer)
id postgres >/dev/null

work=$(mktemp -d /tmp/poolsim-suite-XXXXXX)
# reap ends whatever a run left behind: a test that fails or times out
# mid-way (online restart, takeover) can leave its pooler, and a crashed
# pytest its PostgreSQL. Every path of theirs is under $work (pytest's
# --basetemp too), so their command lines name it.
reap() {
  pkill -TERM -u postgres -f "$work" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pgrep -u postgres -f "$work" >/dev/null || return 0
    sleep 0.5
  done
  pkill -KILL -u postgres -f "$work" 2>/dev/null || true
}
trap 'reap; rm -rf "$work"' EXIT
chmod 755 "$work"
go build -o "$work/poolsim" ./cmd/poolsim
mode=unix
[ $tcp = 1 ] && mode=tcp
[ -z "$out" ] || mkdir -p "$out"
summary=()

for p in $poolers; do
  if [ "$p" = pgbouncer ] && [ ! -x "$bouncer" ]; then
    echo "bench/pgbouncer-suite.sh: no pgbouncer installed (apt-get install pgbouncer)" >&2
    exit 2
  fi
  copy="$work/$p"
  cp -r "$suite" "$copy"
  chmod -R u+w "$copy" # the shared copy is read-only
  printf 'ldap_support = no\ntls_support = yes\n' >"$copy/config.mak"
  # The one 1.19 setting in test.ini, auth_dbname, which PgBouncer 1.18
  # cannot load: its copy runs without it (the proxy has it).
  [ "$p" = proxy ] || sed -i 's/ auth_dbname=authdb//' "$copy/test/test.ini"
  if [ "$p" = pgbouncer ]; then
    printf '#!/bin/sh\nexec %s "$@"\n' "$bouncer" >"$copy/pgbouncer"
  else
    # poolsim proxy takes PgBouncer's command line as it is.
    printf '#!/bin/sh\nexec %s proxy "$@"\n' "$work/poolsim" >"$copy/pgbouncer"
  fi
  chmod 755 "$copy/pgbouncer"
  if [ $tcp = 1 ]; then
    sed -i -e 's/^    USE_UNIX_SOCKETS = True$/    USE_UNIX_SOCKETS = False/' \
      -e 's/^    HAVE_GETPEEREID = True$/    HAVE_GETPEEREID = False/' "$copy/test/utils.py"
    grep -q '^    USE_UNIX_SOCKETS = False$' "$copy/test/utils.py"
  fi
  chown -R postgres "$work"
  log="$work/$p.log"
  # --tb=line: pytest 7.2 on Python 3.11 can crash parsing a failed test's
  # source for a longer traceback ("AST constructor recursion depth
  # mismatch"); the one-line reasons are what this reports anyway.
  args=(-m pytest -n "${JOBS:-2}" -rA --tb=line -p no:cacheprovider --basetemp "$work/t-$p")
  [ -z "$kexpr" ] || args+=(-k "$kexpr")
  echo "== $(date -u +%T) $p, $mode: the suite" >&2
  for attempt in 1 2; do
    (cd "$copy/test" && timeout 900 runuser -u postgres -- env PATH="$pgbin:$PATH" HOME="$work" COLUMNS=400 "$py" "${args[@]}" .) >"$log" 2>&1 || true
    # Should pytest still crash (INTERNALERROR), that run counts nothing:
    # it runs once more.
    reap
    grep -q '^INTERNALERROR>' "$log" || break
    echo "bench/pgbouncer-suite.sh: pytest crashed (INTERNALERROR); running the suite again" >&2
  done
  # pytest -rA's short summary: one line per test, "OUTCOME file::test - reason".
  lines=$(grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "$log" | sort -u || true)
  count() { grep -c "^$1 " <<<"$lines" || true; }
  line="$p ($mode): $(count PASSED) passed, $(count FAILED) failed, $(count ERROR) errors, $(count SKIPPED) skipped"
  summary+=("$line")
  grep -E '^=+ .* in [0-9.]+s' "$log" | tail -1 || tail -5 "$log"
  if [ -n "$out" ]; then
    {
      echo "$line"
      echo "(bash bench/pgbouncer-suite.sh --pooler $p$([ $tcp = 1 ] && echo ' --tcp'), $(date -u +%F), commit $(git rev-parse --short HEAD))"
      echo
      echo "$lines" | cut -c1-300
    } >"$out/$p-$mode.txt"
  fi
  cp "$log" "${TMPDIR:-/tmp}/pgbouncer-suite-$p-$mode.log"
  if [ -n "$gate" ]; then
    # The gate: no failure or error outside the list; a run that counted
    # nothing (pytest did not start, a collection error) fails it too.
    listed=$( (grep -v '^#' "$gate" || true) | cut -f1 | sed '/^$/d' | sort -u)
    bad=$(grep -E '^(FAILED|ERROR) ' <<<"$lines" | awk '{print $2}' | sort -u | comm -23 - <(echo "$listed") || true)
    passed=$(grep -E '^PASSED ' <<<"$lines" | awk '{print $2}' | sort -u)
    stale=$(comm -12 <(echo "$passed") <(echo "$listed") || true)
    [ -z "$stale" ] || echo "bench/pgbouncer-suite.sh: listed in $gate but passed now (take them off the list): $(echo $stale)" >&2
    if [ -z "$passed" ]; then
      echo "bench/pgbouncer-suite.sh: gate: no test passed ($log kept as ${TMPDIR:-/tmp}/pgbouncer-suite-$p-$mode.log)" >&2
      tail -20 "$log" >&2
      exit 1
    fi
    if [ -n "$bad" ]; then
      # The suite is PgBouncer's, timed with sleeps: under a loaded CI
      # machine one of its tests can miss its moment. A test that fails
      # outside the list runs once more, alone; one that passes then is
      # reported (with its first failure), one that fails again fails the
      # gate.
      echo "bench/pgbouncer-suite.sh: gate: failed, not in $gate; running them again alone:" >&2
      grep -E '^(FAILED|ERROR) ' <<<"$lines" | grep -F -f <(echo "$bad") | cut -c1-400 >&2
      again=(-m pytest -n 0 -rA --tb=line -p no:cacheprovider --basetemp "$work/t2-$p")
      (cd "$copy/test" && timeout 300 runuser -u postgres -- env PATH="$pgbin:$PATH" HOME="$work" COLUMNS=400 "$py" "${again[@]}" $bad) >"$log.again" 2>&1 || true
      reap
      cp "$log.again" "${TMPDIR:-/tmp}/pgbouncer-suite-$p-$mode.again.log"
      still=$(grep -E '^PASSED ' "$log.again" | awk '{print $2}' | sort -u | comm -13 - <(echo "$bad") || true)
      if [ -n "$still" ]; then
        echo "bench/pgbouncer-suite.sh: gate: failed again, not in $gate:" >&2
        grep -E '^(FAILED|ERROR) ' "$log.again" | cut -c1-400 >&2
        [ -n "$(grep -E '^(FAILED|ERROR) ' "$log.again")" ] || tail -20 "$log.again" >&2
        exit 1
      fi
      echo "gate: passed on the second run, alone: $(echo $bad)"
    fi
    echo "gate: every failure is listed in $gate"
  fi
done
printf '%s\n' "${summary[@]}"
if [ -n "$out" ] && [ -f "$out/proxy-$mode.txt" ] && [ -f "$out/pgbouncer-$mode.txt" ]; then
  only=$(comm -23 <(grep '^PASSED ' "$out/proxy-$mode.txt" | awk '{print $2}' | sort) \
    <(grep '^PASSED ' "$out/pgbouncer-$mode.txt" | awk '{print $2}' | sort))
  echo "passed by the proxy and not by PgBouncer ($mode): ${only:-none}"
fi
