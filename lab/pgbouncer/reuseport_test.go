package pgbouncer_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

// TestReuseportCancelsAreLost runs two PgBouncers on one port with
// so_reuseport = 1 and no peering (issue 7; bench/reuseport-cancels
// measures the fraction): a cancel request arrives on a new connection that
// the kernel may hash to the process not holding the client, which drops
// it. Of 16 cancels at least one must be lost and at least one must work;
// with a fair hash both fail together by chance with probability 2·2^-16.
func TestReuseportCancelsAreLost(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	needPgBouncer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := pgbouncer.Config{
		Pooling: pgbouncer.Pool(poolmode.Transaction, 4, func(p *poolconf.Pooling) {
			p.MaxClientConn, p.ServerResetQuery = 20, ""
		}),
		SoReuseport: true,
	}
	a := start(t, cfg)
	cfg.ListenPort = a.Port()
	b := start(t, cfg)
	if a.Port() != b.Port() || a.Pid() == b.Pid() {
		t.Fatalf("want two processes on one port: %d on %d, %d on %d", a.Pid(), a.Port(), b.Pid(), b.Port())
	}

	su, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background())
	var suMu sync.Mutex
	// backend returns the pid running trial n's query (state active: an
	// idle backend still shows its last query), 0 if none; with kill it
	// terminates it instead.
	backend := func(ctx context.Context, n int, kill bool) (int, error) {
		suMu.Lock()
		defer suMu.Unlock()
		what := "pid"
		if kill {
			what = "pg_terminate_backend(pid)::int"
		}
		rs, err := su.Exec(ctx, fmt.Sprintf("SELECT %s FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%%/* reuseport test %d */%%' AND pid <> pg_backend_pid()", what, n)).ReadAll()
		if err != nil || len(rs) == 0 || len(rs[0].Rows) == 0 {
			return 0, err
		}
		return strconv.Atoi(string(rs[0].Rows[0][0]))
	}
	t.Cleanup(func() { // any backend still sleeping
		for n := range 16 {
			_, _ = backend(context.Background(), n, true)
		}
	})

	// trial reports whether trial n's cancel was lost: its query still ran
	// a third of its sleep later.
	const sleep = 9 * time.Second
	trial := func(n int) (lost bool, err error) {
		conn, err := pgconn.Connect(ctx, a.DSN("poolsim", "poolsim"))
		if err != nil {
			return false, err
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			conn.Close(cctx)
			select {
			case <-conn.CleanupDone():
			case <-cctx.Done():
			}
		}()
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, fmt.Sprintf("SELECT pg_sleep(%d) /* reuseport test %d */", int(sleep/time.Second), n)).ReadAll()
			done <- err
		}()
		defer func() {
			if lost || err != nil {
				_, _ = backend(context.Background(), n, true)
			}
			<-done
		}()
		for ; ; time.Sleep(10 * time.Millisecond) {
			pid, err := backend(ctx, n, false)
			if err != nil {
				return false, err
			}
			if pid != 0 {
				break
			}
			if ctx.Err() != nil {
				return false, errors.New("the query never became active")
			}
		}
		kctx, kcancel := context.WithTimeout(ctx, 10*time.Second)
		err = conn.CancelRequest(kctx)
		kcancel()
		if err != nil {
			return false, err
		}
		select {
		case err := <-done:
			done <- err // for the deferred receive
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "57014" {
				return false, nil
			}
			return false, fmt.Errorf("query ended with %v, want SQLSTATE 57014", err)
		case <-time.After(sleep / 3):
			// A cancel that worked ends the query long before its sleep
			// would; a third of it leaves room for a busy machine.
			return true, nil
		}
	}

	const trials, parallel = 16, 4
	var mu sync.Mutex
	lost, cancelled := 0, 0
	next := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				l, err := trial(n)
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("trial %d: %v", n, err)
				case l:
					lost++
				default:
					cancelled++
				}
				mu.Unlock()
			}
		}()
	}
	for n := range trials {
		next <- n
	}
	close(next)
	wg.Wait()
	t.Logf("%d trials: %d cancels lost, %d cancelled", trials, lost, cancelled)
	if lost == 0 {
		t.Errorf("no cancel was lost in %d trials: are the two PgBouncers really sharing the port?", trials)
	}
	if cancelled == 0 {
		t.Errorf("no cancel worked in %d trials", trials)
	}
}
