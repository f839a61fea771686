//go:build linux

package pooler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// The server_login_retry window, on PgBouncer 1.18 and the proxy side by
// side, in front of a real PostgreSQL that goes down and comes back
// (pgcluster's Down and Up). PgBouncer's rules (src/objects.c
// launch_new_connection, check_fast_fail, disconnect_server,
// release_server; src/janitor.c per_loop_activate): a server connection
// that fails before it is logged in - refused, timed out or refused by
// PostgreSQL with an error - starts a window of server_login_retry,
// counted from when that attempt was launched, in which the pool launches
// no other; a login that succeeds ends it. A login is launched only for a
// client that waits (for a server, or for the pool's first server while
// logging in), so once no client waits nothing is tried, the window runs
// out, and the next client's login is launched at once.

// logConnectFailed and loginFailed are PgBouncer's log lines for a server
// connection that failed before PostgreSQL answered and for one it
// refused with an error; the proxy logs the same.
const (
	logConnectFailed = "closing because: connect failed"
	logLoginFailed   = "closing because: login failed"
)

// downCluster starts a PostgreSQL of the test's own and shuts it down
// (Down), for a pooler to start in front of a database that is down; it
// is stopped when the test ends.
func downCluster(t *testing.T, opts pgcluster.Options) *pgcluster.Cluster {
	t.Helper()
	c := pgclustertest.Start(t, opts)
	if err := c.Down(); err != nil {
		t.Fatal(err)
	}
	return c
}

// giveUpQuery is a client that logs in through dsn and runs a query, giving
// up after d as an application with a connect timeout does. It returns
// the error it saw.
func giveUpQuery(ctx context.Context, dsn string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "select 1").ReadAll()
	return err
}

// servedThenDown starts a PostgreSQL of the test's own, a proxy and a
// PgBouncer 1.18 in front of it in transaction mode (pool size 2, with
// settings), has each serve one query - so each knows its pool's welcome -
// and then takes PostgreSQL down (Down); Up brings it back.
func servedThenDown(ctx context.Context, t *testing.T, settings map[string]string) (*pgcluster.Cluster, []srvTarget) {
	t.Helper()
	tc := pgclustertest.Start(t, pgcluster.Options{})
	dbs := []string{fmt.Sprintf("poolsim = host=127.0.0.1 port=%d dbname=poolsim", tc.Port())}
	tgs := srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, settings)
	for _, tg := range tgs {
		if err := giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second); err != nil {
			t.Fatalf("%s: a query while PostgreSQL is up: %v", tg.name, err)
		}
	}
	if err := tc.Down(); err != nil {
		t.Fatal(err)
	}
	return tc, tgs
}

// logCount is how many times the target's log holds s.
func (tg srvTarget) logCount(s string) int { return strings.Count(tg.log(), s) }

// loggedAtLeast is logCount once the log holds s n times, or after 2 s:
// PgBouncer may write a line to its log file just after it answered the
// client the line is about.
func (tg srvTarget) loggedAtLeast(ctx context.Context, s string, n int) int {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	waitFor(ctx, func() bool { return tg.logCount(s) >= n })
	return tg.logCount(s)
}

