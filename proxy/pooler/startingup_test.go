//go:build linux

package pooler

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/models/poolmode"
)

// msgStartingUp is PostgreSQL's answer to a start-up packet while it
// starts (postmaster.c, CAC_STARTUP), FATAL 57P03.
const msgStartingUp = "the database system is starting up"

// startingUp stands in for a PostgreSQL that is starting up on port (a
// down cluster's): it answers every start-up packet with FATAL 57P03
// msgStartingUp, as the postmaster does before it accepts connections -
// a real PostgreSQL is in that state for milliseconds, too short to land
// a pooler's try in it on purpose. SSL and GSS requests get 'N'. stop
// closes the listener and waits for every connection's goroutine; tries
// is how many start-up packets it answered.
func startingUp(t *testing.T, port int) (stop func(), tries *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("stand-in for a PostgreSQL starting up: %v", err)
	}
	tries = new(atomic.Int64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owner: stop, which closes ln
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { // ends at the connection's deadline at the latest
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				for {
					var hdr [8]byte
					if _, err := io.ReadFull(c, hdr[:]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(hdr[:4])
					code := binary.BigEndian.Uint32(hdr[4:])
					if n == 8 && (code == 80877103 || code == 80877104) { // SSLRequest, GSSENCRequest
						if _, err := c.Write([]byte{'N'}); err != nil {
							return
						}
						continue
					}
					if n < 8 || n > 10000 {
						return
					}
					if _, err := io.CopyN(io.Discard, c, int64(n-8)); err != nil {
						return
					}
					tries.Add(1)
					var body []byte
					for _, f := range [][2]string{{"S", "FATAL"}, {"V", "FATAL"}, {"C", sqlstateCannotConnectNow}, {"M", msgStartingUp}} {
						body = append(append(append(body, f[0][0]), f[1]...), 0)
					}
					body = append(body, 0)
					msg := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(body)))
					_, _ = c.Write(append(msg, body...))
					return
				}
			}()
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ln.Close()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop, tries
}

// TestLoginRetryStartingUp: PostgreSQL is down when the pooler starts and
// answers its first server login with FATAL 57P03 "the database system
// is starting up" (server_login_retry 2 s). PgBouncer 1.18 fails the
// client logging in with that message at once (kill_pool_logins, FATAL
// 08P01). The proxy follows PgBouncer 1.21 (e7619364): 57P03 fails no
// one, the client waits for the next try a window later, which - PostgreSQL
// having started meanwhile - serves it. Both tried one login while
// PostgreSQL was starting.
func TestLoginRetryStartingUp(t *testing.T) {
	const retry = 2 * time.Second
	ctx := testCtx(t, 60*time.Second)
	tc := downCluster(t, pgcluster.Options{})
	dbs := []string{fmt.Sprintf("poolsim = host=127.0.0.1 port=%d dbname=poolsim", tc.Port())}
	tgs := srvTargetsFor(ctx, t, dbs, poolmode.Transaction, 2, map[string]string{"server_login_retry": "2"})
	stop, tries := startingUp(t, tc.Port())
	runs := make([]<-chan done, len(tgs))
	begin := make([]time.Time, len(tgs))
	for i, tg := range tgs {
		begin[i] = time.Now()
		runs[i] = async(func() error { return giveUpQuery(ctx, tg.dsn("poolsim"), 20*time.Second) })
		tg.waitLog(ctx, t, logLoginFailed, 1)
	}
	// PgBouncer 1.18 has answered its client; the proxy's still waits.
	d := await(ctx, t, "pgbouncer's client", runs[0])
	if pe := pgErr(d.err); pe == nil || pe.Code != "08P01" || pe.Message != msgStartingUp || d.at.Sub(begin[0]) > retry/2 {
		t.Errorf("pgbouncer: the client logging in: %v after %v, want PgBouncer 1.18's FATAL 08P01 %q at once", d.err, d.at.Sub(begin[0]).Round(time.Millisecond), msgStartingUp)
	}
	select {
	case d := <-runs[1]:
		t.Fatalf("proxy: the client logging in was answered (%v) after PostgreSQL said it was starting up; want it kept for the next try", d.err)
	default:
	}
	stop()
	if n := tries.Load(); n != 2 {
		t.Errorf("%d server logins tried while PostgreSQL was starting up, want one each", n)
	}
	if err := tc.Up(ctx); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	pd := await(ctx, t, "proxy's client", runs[1])
	took := pd.at.Sub(begin[1])
	if pd.err != nil || took < retry || pd.at.Sub(upAt) > retry+time.Second {
		t.Errorf("proxy: the client logging in: %v after %v (%v after PostgreSQL was up), want its query served by a later try, within a window (%v) of PostgreSQL being up", pd.err, took.Round(time.Millisecond), pd.at.Sub(upAt).Round(time.Millisecond), retry)
	}
	t.Logf("pgbouncer: the client got %v after %v; proxy: the client was served after %v", d.err, d.at.Sub(begin[0]).Round(time.Millisecond), took.Round(time.Millisecond))
}
