# Sourced by the bench scripts that start a throwaway PostgreSQL and
# PgBouncer of their own: the pieces they share. Expects die() defined, and
# $bindir (PostgreSQL's) and $bouncer (pgbouncer) before the start_ ones
# (find_servers sets them).

# find_servers sets $bindir (the newest /usr/lib/postgresql/*/bin), $pgbench,
# $psql and $bouncer, or dies saying what to install.
find_servers() {
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$bindir" ] && [ -x "$bindir/initdb" ] || die "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin; install them: apt-get install postgresql"
  pgbench=$bindir/pgbench psql=$bindir/psql
  bouncer=$(command -v pgbouncer 2>/dev/null || echo /usr/sbin/pgbouncer)
  [ -x "$bouncer" ] || die "pgbouncer not found; install it: apt-get install pgbouncer"
}

# free_port prints a free loopback port below the kernel's ephemeral range,
# so that no outgoing connection (pgbench's, PgBouncer's) holds the one
# picked.
eph_low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((10000 + RANDOM % (eph_low - 10000)))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
  die "no free port found"
}

# as_pg runs a command as the postgres account when root (initdb and
# pgbouncer refuse root), as is otherwise.
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || die "running as root, but initdb and pgbouncer refuse root and there is no postgres account"
  as_pg() { runuser -u postgres -- "$@"; }
else
  as_pg() { "$@"; }
fi

# make_tmp PREFIX: a temporary folder $tmp (owned by postgres when root),
# removed on exit after PgBouncer and PostgreSQL are stopped; a script that
# starts more defines before_cleanup, which runs first.
make_tmp() {
  tmp=$(mktemp -d "/tmp/$1.XXXXXX")
  pg_started=
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  if [ "$(id -u)" = 0 ]; then chown postgres: "$tmp"; fi
}
cleanup() {
  set +e
  declare -F before_cleanup >/dev/null && before_cleanup
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null
  [ -f "$tmp/pgbouncer.pid" ] && kill "$(cat "$tmp/pgbouncer.pid")" 2>/dev/null
  [ -n "$pg_started" ] && as_pg "$bindir/pg_ctl" -D "$tmp/data" -m immediate -w -t 10 stop >/dev/null 2>&1
  rm -rf "$tmp"
}

# start_poolsim_proxy POOL: `$POOLSIM proxy` in transaction mode with
# pool size POOL in front of the throwaway PostgreSQL ($pgport), its log
# in $tmp/proxy.log; sets pport and proxy_pid (cleanup stops it).
start_poolsim_proxy() {
  pport=$(free_port)
  "$POOLSIM" proxy --upstream "postgres://postgres@127.0.0.1:$pgport/postgres" --listen "127.0.0.1:$pport" \
    --mode transaction --pool-size "$1" --max-client-conn 1000 --auth-type trust >"$tmp/proxy.log" 2>&1 &
  proxy_pid=$!
  wait_port "$pport" "poolsim proxy" "$tmp/proxy.log"
}

# wait_port PORT NAME LOG: until PORT accepts connections (10 s), else
# LOG's tail and die.
wait_port() {
  for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return
    sleep 0.05
  done
  tail -n 20 "$3" >&2 || true
  die "$2 did not accept connections on port $1 within 10s"
}

# start_postgres [SETTINGS...]: initdb into $tmp/data and start PostgreSQL
# on a free loopback port ($pgport; superuser postgres, trust, fsync off,
# plus the -c settings given), its socket in $tmp. Sets pg_started for the
# caller's cleanup. Expects $bindir and $tmp.
start_postgres() {
  pgport=$(free_port)
  as_pg "$bindir/initdb" -D "$tmp/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$tmp/initdb.log" 2>&1 \
    || { cat "$tmp/initdb.log" >&2; die "initdb failed"; }
  as_pg "$bindir/pg_ctl" -D "$tmp/data" -l "$tmp/postgres.log" -w -t 60 \
    -o "-p $pgport -c listen_addresses=127.0.0.1 -c unix_socket_directories=$tmp -c fsync=off $*" \
    start >/dev/null || { tail -n 20 "$tmp/postgres.log" >&2; die "PostgreSQL did not start"; }
  pg_started=1
}

# pgbench_init: pgbench -i -s 1 into that PostgreSQL's postgres database
# (its log in $tmp/init.log, shown if it fails).
pgbench_init() {
  "$pgbench" -i -q -s 1 -h 127.0.0.1 -p "$pgport" -U postgres postgres >"$tmp/init.log" 2>&1 || { cat "$tmp/init.log" >&2; die "pgbench -i failed"; }
}

# start_pgbouncer POOL_SIZE MAX_CLIENT_CONN: a transaction-mode PgBouncer
# ($bouncer) on a free loopback port ($bport) in front of that PostgreSQL,
# trust auth, console user postgres, log and pid file in $tmp; returns
# once it accepts connections.
start_pgbouncer() {
  bport=$(free_port)
  cat >"$tmp/pgbouncer.ini" <<INI
[databases]
* = host=127.0.0.1 port=$pgport

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir = $tmp
auth_type = trust
auth_file = $tmp/users.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = $1
max_client_conn = $2
logfile = $tmp/pgbouncer.log
pidfile = $tmp/pgbouncer.pid
INI
  echo '"postgres" ""' >"$tmp/users.txt"
  if [ "$(id -u)" = 0 ]; then chown postgres: "$tmp/pgbouncer.ini" "$tmp/users.txt"; fi
  as_pg "$bouncer" -d "$tmp/pgbouncer.ini" || { cat "$tmp/pgbouncer.log" >&2 || true; die "pgbouncer did not start"; }
  wait_port "$bport" pgbouncer "$tmp/pgbouncer.log"
}

# start_pgbench_stack PREFIX POOL_SIZE: the servers found, a temporary
# folder (make_tmp PREFIX), a throwaway PostgreSQL with pgbench's tables
# (scale 1) and a transaction-mode PgBouncer of POOL_SIZE servers per pool
# in front of it (max_client_conn 1000), all removed on exit.
start_pgbench_stack() {
  find_servers
  make_tmp "$1"
  start_postgres
  pgbench_init
  start_pgbouncer "$2" 1000
}

# sched_mode MODE checks a script's SCHED: asis leaves the kernel as it
# is; thread (root) notes the kernel's autogroup setting in $ag_was, so
# that autogroup_off turns it off for the runs and autogroup_restore (from
# before_cleanup) puts it back - as poolsim validate does for a CPU-bound
# run. With autogroup on a busy core is shared between sessions first.
ag=/proc/sys/kernel/sched_autogroup_enabled ag_was=
sched_mode() {
  case $1 in
    asis) ;;
    thread)
      [ -w "$ag" ] || die "SCHED=thread: $ag is not writable here (root needed)"
      ag_was=$(cat "$ag") ;;
    *) die "SCHED=$1: want asis or thread" ;;
  esac
}
autogroup_off() { if [ -n "$ag_was" ]; then echo 0 >"$ag"; fi; }
autogroup_restore() { if [ -n "$ag_was" ]; then echo "$ag_was" >"$ag"; fi; }