// TestLoginRetryDatabaseBack: PostgreSQL is down when the pooler starts
// (server_login_retry 15 s, PgBouncer's default; client_login_timeout
// 2 s). Clients try to log in, each giving up after a second, and are
// closed - by PgBouncer with "client_login_timeout (server down)", by the
// proxy at their EOF ("client unexpected eof"); only the first one's
// login was tried - the others came within the window. With no client
// waiting nothing more is tried, so once the window has run out and
// PostgreSQL is back, the next client logs in and runs its query at once
// (within 2 s), not a retry window later.
func TestLoginRetryDatabaseBack(t *testing.T) {
	const retry = 15 * time.Second
	ctx := testCtx(t, 90*time.Second)
	tc := downCluster(t, pgcluster.Options{})
	dbs := []string{fmt.Sprintf("poolsim = host=127.0.0.1 port=%d dbname=poolsim", tc.Port())}
	tgs := srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{
		"server_login_retry": "15", "client_login_timeout": "2"})
	const clients = 3
	start := time.Now() // the first login is launched after this
	runs := make([]<-chan done, len(tgs))
	for i, tg := range tgs {
		runs[i] = async(func() error {
			for j := range clients {
				if err := giveUpQuery(ctx, tg.dsn("poolsim"), time.Second); err == nil {
					return fmt.Errorf("client %d logged in while PostgreSQL was down", j)
				}
			}
			return nil
		})
	}
	for i, tg := range tgs {
		if d := await(ctx, t, tg.name+": clients giving up", runs[i]); d.err != nil {
			t.Fatalf("%s: %v", tg.name, d.err)
		}
		// Every client that gave up has left: none waits any more.
		// PgBouncer reads no client waiting for the pool's first server
		// and closes them at client_login_timeout; the proxy closes each
		// at its EOF (hangup.go).
		gone := "closing because: client_login_timeout (server down)"
		if tg.name == "proxy" {
			gone = "closing because: " + reasonClientEOF
		}
		tg.waitLog(ctx, t, gone, clients)
	}
	// The window of the one login tried runs out; nothing waits, so
	// nothing is tried meanwhile (checked below).
	select {
	case <-time.After(time.Until(start.Add(retry + time.Second))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	for _, tg := range tgs {
		if n := tg.logCount(logConnectFailed); n != 1 {
			t.Errorf("%s: %d server connections tried while PostgreSQL was down, want 1 (the others within server_login_retry, none with no client waiting)", tg.name, n)
		}
	}
	if err := tc.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tg := range tgs {
		begin := time.Now()
		err := giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second)
		took := time.Since(begin)
		if err != nil || took > 2*time.Second {
			t.Errorf("%s: the first client after PostgreSQL came back: %v after %v, want its query run within 2s", tg.name, err, took.Round(time.Millisecond))
		}
		t.Logf("%s: the first client after PostgreSQL came back ran its query in %v", tg.name, took.Round(time.Millisecond))
	}
}

// waitNoServer waits until the target's SHOW POOLS has no server for
// database poolsim (none logging in, idle, in use or being tested).
func (tg srvTarget) waitNoServer(ctx context.Context, t *testing.T) {
	t.Helper()
	waitPool(ctx, t, tg.admin, tg.name+": the pool has no server", func(r map[string]string) bool {
		for _, k := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
			if r[k] != "0" {
				return false
			}
		}
		return true
	})
}

// pgErr is err's PostgreSQL error, or nil.
func pgErr(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// TestLoginRetryWindowWhileDown: the pool has had a server (its welcome is
// known) when PostgreSQL goes down (server_login_retry 1 s,
// query_wait_timeout 5 s). A client logs in and its query waits for a
// server: logins are tried for it once a window, not in a storm, and it
// gets "query_wait_timeout" in the end. Meanwhile a client whose query
// needs a server while the pool has none and logins fail is refused at
// once with "server login has been failing, try again later
// (server_login_retry)" (PgBouncer's check_fast_fail).
func TestLoginRetryWindowWhileDown(t *testing.T) {
	const retry, wait = time.Second, 5 * time.Second
	ctx := testCtx(t, 90*time.Second)
	_, tgs := servedThenDown(ctx, t, map[string]string{
		"server_login_retry": "1", "query_wait_timeout": "5"})
	type result struct {
		err       error
		took      time.Duration
		tries     int // server connections tried while it waited
		refused   error
		refusedIn time.Duration
	}
	runs := make([]<-chan done, len(tgs))
	got := make([]result, len(tgs))
	for i, tg := range tgs {
		tg.waitNoServer(ctx, t) // PostgreSQL's shutdown closed the idle server
		runs[i] = async(func() error {
			r := &got[i]
			before := tg.logCount(logConnectFailed)
			start := time.Now()
			waiter := async(func() error { return giveUpQuery(ctx, tg.dsn("poolsim"), 20*time.Second) })
			// Once a login for the waiting client has failed, a client
			// needing a server is refused at once.
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if !waitFor(tctx, func() bool { return tg.logCount(logConnectFailed) > before }) {
				return fmt.Errorf("no server connection was tried for the waiting client")
			}
			begin := time.Now()
			r.refused = giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second)
			r.refusedIn = time.Since(begin)
			d := await(ctx, t, tg.name+": the waiting client", waiter)
			r.err, r.took = d.err, d.at.Sub(start)
			r.tries = tg.logCount(logConnectFailed) - before
			return nil
		})
	}
	for i, tg := range tgs {
		if d := await(ctx, t, tg.name, runs[i]); d.err != nil {
			t.Fatalf("%s: %v", tg.name, d.err)
		}
		r := got[i]
		if pe := pgErr(r.refused); pe == nil || pe.Code != "08P01" || pe.Message != poolmode.ErrServerLoginFailing || r.refusedIn > time.Second {
			t.Errorf("%s: a client needing a server while logins fail: %v after %v, want FATAL 08P01 %q at once", tg.name, r.refused, r.refusedIn, poolmode.ErrServerLoginFailing)
		}
		if pe := pgErr(r.err); pe == nil || pe.Code != "08P01" || pe.Message != "query_wait_timeout" || r.took < wait*3/4 {
			t.Errorf("%s: the waiting client: %v after %v, want FATAL 08P01 query_wait_timeout after %v", tg.name, r.err, r.took, wait)
		}
		// One try, then one per window while it waited (and the refused
		// client's, within a window too): no storm.
		if most := int(r.took/retry) + 2; r.tries < 2 || r.tries > most {
			t.Errorf("%s: %d server connections tried in the %v a client waited, want 2 to %d (one per server_login_retry %v)", tg.name, r.tries, r.took.Round(time.Millisecond), most, retry)
		}
		t.Logf("%s: %d server connections tried in the %v a client waited", tg.name, r.tries, r.took.Round(time.Millisecond))
	}
}

