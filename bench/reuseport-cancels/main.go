// Command reuseport-cancels measures how many query cancels are lost when
// two real PgBouncer processes share one port with so_reuseport = 1 and no
// peering (PgBouncer 1.18 has none), and compares the fraction with the
// poolsim model's prediction (scenario reuseport-fleet, 2 processes).
//
// A cancel request arrives on a new TCP connection, which the kernel hashes
// to either process; the process that does not hold the client does not
// know its key and drops the request, so the query runs on.
//
//	go run ./bench/reuseport-cancels [-cancels 200] [-out results/reuseport-cancels]
//
// It starts a throwaway PostgreSQL and two PgBouncers on one loopback port,
// then runs -cancels trials, -parallel at a time: connect through the shared
// port, start SELECT pg_sleep(5), send a cancel once the query is running
// (after about 100 ms), and count the trial as cancelled when the query
// fails with SQLSTATE 57014 within -window, or as lost when it is still
// running then (its backend is terminated, so every trial is bounded). It
// writes report.md and trials.csv under -out. Everything it starts is
// stopped at the end and on Ctrl-C.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/scenarios"
)

type options struct {
	cancels  int
	parallel int
	out      string
	mode     string
	pool     int
	sleep    time.Duration
	delay    time.Duration
	window   time.Duration
	verbose  bool
}

// Outcomes of one trial.
const (
	outCancelled = "cancelled" // SQLSTATE 57014 within the window
	outLost      = "lost"      // still running at the end of the window
	outError     = "error"     // anything else (not counted)
)

type trial struct {
	N             int
	ClientPort    int    // our local port of the client connection
	CancelPort    int    // our local port of the cancel connection
	Process       string // "A" or "B": the PgBouncer holding the client ("?" unknown)
	CancelProcess string // the PgBouncer whose log has the cancel connection ("?" unknown)
	CancelLog     string // its log's reason for closing it, e.g. "failed cancel request"
	CancelAfterMS float64
	Outcome       string
	SQLState      string
	ElapsedMS     float64 // from sending the cancel to the query's end (or the window)
	Err           string
}

