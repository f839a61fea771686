package validate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Placement is where the pooler's thread and the pool's servers ran
// during a live run: every placeEvery the validator reads the core each
// last ran on (/proc/PID/stat, field 39).
//
// It explains a spread the model cannot: with one server, PgBouncer and
// the backend either share a core (the kernel wakes each on the other's
// core, and they take turns) or run on two (each wake-up crosses cores
// and finds the other idle), and each arrangement keeps itself going
// for the run; the two differ in throughput by tens of per cent
// (docs/validate.md).
type Placement struct {
	Samples int
	// Shared is the mean over the samples of the share of the pool's
	// servers whose last core was the pooler's: 0 or 1 at every sample
	// with a pool of one, about 1/cores with a large pool spread evenly.
	Shared float64
}

// placeEvery is the placement's sampling interval: a file read per
// process 50 times a second is a small share of a core, even at 32
// servers.
const placeEvery = 20 * time.Millisecond

// watchPlacement samples the placement of pooler (a process with one
// thread, as PgBouncer) and the load role's servers until stop; the
// servers are looked up again every half second on a connection of its
// own (watchDSN). stop ends the sampling goroutine and returns what it
// saw (nil if it saw nothing).
func watchPlacement(ctx context.Context, pooler int, watchDSN, user string) (stop func() *Placement) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg  sync.WaitGroup
		out Placement
		sum float64
	)
	wg.Add(1)
	go func() { // owner: stop; ends when ctx is cancelled
		defer wg.Done()
		in := startInstrument()
		defer in.stop()
		var conn *pgconn.PgConn
		defer func() {
			if conn != nil {
				closeConn(conn)
			}
		}()
		var servers []int
		var looked time.Time
		stats := statFiles{}
		defer stats.close()
		tick := time.NewTicker(placeEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			in.charge()
			if time.Since(looked) >= 500*time.Millisecond {
				looked = time.Now()
				if conn == nil {
					cctx, c := context.WithTimeout(ctx, 5*time.Second)
					conn, _ = pgconn.Connect(cctx, watchDSN)
					c()
				}
				if conn != nil {
					if pids, err := serverPidsOn(ctx, conn, user); err == nil {
						servers = pids
						stats.keep(append([]int{pooler}, pids...))
					} else {
						closeConn(conn)
						conn = nil
					}
				}
			}
			pc, ok := stats.lastCore(pooler)
			if !ok || len(servers) == 0 {
				continue
			}
			n, with := 0, 0
			for _, s := range servers {
				if sc, ok := stats.lastCore(s); ok {
					n++
					if sc == pc {
						with++
					}
				}
			}
			if n > 0 {
				out.Samples++
				sum += float64(with) / float64(n)
			}
		}
	}()
	return func() *Placement {
		cancel()
		wg.Wait()
		if out.Samples == 0 {
			return nil
		}
		out.Shared = sum / float64(out.Samples)
		return &out
	}
}

// watchPooler samples the placement of t's PgBouncer and the pool's
// servers until the returned stop; through the in-process proxy (no one
// thread of its own to sample) stop returns nil at once.
func (l *lab) watchPooler(ctx context.Context, t *running) (stop func() *Placement) {
	if t.bouncer == nil {
		return func() *Placement { return nil }
	}
	return watchPlacement(ctx, t.bouncer.Pid(), l.watchDSN, l.srv.user)
}

// statFiles keeps processes' /proc/PID/stat open for the placement's
// reads: reading an open one again from its start costs a fraction of
// opening it anew, and the sampler reads the pooler and every server
// every placeEvery while the run it measures shares the cores. A file
// whose process has exited reads nothing and is closed.
type statFiles struct {
	fds map[int]int
	buf [1024]byte
}

// close closes them all.
func (s *statFiles) close() { s.keep(nil) }

// parseLastCore reads field 39 (processor) of a /proc/PID/stat line; the
// command name (field 2, in parentheses) may hold spaces and parentheses.
func parseLastCore(stat string) (int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 37 { // fields 3 to 39
		return 0, false
	}
	c, err := strconv.Atoi(f[36])
	return c, err == nil
}

// serverPidsOn are the client backends of role user other than conn's own.
func serverPidsOn(ctx context.Context, conn *pgconn.PgConn, user string) ([]int, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rs, err := conn.Exec(cctx, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND usename = '"+strings.ReplaceAll(user, "'", "''")+"'").ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 {
		return nil, fmt.Errorf("find the pool's servers: %d results", len(rs))
	}
	var pids []int
	for _, row := range rs[0].Rows {
		if p, err := strconv.Atoi(string(row[0])); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}