// TestLoginRetryWrongServerPassword: PostgreSQL refuses the pool's server
// login (the [databases] entry's password is wrong) before the pool has had
// a server. The client logging in gets PostgreSQL's message at once, as a
// pooler error (FATAL 08P01: PgBouncer 1.18's kill_pool_logins); that failure holds the retry window as a
// refused connection does: a client arriving right after waits for the
// next try, server_login_retry (3 s) after the first, and then gets the
// same error - two logins tried in all, not one per client.
func TestLoginRetryWrongServerPassword(t *testing.T) {
	const retry = 3 * time.Second
	ctx := testCtx(t, 90*time.Second)
	tc := pgclustertest.Start(t, pgcluster.Options{Auth: "scram-sha-256"})
	dbs := []string{fmt.Sprintf("poolsim = host=127.0.0.1 port=%d dbname=poolsim user=poolsim password=wrong", tc.Port())}
	tgs := srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{"server_login_retry": "3"})
	type result struct {
		first, second         error
		firstIn, secondIn     time.Duration
		triedFirst, triedBoth int
	}
	got := make([]result, len(tgs))
	runs := make([]<-chan done, len(tgs))
	for i, tg := range tgs {
		runs[i] = async(func() error {
			r := &got[i]
			begin := time.Now()
			r.first = giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second)
			r.firstIn = time.Since(begin)
			r.triedFirst = tg.loggedAtLeast(ctx, logLoginFailed, 1)
			begin = time.Now()
			r.second = giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second)
			r.secondIn = time.Since(begin)
			r.triedBoth = tg.loggedAtLeast(ctx, logLoginFailed, 2)
			return nil
		})
	}
	const msg = `password authentication failed for user "poolsim"`
	for i, tg := range tgs {
		await(ctx, t, tg.name, runs[i])
		r := got[i]
		if pe := pgErr(r.first); pe == nil || pe.Code != "08P01" || pe.Message != msg || r.firstIn > retry/2 {
			t.Errorf("%s: the first client: %v after %v, want FATAL 08P01 with PostgreSQL's message %q at once", tg.name, r.first, r.firstIn, msg)
		}
		if pe := pgErr(r.second); pe == nil || pe.Code != "08P01" || pe.Message != msg || r.secondIn < retry/2 {
			t.Errorf("%s: the client right after: %v after %v, want FATAL 08P01 %q once the window of %v has passed", tg.name, r.second, r.secondIn, msg, retry)
		}
		if r.triedFirst != 1 || r.triedBoth != 2 {
			t.Errorf("%s: %d server logins tried for the first client, %d for both, want 1 and 2", tg.name, r.triedFirst, r.triedBoth)
		}
		t.Logf("%s: first client refused in %v, the next in %v", tg.name, r.firstIn.Round(time.Millisecond), r.secondIn.Round(time.Millisecond))
	}
}

