//go:build linux

package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ledger is a table of commits: each worker inserts ids of its own in
// transactions and records those whose COMMIT it saw acknowledged.
type ledger struct {
	table    string
	mu       sync.Mutex
	acked    []int64
	unknown  int64 // commits whose outcome the client never learned
	failed   atomic.Int64
	progress atomic.Int64 // acknowledged commits so far
}

// superuser connects straight to PostgreSQL as postgres.
func superuser(ctx context.Context, t *testing.T) *pgconn.PgConn {
	t.Helper()
	conn, err := pgconn.Connect(ctx, cluster.SuperuserDSN("poolsim"))
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	return conn
}

// superuserRetry connects as postgres, retrying for up to most (while
// PostgreSQL restarts).
func superuserRetry(t *testing.T, most time.Duration) *pgconn.PgConn {
	t.Helper()
	deadline := time.Now().Add(most)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		conn, err := pgconn.Connect(ctx, cluster.SuperuserDSN("poolsim"))
		cancel()
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("connect to PostgreSQL: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sqlExec(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	_, err := conn.Exec(ctx, sql).ReadAll()
	return err
}

// newLedger creates a fresh table owned by poolsim.
func newLedger(t *testing.T, name string) *ledger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := superuser(ctx, t)
	defer conn.Close(ctx)
	l := &ledger{table: "ledger_" + name}
	if err := sqlExec(ctx, conn, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (id bigint PRIMARY KEY, w int); ALTER TABLE %s OWNER TO poolsim",
		l.table, l.table, l.table)); err != nil {
		t.Fatal(err)
	}
	return l
}

// run drives workers through dsn until ctx is done: each transaction
// inserts one id; a broken connection is replaced after a short pause.
func (l *ledger) run(ctx context.Context, dsn string, workers int) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var conn *pgconn.PgConn
			defer func() {
				if conn != nil {
					conn.Close(context.Background())
				}
			}()
			seq := int64(0)
			for ctx.Err() == nil {
				if conn == nil || conn.IsClosed() {
					cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
					c, err := pgconn.Connect(cctx, dsn)
					cancel()
					if err != nil {
						if ctx.Err() == nil {
							l.failed.Add(1)
						}
						sleep(ctx, 50*time.Millisecond)
						continue
					}
					conn = c
				}
				seq++
				id := int64(w)*1_000_000_000 + seq
				qctx, cancel := context.WithTimeout(ctx, 15*time.Second)
				err := sqlExec(qctx, conn, fmt.Sprintf("BEGIN; INSERT INTO %s VALUES (%d, %d); COMMIT", l.table, id, w))
				cancel()
				if err != nil {
					if ctx.Err() != nil {
						break // the run ended under this transaction: not a failure
					}
					l.failed.Add(1)
					l.mu.Lock()
					l.unknown++
					l.mu.Unlock()
					continue // on a closed connection, the loop reconnects
				}
				l.mu.Lock()
				l.acked = append(l.acked, id)
				l.mu.Unlock()
				l.progress.Add(1)
			}
		}()
	}
	wg.Wait()
}

// check counts the acknowledged commits missing from the table.
func (l *ledger) check(t *testing.T) (acked, missing int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var conn *pgconn.PgConn
	for {
		c, err := pgconn.Connect(ctx, cluster.SuperuserDSN("poolsim"))
		if err == nil {
			conn = c
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("PostgreSQL did not come back: %v", err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, "SELECT id FROM "+l.table, nil, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	have := make(map[int64]bool, len(res.Rows))
	for _, r := range res.Rows {
		var id int64
		fmt.Sscan(string(r[0]), &id)
		have[id] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.acked {
		if !have[id] {
			missing++
		}
	}
	return len(l.acked), missing
}

// waitProgress waits until the ledger has acknowledged n more commits, and
// returns how long that took (or false at most).
func (l *ledger) waitProgress(n int64, most time.Duration) (time.Duration, bool) {
	start := time.Now()
	from := l.progress.Load()
	for time.Since(start) < most {
		if l.progress.Load() >= from+n {
			return time.Since(start), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return most, false
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// upstream is a controllable stand-in for PostgreSQL's address: down
// (nothing listens), up (connections are forwarded to the cluster) or hung
// (connections are accepted and never answered).
type upstream struct {
	port int
	mu   sync.Mutex
	ln   net.Listener
	mode string
	held []net.Conn
	wg   sync.WaitGroup
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{port: freePort(t), mode: "down"}
	t.Cleanup(func() { u.set(t, "down") })
	return u
}

// set switches the mode; switching away from up or hung closes every
// connection the upstream holds.
func (u *upstream) set(t *testing.T, mode string) {
	u.mu.Lock()
	if u.ln != nil {
		u.ln.Close()
		u.ln = nil
	}
	for _, c := range u.held {
		c.Close()
	}
	u.held = nil
	u.mode = mode
	u.mu.Unlock()
	u.wg.Wait()
	if mode == "down" {
		return
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", u.port))
	if err != nil {
		t.Fatalf("upstream listen: %v", err)
	}
	u.mu.Lock()
	u.ln = ln
	u.mu.Unlock()
	u.wg.Add(1)
	go func() { // owner: upstream; ends when set closes the listener
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.held = append(u.held, c)
			u.mu.Unlock()
			if mode == "up" {
				u.wg.Add(1)
				go u.forward(c)
			}
		}
	}()
}

func (u *upstream) forward(c net.Conn) {
	defer u.wg.Done()
	defer c.Close()
	s, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", cluster.Port()), 5*time.Second)
	if err != nil {
		return
	}
	u.mu.Lock()
	u.held = append(u.held, s)
	u.mu.Unlock()
	defer s.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(s, c)
		s.Close()
		close(done)
	}()
	_, _ = io.Copy(c, s)
	c.Close()
	<-done
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(k, len(s)-1))]
}