func main() {
	var o options
	flag.IntVar(&o.cancels, "cancels", 200, "trials (one cancel each)")
	flag.IntVar(&o.parallel, "parallel", 8, "trials at a time")
	flag.StringVar(&o.out, "out", "results/reuseport-cancels", "output folder for report.md and trials.csv")
	flag.StringVar(&o.mode, "mode", "transaction", "pool_mode: transaction or session")
	flag.IntVar(&o.pool, "pool", 10, "default_pool_size of each PgBouncer")
	flag.DurationVar(&o.sleep, "sleep", 5*time.Second, "pg_sleep of each trial's query")
	flag.DurationVar(&o.delay, "delay", 100*time.Millisecond, "wait before the cancel (then also until the query is active)")
	flag.DurationVar(&o.window, "window", time.Second, "time after the cancel within which the query must end to count as cancelled")
	flag.BoolVar(&o.verbose, "v", false, "log each step")
	flag.Parse()
	if o.cancels < 1 || o.parallel < 1 || o.pool < 1 || o.window <= 0 || o.delay < 0 || o.sleep <= o.window+o.delay {
		fmt.Fprintln(os.Stderr, "reuseport-cancels: need -cancels, -parallel, -pool >= 1, -window > 0, -delay >= 0 and -sleep > -delay + -window")
		os.Exit(2)
	}
	if o.mode != "transaction" && o.mode != "session" {
		fmt.Fprintln(os.Stderr, "reuseport-cancels: -mode must be transaction or session")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "reuseport-cancels:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) (err error) {
	logf := func(string, ...any) {}
	if o.verbose {
		logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	}
	t0 := time.Now()

	// PostgreSQL: per PgBouncer a pool plus as many cancel connections
	// (a queued cancel lets a pool grow to twice its size), and us.
	c, err := pgcluster.Start(ctx, pgcluster.Options{MaxConnections: 4*o.pool + o.parallel + 20, Logf: logf})
	if err != nil {
		return err
	}
	defer func() {
		if e := c.Stop(); e != nil && err == nil {
			err = e
		}
	}()

	mode, err := poolmode.Parse(o.mode) // checked in main
	if err != nil {
		return err
	}
	cfg := pgbouncer.Config{
		UpstreamPort: c.Port(),
		Pooling:      pgbouncer.Pool(mode, o.pool, func(p *poolconf.Pooling) { p.MaxClientConn = 4*o.parallel + 20 }),
		SoReuseport:  true,
		Logf:         logf,
	}
	pa, err := pgbouncer.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if e := pa.Stop(); e != nil && err == nil {
			err = e
		}
	}()
	cfg.ListenPort = pa.Port()
	pb, err := pgbouncer.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		if e := pb.Stop(); e != nil && err == nil {
			err = e
		}
	}()
	if pa.Port() != pb.Port() {
		return fmt.Errorf("the PgBouncers listen on %d and %d, not one port", pa.Port(), pb.Port())
	}
	fmt.Printf("PostgreSQL %s on %d; PgBouncer %s: pids %d (A) and %d (B) on 127.0.0.1:%d, so_reuseport = 1, %s mode, pool %d\n",
		c.Version(), c.Port(), pa.Version(), pa.Pid(), pb.Pid(), pa.Port(), o.mode, o.pool)

	su, err := pgconn.Connect(ctx, c.SuperuserDSN("postgres"))
	if err != nil {
		return fmt.Errorf("superuser connection: %w", err)
	}
	defer su.Close(context.Background())
	h := &harness{o: o, dsn: pa.DSN("poolsim", "poolsim"), su: &lockedConn{conn: su}}
	defer h.terminate(context.Background(), 0, "") // any trial's backend still running, e.g. after Ctrl-C
	for _, p := range []struct {
		name string
		b    *pgbouncer.PgBouncer
	}{{"A", pa}, {"B", pb}} {
		// The admin console over each process's own Unix socket, to see
		// which process holds a client (TCP would be hashed too).
		adm, err := pgconn.Connect(ctx, fmt.Sprintf("host=%s port=%d dbname=pgbouncer user=postgres sslmode=disable", p.b.Dir(), p.b.Port()))
		if err != nil {
			return fmt.Errorf("admin console of PgBouncer %s: %w", p.name, err)
		}
		defer adm.Close(context.Background())
		h.admins = append(h.admins, admin{p.name, &lockedConn{conn: adm}})
	}

	trials := make([]trial, o.cancels)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(o.parallel, o.cancels) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				trials[i] = h.trial(ctx, i+1)
				if o.verbose {
					tr := trials[i]
					logf("trial %d: process %s, %s after %.0f ms %s", tr.N, tr.Process, tr.Outcome, tr.ElapsedMS, tr.Err)
				}
			}
		}()
	}
feed:
	for i := range trials {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w (nothing written)", ctx.Err())
	}
	elapsed := time.Since(t0)
	time.Sleep(100 * time.Millisecond) // let the last log lines land
	attribute(trials, map[string]string{"A": pa.LogPath(), "B": pb.LogPath()})

	pred, err := modelPrediction()
	if err != nil {
		return err
	}
	rep := report{o: o, trials: trials, pred: pred, pg: c.Version(), pgb: pa.Version(), port: pa.Port(), elapsed: elapsed}
	text := rep.markdown()
	fmt.Print("\n" + text)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "report.md"), []byte(text), 0o644); err != nil {
		return err
	}
	if err := writeCSV(filepath.Join(o.out, "trials.csv"), trials); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s and %s\n", filepath.Join(o.out, "report.md"), filepath.Join(o.out, "trials.csv"))
	return nil
}

// lockedConn is a connection shared by the trials, one query at a time.
type lockedConn struct {
	mu   sync.Mutex
	conn *pgconn.PgConn
}

type admin struct {
	name string
	*lockedConn
}

type harness struct {
	o      options
	dsn    string
	su     *lockedConn // superuser, straight to PostgreSQL
	admins []admin     // each PgBouncer's admin console
}