// TestLoginRetryPaused: while logins fail and the pool has no server, a
// paused database fails no client fast - PgBouncer's find_server skips
// check_fast_fail under PAUSE: the client waits for RESUME. Once
// PostgreSQL is back and the database resumed, the next login (a window
// after the last) serves the waiting clients.
func TestLoginRetryPaused(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	tc, tgs := servedThenDown(ctx, t, map[string]string{"server_login_retry": "1"})
	var waiters [][]<-chan done
	for _, tg := range tgs {
		tg.waitNoServer(ctx, t)
		before := tg.logCount(logConnectFailed)
		first := async(func() error { return giveUpQuery(ctx, tg.dsn("poolsim"), 30*time.Second) })
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if !waitFor(tctx, func() bool { return tg.logCount(logConnectFailed) > before }) {
			cancel()
			t.Fatalf("%s: no server connection was tried for the waiting client", tg.name)
		}
		cancel()
		if pe := pgErr(giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second)); pe == nil || pe.Message != poolmode.ErrServerLoginFailing {
			t.Fatalf("%s: a client needing a server while logins fail: %v, want %q", tg.name, pe, poolmode.ErrServerLoginFailing)
		}
		tg.exec(ctx, t, "PAUSE poolsim")
		second := async(func() error { return giveUpQuery(ctx, tg.dsn("poolsim"), 30*time.Second) })
		// Queued, not refused: a refused client is never counted waiting.
		var refused *done
		waitPool(ctx, t, tg.admin, tg.name+": the client needing a server while paused waits", func(r map[string]string) bool {
			select {
			case d := <-second:
				refused = &d
				return true
			default:
				return r["cl_waiting"] == "2"
			}
		})
		if refused != nil {
			t.Fatalf("%s: a client of a paused database while logins fail: %v, want it kept waiting", tg.name, refused.err)
		}
		waiters = append(waiters, []<-chan done{first, second})
	}
	if err := tc.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tg := range tgs {
		tg.exec(ctx, t, "RESUME poolsim")
		for j, ch := range waiters[i] {
			if d := await(ctx, t, tg.name+": a waiting client", ch); d.err != nil {
				t.Errorf("%s: waiting client %d: %v, want its query run once PostgreSQL is back and the database resumed", tg.name, j, d.err)
			}
		}
	}
}

// TestLoginRetryBackWithinWindow is the other side of the window:
// PostgreSQL comes back while the window of a failed try still runs
// (server_login_retry 5 s). A client arriving then waits for the window's
// end - no login is tried before it - and is served by the next try.
func TestLoginRetryBackWithinWindow(t *testing.T) {
	const retry = 5 * time.Second
	ctx := testCtx(t, 60*time.Second)
	tc := downCluster(t, pgcluster.Options{})
	dbs := []string{fmt.Sprintf("poolsim = host=127.0.0.1 port=%d dbname=poolsim", tc.Port())}
	tgs := srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{"server_login_retry": "5"})
	tried := make([]time.Time, len(tgs))
	for i, tg := range tgs {
		tried[i] = time.Now() // the try is launched after this
		if err := giveUpQuery(ctx, tg.dsn("poolsim"), 500*time.Millisecond); err == nil {
			t.Fatalf("%s: a client logged in while PostgreSQL was down", tg.name)
		}
		if n := tg.logCount(logConnectFailed); n != 1 {
			t.Fatalf("%s: %d server connections tried for the client, want 1", tg.name, n)
		}
	}
	if err := tc.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for i, tg := range tgs {
		if time.Since(tried[i]) >= retry-time.Second {
			t.Skipf("%s: PostgreSQL took %v to come back, near the window of %v", tg.name, time.Since(tried[i]), retry)
		}
	}
	runs := make([]<-chan done, len(tgs))
	for i, tg := range tgs {
		runs[i] = async(func() error { return giveUpQuery(ctx, tg.dsn("poolsim"), 10*time.Second) })
	}
	for i, tg := range tgs {
		d := await(ctx, t, tg.name, runs[i])
		at := d.at.Sub(tried[i])
		if d.err != nil || at < retry || at > retry+2*time.Second {
			t.Errorf("%s: a client arriving within the window: %v, served %v after the failed try, want served once the window of %v is over", tg.name, d.err, at.Round(time.Millisecond), retry)
		}
		if n := tg.logCount(logConnectFailed); n != 1 {
			t.Errorf("%s: %d server connections failed, want only the first", tg.name, n)
		}
		t.Logf("%s: served %v after the failed try", tg.name, at.Round(time.Millisecond))
	}
}
