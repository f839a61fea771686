//go:build linux

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pick chooses the short (CI) or the full value.
func pick[T any](short, long T) T {
	if full {
		return long
	}
	return short
}

// TestBackendKills: under load, backends are killed (pg_terminate_backend)
// again and again; every commit a client saw acknowledged must be in the
// table afterwards, and the load must go on.
func TestBackendKills(t *testing.T) {
	dur, every := pick(5*time.Second, 60*time.Second), pick(250*time.Millisecond, 500*time.Millisecond)
	eachTarget(t, settings{poolSize: 8}, func(t *testing.T, tg *target) {
		l := newLedger(t, "kills_"+tg.name)
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		defer cancel()
		done := make(chan struct{})
		go func() { l.run(ctx, tg.dsn(), 6); close(done) }()
		su := superuser(context.Background(), t)
		defer su.Close(context.Background())
		kills := 0
		for ctx.Err() == nil {
			sleep(ctx, every)
			res := su.ExecParams(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE usename = 'poolsim' AND backend_type = 'client backend' ORDER BY random() LIMIT 1`, nil, nil, nil, nil).Read()
			if res.Err == nil && len(res.Rows) == 1 && string(res.Rows[0][0]) == "t" {
				kills++
			}
		}
		<-done
		if _, ok := l.waitProgress(0, 0); !ok && l.progress.Load() == 0 {
			t.Fatal("no commit at all")
		}
		acked, missing := l.check(t)
		figs.add("backend kills under load", "backends killed / commits acknowledged / missing", tg.name, "%d / %d / %d", kills, acked, missing)
		figs.add("backend kills under load", "failed transactions (client saw an error)", tg.name, "%d", l.failed.Load())
		if missing > 0 {
			t.Errorf("%d of %d acknowledged commits are missing", missing, acked)
		}
		if kills == 0 || acked == 0 {
			t.Errorf("%d kills, %d commits: the scenario did not run", kills, acked)
		}
		tg.mustLive(t, "backend kills under load")
	})
}

// TestPostgresCrashRestart: under load, one backend gets SIGKILL, so the
// postmaster ends every backend and restarts (crash recovery): the pooler
// must serve again once PostgreSQL is back, and no acknowledged commit may
// be lost. How long PostgreSQL took to accept a direct login again is
// measured beside the commits through the pooler: the difference is the
// pooler's.
func TestPostgresCrashRestart(t *testing.T) {
	crashes := pick(1, 3)
	eachTarget(t, settings{poolSize: 8, serverLoginRetry: time.Second}, func(t *testing.T, tg *target) {
		l := newLedger(t, "crash_"+tg.name)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { l.run(ctx, tg.dsn(), 6); close(done) }()
		var recover, accepting []time.Duration
		for i := 0; i < crashes; i++ {
			if _, ok := l.waitProgress(50, 30*time.Second); !ok {
				t.Fatalf("crash %d: no progress before the crash", i)
			}
			su := superuserRetry(t, time.Minute) // PostgreSQL may still be recovering from the last crash
			res := su.ExecParams(context.Background(), `SELECT pid FROM pg_stat_activity
				WHERE usename = 'poolsim' AND backend_type = 'client backend' LIMIT 1`, nil, nil, nil, nil).Read()
			if res.Err != nil || len(res.Rows) == 0 {
				t.Fatalf("no backend to kill: %v", res.Err)
			}
			var pid int
			fmt.Sscan(string(res.Rows[0][0]), &pid)
			// A checkpoint first: crash recovery replays the WAL written
			// since the last one, so each crash starts from the same
			// little WAL, whichever pooler's turn it is (the first crash
			// of a run otherwise follows the backend kills' million
			// commits).
			if err := sqlExec(context.Background(), su, "CHECKPOINT"); err != nil {
				t.Fatalf("crash %d: checkpoint: %v", i, err)
			}
			start := time.Now()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill backend %d: %v", pid, err)
			}
			// The restart has begun when the postmaster has ended our own
			// backend too.
			for sqlExec(context.Background(), su, "SELECT 1") == nil {
				if time.Since(start) > 30*time.Second {
					t.Fatalf("crash %d: PostgreSQL did not restart its backends", i)
				}
				time.Sleep(10 * time.Millisecond)
			}
			su.Close(context.Background())
			su = superuserRetry(t, time.Minute)
			su.Close(context.Background())
			accepting = append(accepting, time.Since(start))
			if _, ok := l.waitProgress(20, 60*time.Second); !ok {
				t.Fatalf("crash %d: no commit within a minute of the crash-restart", i)
			}
			recover = append(recover, time.Since(start))
		}
		cancel()
		<-done
		acked, missing := l.check(t)
		figs.add("PostgreSQL crash-restart under load", "crash-restarts / commits acknowledged / missing", tg.name, "%d / %d / %d", crashes, acked, missing)
		figs.add("PostgreSQL crash-restart under load", "time from the kill to a direct login to PostgreSQL", tg.name, "%v", roundAll(accepting))
		figs.add("PostgreSQL crash-restart under load", "time from the kill to 20 commits after the restart", tg.name, "%v", roundAll(recover))
		if missing > 0 {
			t.Errorf("%d of %d acknowledged commits are missing", missing, acked)
		}
		tg.mustLive(t, "PostgreSQL crash-restart under load")
	})
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// loginError logs in through dsn and returns how long it took and the error.
func loginError(dsn string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	conn, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		err = sqlExec(ctx, conn, "SELECT 1")
		conn.Close(ctx)
	}
	return time.Since(start), err
}

// checkClean fails t if a client-facing error shows the upstream's address
// or a Go error.
func checkClean(t *testing.T, err error, port int) {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return
	}
	for _, leak := range []string{"127.0.0.1", fmt.Sprint(port), "dial", "connect:", "refused", "context", "timeout:"} {
		if strings.Contains(pe.Message+pe.Detail+pe.Hint, leak) {
			t.Errorf("the client's error %q shows %q", pe.Message, leak)
		}
	}
}

// TestUpstreamDownHung: PostgreSQL is down when the pooler starts, then
// comes up; then it hangs (accepts, never answers). A client logging in
// while it is down or hung gets FATAL "client_login_timeout (server down)"
// after client_login_timeout, as from PgBouncer 1.18, with nothing of the
// upstream in the message. Before PostgreSQL comes up, more clients try
// and give up on their own (a 1 s connect timeout, as applications have):
// once they are gone no server connection is tried, so when the
// server_login_retry window of the last try has run out (PgBouncer's
// default 15 s in the full run, 1 s in the short one) and PostgreSQL is
// up, the next client gets through at once.
func TestUpstreamDownHung(t *testing.T) {
	const loginTimeout, giveUps = 2 * time.Second, 3
	retry := pick(time.Second, 15*time.Second)
	up := newUpstream(t)
	eachTarget(t, settings{upstreamPort: up.port, clientLoginTimeout: loginTimeout, serverConnectTimeout: time.Second,
		serverLoginRetry: retry}, func(t *testing.T, tg *target) {
		up.set(t, "down")
		for _, phase := range []string{"down at start", "up", "hung"} {
			switch phase {
			case "up":
				giveUpWhileDown(t, tg, giveUps, retry)
				up.set(t, "up")
			case "hung":
				up.set(t, "hung")
			}
			var err error
			var took time.Duration
			if phase == "up" {
				deadline := time.Now().Add(20 * time.Second)
				start := time.Now()
				for {
					if _, err = loginError(tg.dsn()); err == nil || time.Now().After(deadline) {
						break
					}
				}
				took = time.Since(start)
				if err != nil {
					t.Errorf("PostgreSQL up: no client got through in 20 s: %v", err)
				}
				figs.add("upstream down at start, then up, then hung", fmt.Sprintf("up (after %d clients gave up while down, server_login_retry %v): first successful query after", giveUps, retry), tg.name, "%v", took.Round(10*time.Millisecond))
				continue
			}
			// Another database when hung: a pool with a cached welcome
			// would not need a server to log in.
			dsn := tg.dsn()
			if phase == "hung" {
				dsn = strings.Replace(dsn, "/poolsim?", "/postgres?", 1)
			}
			took, err = loginError(dsn)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "08P01" || pe.Message != "client_login_timeout (server down)" {
				t.Errorf("%s: %v, want FATAL 08P01 \"client_login_timeout (server down)\"", phase, err)
			}
			checkClean(t, err, up.port)
			if took < loginTimeout*3/4 {
				t.Errorf("%s: answered after %v, before client_login_timeout %v", phase, took, loginTimeout)
			}
			msg := fmt.Sprint(err)
			if pe != nil {
				msg = pe.Message
			}
			figs.add("upstream down at start, then up, then hung", phase+": client sees (after)", tg.name, "%s (%v)", msg, took.Round(100*time.Millisecond))
		}
		tg.mustLive(t, "upstream down at start, then up, then hung")
	})
	t.Run("gave up", func(t *testing.T) { clientsGaveUp(t, giveUps, retry) })
}

// clientsGaveUp is issue 55's recovery case at PgBouncer's default
// client_login_timeout (60 s), with an upstream of its own: PostgreSQL is
// down, n clients log in and each closes its connection after 0.5 s. A
// pooler that still counts them waiting tries a server once every
// server_login_retry (PgBouncer 1.18 does: it reads no client waiting for
// the pool's first server, until client_login_timeout); PostgreSQL comes
// back right after such a try if one comes within a window and a bit
// (else after that), as in the run, and the next client's first
// query waits out the rest of that try's window.
func clientsGaveUp(t *testing.T, n int, retry time.Duration) {
	const scenario = "upstream down at start, then up, then hung"
	up := newUpstream(t)
	eachTarget(t, settings{upstreamPort: up.port, serverConnectTimeout: time.Second, serverLoginRetry: retry}, func(t *testing.T, tg *target) {
		up.set(t, "down")
		const failed = "closing because: connect failed"
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			conn, err := pgconn.Connect(ctx, tg.dsn())
			cancel()
			if err == nil {
				conn.Close(context.Background())
				t.Fatalf("client %d logged in while PostgreSQL was down", i)
			}
		}
		left := strings.Count(tg.log(), failed)
		deadline := time.Now().Add(retry + 2*time.Second)
		for strings.Count(tg.log(), failed) == left && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		tries := strings.Count(tg.log(), failed) - left
		up.set(t, "up")
		// A connect timeout above the window, to see when it is served.
		took, err := loginError(strings.Replace(tg.dsn(), "connect_timeout=10", "connect_timeout=30", 1))
		if err != nil {
			t.Errorf("clients gave up on their own: the first client after PostgreSQL came back: %v after %v", err, took)
		}
		if tg.name == "proxy" && (tries != 0 || took > time.Second) {
			t.Errorf("clients gave up on their own: %d server connections tried after they left, the next client's query after %v; want none tried and the query at once", tries, took)
		}
		figs.add(scenario, fmt.Sprintf("clients gave up on their own (%d, after 0.5 s; client_login_timeout 60 s): server connections tried in the window and 2 s after they left", n), tg.name, "%d", tries)
		figs.add(scenario, fmt.Sprintf("clients gave up on their own: first query after PostgreSQL came back (server_login_retry %v)", retry), tg.name, "%v", took.Round(time.Millisecond))
		tg.mustLive(t, scenario)
	})
}

// giveUpWhileDown is the issue-55 case before PostgreSQL comes up: n
// clients try to log in through tg and each gives up after a second, before
// client_login_timeout. It returns once the pooler has closed them all
// (client_login_timeout) and the server_login_retry window of any server
// connection tried meanwhile - tried only while a client waited - has run
// out, and records how many were tried while PostgreSQL was down.
func giveUpWhileDown(t *testing.T, tg *target, n int, retry time.Duration) {
	t.Helper()
	// PgBouncer reads no client waiting for the pool's first server and
	// closes it at client_login_timeout; the proxy closes it at its EOF.
	const closed, eof = "closing because: client_login_timeout (server down)", "closing because: client unexpected eof"
	gone := func() int { l := tg.log(); return strings.Count(l, closed) + strings.Count(l, eof) }
	before := gone()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgconn.Connect(ctx, tg.dsn())
		cancel()
		if err == nil {
			conn.Close(context.Background())
			t.Fatalf("client %d logged in while PostgreSQL was down", i)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for gone() < before+n {
		if time.Now().After(deadline) {
			t.Fatalf("the pooler never closed the %d clients that gave up (%q or %q):\n%s", n, closed, eof, tail(tg.log(), 15))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// No client waits from here on, so nothing is tried: the window of
	// the last try, launched before now, runs out within retry.
	time.Sleep(retry + 500*time.Millisecond)
	tries := strings.Count(tg.log(), "closing because: connect failed")
	figs.add("upstream down at start, then up, then hung", fmt.Sprintf("down: server connections tried (server_login_retry %v)", retry), tg.name, "%d", tries)
}

// TestClientKilledHoldingLock: a client dies (its socket reset) while its
// transaction holds an ACCESS EXCLUSIVE lock; the pooler must end that
// server's transaction so that the next client gets the lock, and leave
// nothing idle in transaction.
func TestClientKilledHoldingLock(t *testing.T) {
	rounds := pick(3, 23)
	eachTarget(t, settings{poolSize: 4}, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		su := superuser(ctx, t)
		table := "locked_" + tg.name
		if err := sqlExec(ctx, su, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (x int); ALTER TABLE %s OWNER TO poolsim", table, table, table)); err != nil {
			t.Fatal(err)
		}
		su.Close(ctx)
		var waits []time.Duration
		for i := 0; i < rounds; i++ {
			holder, err := pgconn.Connect(ctx, tg.dsn())
			if err != nil {
				t.Fatal(err)
			}
			if err := sqlExec(ctx, holder, "BEGIN; LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			// Die as a killed process does: the kernel resets the socket.
			raw := holder.Conn().(*net.TCPConn)
			_ = raw.SetLinger(0)
			_ = raw.Close()
			start := time.Now()
			next, err := pgconn.Connect(ctx, tg.dsn())
			if err != nil {
				t.Fatal(err)
			}
			err = sqlExec(ctx, next, "BEGIN; SET LOCAL lock_timeout = '10s'; LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE; COMMIT")
			waits = append(waits, time.Since(start))
			next.Close(ctx)
			if err != nil {
				t.Fatalf("round %d: the lock of the killed client was not released: %v", i, err)
			}
		}
		su = superuser(ctx, t)
		defer su.Close(ctx)
		res := su.ExecParams(ctx, `SELECT count(*) FROM pg_stat_activity WHERE usename = 'poolsim' AND state LIKE 'idle in transaction%'`, nil, nil, nil, nil).Read()
		left := "?"
		if res.Err == nil && len(res.Rows) == 1 {
			left = string(res.Rows[0][0])
		}
		if left != "0" {
			t.Errorf("%s backends idle in transaction after the rounds, want 0", left)
		}
		figs.add("client killed holding ACCESS EXCLUSIVE", "rounds / lock free again after (max) / idle in transaction left", tg.name,
			"%d / %v / %s", rounds, percentile(waits, 100).Round(time.Millisecond), left)
	})
}

// TestSlowloris: connections send their start-up packet a byte at a time;
// they are closed at client_login_timeout while other clients keep working.
func TestSlowloris(t *testing.T) {
	n, loginTimeout := pick(30, 200), pick(2*time.Second, 5*time.Second)
	eachTarget(t, settings{maxClientConn: n + 50, clientLoginTimeout: loginTimeout}, func(t *testing.T, tg *target) {
		ctx, cancel := context.WithTimeout(context.Background(), loginTimeout+30*time.Second)
		defer cancel()
		var closed sync.WaitGroup
		var cut, lasted int64
		var mu sync.Mutex
		start := time.Now()
		for range n {
			c, err := net.Dial("tcp", tg.addr())
			if err != nil {
				t.Fatal(err)
			}
			closed.Add(1)
			go func() {
				defer closed.Done()
				defer c.Close()
				startup := []byte{0, 0, 0, 40, 0, 3, 0, 0}
				for i := 0; ctx.Err() == nil; i++ {
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					if _, err := c.Write(startup[i%len(startup) : i%len(startup)+1]); err != nil {
						break
					}
					_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
					var b [256]byte
					if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
						break // closed by the pooler
					}
				}
				mu.Lock()
				if ctx.Err() == nil {
					cut++
				} else {
					lasted++
				}
				mu.Unlock()
			}()
		}
		// Meanwhile a normal client logs in and queries.
		var lat []time.Duration
		for time.Since(start) < loginTimeout {
			qs := time.Now()
			_, err := loginError(tg.dsn())
			if err != nil {
				t.Errorf("a normal client during the slowloris: %v", err)
				break
			}
			lat = append(lat, time.Since(qs))
			sleep(ctx, 50*time.Millisecond)
		}
		closed.Wait()
		took := time.Since(start)
		figs.add("slowloris logins", "connections / closed by client_login_timeout after", tg.name, "%d / %v", n, took.Round(100*time.Millisecond))
		figs.add("slowloris logins", "normal logins+query meanwhile / p99", tg.name, "%d / %v", len(lat), percentile(lat, 99).Round(time.Millisecond))
		if cut != int64(n) {
			t.Errorf("%d of %d slow connections were closed by the pooler, want all (within client_login_timeout + 30 s)", cut, n)
		}
		tg.mustLive(t, "slowloris logins")
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