// tag marks trial n's query so its backend can be found in pg_stat_activity.
func tag(n int) string { return fmt.Sprintf("/* reuseport-cancels trial %d */", n) }

func (h *harness) query(ctx context.Context, lc *lockedConn, sql string) ([][][]byte, []pgconn.FieldDescription, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	rs, err := lc.conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rs) == 0 {
		return nil, nil, nil
	}
	return rs[len(rs)-1].Rows, rs[len(rs)-1].FieldDescriptions, rs[len(rs)-1].Err
}

// running is the condition on pg_stat_activity for a backend running the
// query of trial n (n == "": of any trial). An idle backend still shows its
// last query, and in transaction mode PgBouncer hands it to the next
// client, so only active ones count.
func running(n string) string {
	pattern := "/* reuseport-cancels trial " + n
	if n != "" {
		pattern += " */"
	}
	return "state = 'active' AND query LIKE '%" + pattern + "%' AND pid <> pg_backend_pid()"
}

// active returns the pid of the backend running trial n's query, 0 if none.
func (h *harness) active(ctx context.Context, n int) (int, error) {
	rows, _, err := h.query(ctx, h.su, "SELECT pid FROM pg_stat_activity WHERE "+running(strconv.Itoa(n)))
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	return strconv.Atoi(string(rows[0][0]))
}

// terminate ends backend pid if it still runs trial n's query; with
// pid 0 and n "" it ends every backend running any trial's query.
func (h *harness) terminate(ctx context.Context, pid int, n string) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, _, _ = h.query(ctx, h.su, fmt.Sprintf("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE (%d = 0 OR pid = %[1]d) AND %s", pid, running(n)))
}

// process finds which PgBouncer holds the client connected from port.
func (h *harness) process(ctx context.Context, port int) string {
	for _, a := range h.admins {
		rows, fds, err := h.query(ctx, a.lockedConn, "SHOW CLIENTS")
		if err != nil {
			continue
		}
		col := -1
		for i, fd := range fds {
			if fd.Name == "port" {
				col = i
			}
		}
		for _, r := range rows {
			if col >= 0 && string(r[col]) == strconv.Itoa(port) {
				return a.name
			}
		}
	}
	return "?"
}

func (h *harness) trial(ctx context.Context, n int) (tr trial) {
	tr.N, tr.Process = n, "?"
	fail := func(err error) trial {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		tr.Outcome, tr.Err = outError, err.Error()
		return tr
	}
	cfg, err := pgconn.ParseConfig(h.dsn)
	if err != nil {
		return fail(err)
	}
	var dmu sync.Mutex
	var ports []int
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err == nil {
			if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
				dmu.Lock()
				ports = append(ports, a.Port)
				dmu.Unlock()
			}
		}
		return conn, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(cctx, cfg)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		conn.Close(cctx)
		select { // a broken connection is closed in the background
		case <-conn.CleanupDone():
		case <-cctx.Done():
		}
	}()
	dmu.Lock()
	if len(ports) > 0 {
		tr.ClientPort = ports[len(ports)-1]
	}
	dmu.Unlock()
	// The query's context ends at the end of the window: pgconn then
	// closes the connection (a deadline, no cancel request of its own).
	qctx, qcancel := context.WithTimeout(ctx, h.o.delay+h.o.window+2*time.Second)
	defer qcancel()
	start := time.Now()
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, err := conn.Exec(qctx, fmt.Sprintf("SELECT pg_sleep(%g) %s", h.o.sleep.Seconds(), tag(n))).ReadAll()
		done <- result{err, time.Now()}
	}()
	finished := false
	defer func() { // the query's goroutine ends before conn.Close
		if !finished {
			qcancel()
			<-done
		}
	}()

	// Wait ~delay, then until PostgreSQL runs the query, so the cancel
	// cannot arrive before there is anything to cancel.
	wait := time.NewTimer(h.o.delay)
	select {
	case r := <-done:
		wait.Stop()
		finished = true
		return fail(fmt.Errorf("query ended before the cancel: %v", r.err))
	case <-ctx.Done():
		wait.Stop()
		return fail(ctx.Err())
	case <-wait.C:
	}
	var pid int
	defer func() {
		// Whatever happens, the server-side sleep ends with the trial.
		if tr.Outcome != outCancelled {
			h.terminate(context.Background(), pid, strconv.Itoa(n))
		}
	}()
	for deadline := time.Now().Add(2 * time.Second); ; {
		if pid, err = h.active(ctx, n); err != nil {
			return fail(fmt.Errorf("pg_stat_activity: %w", err))
		}
		if pid != 0 {
			break
		}
		if time.Now().After(deadline) {
			return fail(errors.New("the query never became active in PostgreSQL"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	tr.Process = h.process(ctx, tr.ClientPort)

	sent := time.Now()
	tr.CancelAfterMS = ms(sent.Sub(start))
	kctx, kcancel := context.WithTimeout(ctx, h.o.window)
	err = conn.CancelRequest(kctx)
	kcancel()
	if err != nil {
		return fail(fmt.Errorf("cancel request: %w", err))
	}
	dmu.Lock()
	if len(ports) > 1 {
		tr.CancelPort = ports[len(ports)-1]
	}
	dmu.Unlock()

	window := time.NewTimer(time.Until(sent.Add(h.o.window)))
	defer window.Stop()
	select {
	case r := <-done:
		finished = true
		tr.ElapsedMS = ms(r.at.Sub(sent))
		var pgErr *pgconn.PgError
		if errors.As(r.err, &pgErr) {
			tr.SQLState = pgErr.Code
		}
		if tr.SQLState == "57014" {
			tr.Outcome = outCancelled
			return tr
		}
		if r.err == nil {
			r.err = errors.New("the query finished without error")
		}
		return fail(r.err)
	case <-ctx.Done():
		return fail(ctx.Err())
	case <-window.C:
		tr.ElapsedMS = ms(h.o.window)
		tr.Outcome = outLost
		// End the sleep in PostgreSQL; PgBouncer then drops the client.
		// (Cancelling qctx instead would make pgconn send a cancel of its own.)
		h.terminate(context.Background(), pid, strconv.Itoa(n))
		<-done
		finished = true
		return tr
	}
}

// closeRE matches PgBouncer's log line for closing a cancel connection
// (log_disconnections, on by default), e.g. "C-0x...: (nodb)/(nouser)@127.0.0.1:53614
// closing because: failed cancel request (age=0s)".
var closeRE = regexp.MustCompile(`@127\.0\.0\.1:(\d+) closing because: ([^()]*cancel[^()]*?) \(age`)

// attribute finds each trial's cancel connection in the PgBouncers' logs:
// which process the kernel handed it to, and what that process did.
func attribute(trials []trial, logs map[string]string) {
	seen := map[int][2]string{}
	dup := map[int]bool{} // a port seen twice cannot be attributed
	for name, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, m := range closeRE.FindAllSubmatch(b, -1) {
			port, _ := strconv.Atoi(string(m[1]))
			if _, ok := seen[port]; ok {
				dup[port] = true
			}
			seen[port] = [2]string{name, string(m[2])}
		}
	}
	for i := range trials {
		trials[i].CancelProcess = "?"
		if s, ok := seen[trials[i].CancelPort]; ok && trials[i].CancelPort != 0 && !dup[trials[i].CancelPort] {
			trials[i].CancelProcess, trials[i].CancelLog = s[0], s[1]
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// prediction is the model's answer for a fleet of two processes.
type prediction struct {
	lost, cancels int64
	processes     int
	clients       int
	seed          uint64
}

func modelPrediction() (prediction, error) {
	s, err := scenarios.Load("reuseport-fleet")
	if err != nil {
		return prediction{}, err
	}
	for _, kv := range [][2]string{{"pooler.processes", "2"}, {"workload.clients", "8"}} {
		if err := s.Set(kv[0], kv[1]); err != nil {
			return prediction{}, err
		}
	}
	points, err := s.Points()
	if err != nil {
		return prediction{}, err
	}
	if len(points) != 1 {
		return prediction{}, fmt.Errorf("model: %d points, want 1", len(points))
	}
	row := scenarios.Run(points, 1)[0]
	return prediction{
		lost:      row.Metrics.CancelsLost,
		cancels:   int64(row.Config.Pooler.Cancels),
		processes: row.Config.Pooler.Processes,
		clients:   row.Config.Workload.Clients,
		seed:      uint64(row.Config.Seed),
	}, nil
}

// wilson is the 95% Wilson score interval for k successes in n trials.
func wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return max(0, mid-half), min(1, mid+half)
}

type report struct {
	o       options
	trials  []trial
	pred    prediction
	pg, pgb string
	port    int
	elapsed time.Duration
}

func (r report) markdown() string {
	var lost, cancelled, errs int
	held := map[string]int{}
	lostBy := map[string]int{}
	for _, t := range r.trials {
		switch t.Outcome {
		case outLost:
			lost++
		case outCancelled:
			cancelled++
		default:
			errs++
		}
		if t.Outcome != outError {
			held[t.Process]++
			if t.Outcome == outLost {
				lostBy[t.Process]++
			}
		}
	}
	n := lost + cancelled
	frac := 0.0
	if n > 0 {
		frac = float64(lost) / float64(n)
	}
	lo, hi := wilson(lost, n)
	pf := float64(r.pred.lost) / float64(max(r.pred.cancels, 1))
	plo, phi := wilson(int(r.pred.lost), int(r.pred.cancels))
	exact := 1 - 1/float64(max(r.pred.processes, 1))
	inside := func(x float64) string {
		if x < lo || x > hi {
			return "outside"
		}
		return "inside"
	}
	var b strings.Builder
	w := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	w("# Lost query cancels with two PgBouncer processes on one port (so_reuseport, no peering)\n\n")
	w("Issue 7: a cancel request arrives on a new connection, which the kernel hashes to either\n")
	w("process; the process that does not hold the client does not know its key and drops it\n")
	w("(PgBouncer 1.18 has no peering; `docs/pgbouncer-rules.md` §1 \"Cancel routing\").\n\n")
	w("## Result\n\n")
	w("| | value |\n|---|---|\n")
	w("| trials (one cancel each) | %d |\n", len(r.trials))
	w("| counted (cancelled + lost) | %d |\n", n)
	w("| cancelled (SQLSTATE 57014 within %v) | %d |\n", r.o.window, cancelled)
	w("| **cancels lost** (query still running after %v) | **%d** |\n", r.o.window, lost)
	w("| errors (not counted) | %d |\n", errs)
	w("| **fraction lost** | **%.3f** (95%% Wilson CI %.3f – %.3f) |\n", frac, lo, hi)
	w("| model prediction (poolsim `reuseport-fleet`, pooler.processes=2, workload.clients=8) | %.3f (%d of %d cancels lost; sampling CI %.3f – %.3f) |\n",
		pf, r.pred.lost, r.pred.cancels, plo, phi)
	w("| model's expectation, 1 − 1/processes | %.3f |\n\n", exact)
	w("The model's prediction (%.3f) is %s the measured 95%% interval; its expectation 1 − 1/%d = %.3f is %s it.\n\n",
		pf, inside(pf), r.pred.processes, exact, inside(exact))
	w("Clients per process (counted trials): ")
	var parts []string
	for _, p := range []string{"A", "B", "?"} {
		if held[p] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d (%d lost)", p, held[p], lostBy[p]))
		}
	}
	w("%s. The process holding a client is read from SHOW CLIENTS on each process's own Unix socket.\n\n", strings.Join(parts, ", "))
	// Where each cancel landed (from the PgBouncers' logs) against the outcome.
	type cell struct{ landed, outcome string }
	cells := map[cell]int{}
	reasons := map[string]int{}
	agree, known := 0, 0
	for _, t := range r.trials {
		if t.Outcome == outError {
			continue
		}
		landed := "unknown"
		if t.Process != "?" && t.CancelProcess != "?" {
			known++
			landed = "other process"
			if t.Process == t.CancelProcess {
				landed = "same process"
			}
			if (landed == "other process") == (t.Outcome == outLost) {
				agree++
			}
		}
		cells[cell{landed, t.Outcome}]++
		if t.CancelLog != "" {
			reasons[t.CancelProcess+" vs "+t.Process+": "+t.CancelLog]++
		}
	}
	w("Where each cancel landed (the cancel connection's client port found in the PgBouncers' logs) against the outcome:\n\n")
	w("| cancel connection landed on | cancelled | lost |\n|---|---|---|\n")
	for _, l := range []string{"same process", "other process", "unknown"} {
		if cells[cell{l, outCancelled}]+cells[cell{l, outLost}] > 0 || l != "unknown" {
			w("| %s | %d | %d |\n", l, cells[cell{l, outCancelled}], cells[cell{l, outLost}])
		}
	}
	w("\n%d of %d attributed trials agree with the mechanism (lost exactly when the cancel landed on the other process).\n", agree, known)
	var rs []string
	for k, v := range reasons {
		rs = append(rs, fmt.Sprintf("%q × %d", k, v))
	}
	sort.Strings(rs)
	if len(rs) > 0 {
		w("PgBouncer's log reason for closing the cancel connection (landed vs holding process): %s.\n", strings.Join(rs, "; "))
	}
	w("\n")
	w("## Method\n\n")
	w("- A throwaway PostgreSQL (pgcluster) and two `pgbouncer` processes, both listening on 127.0.0.1:%d\n", r.port)
	w("  with `so_reuseport = 1`, `pool_mode = %s`, `default_pool_size = %d`, no peering.\n", r.o.mode, r.o.pool)
	w("- Each trial (%d at a time): pgconn connects through the shared port, sends `SELECT pg_sleep(%g)`,\n", r.o.parallel, r.o.sleep.Seconds())
	w("  waits %v and until the query is active in `pg_stat_activity`, then calls `CancelRequest`, which\n", r.o.delay)
	w("  opens a new connection to the same port. Cancelled = the query fails with 57014 within %v of the\n", r.o.window)
	w("  cancel; lost = it is still running then, and its backend is ended with `pg_terminate_backend`\n")
	w("  from a superuser connection straight to PostgreSQL (so each trial takes at most about %v).\n", r.o.delay+r.o.window)
	w("- The model draws, for each of its 1000 cancels, the process holding the client and the process the\n")
	w("  cancel lands on, uniformly from its seed; a cancel is lost when they differ (expected 1 − 1/N).\n\n")
	w("Per-trial data: `trials.csv` (trial, process holding the client and its port, process the cancel\n")
	w("connection landed on, its port and PgBouncer's log reason, outcome, SQLSTATE, time from the cancel to\n")
	w("the query's end).\n\n")
	w("## Environment\n\n")
	w("- Command: `go run ./bench/reuseport-cancels %s`\n", strings.Join(os.Args[1:], " "))
	w("- PostgreSQL %s; PgBouncer %s\n", r.pg, r.pgb)
	w("- %s, %s/%s, %d cores (GOMAXPROCS %d)", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if k, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		w(", Linux %s", strings.TrimSpace(string(k)))
	}
	w("\n- Run took %.1f s; model seed %d\n", r.elapsed.Seconds(), r.pred.seed)
	return b.String()
}

func writeCSV(path string, trials []trial) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"trial", "process", "client_port", "cancel_process", "cancel_port", "cancel_log", "cancel_after_ms", "outcome", "sqlstate", "end_after_cancel_ms", "error"})
	for _, t := range trials {
		_ = w.Write([]string{
			strconv.Itoa(t.N), t.Process, strconv.Itoa(t.ClientPort), t.CancelProcess, strconv.Itoa(t.CancelPort), t.CancelLog,
			strconv.FormatFloat(t.CancelAfterMS, 'f', 1, 64), t.Outcome, t.SQLState,
			strconv.FormatFloat(t.ElapsedMS, 'f', 1, 64), t.Err,
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
