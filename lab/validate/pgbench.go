package validate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/lab/load"
	"github.com/poolsim/poolsim/lab/probe"
	"github.com/poolsim/poolsim/sim"
)

// validate.driver: pgbench drives a pgbench-select row with pgbench itself, a
// process of its own, instead of poolsim's in-process Go driver: the
// measurement is then pgbench's, as a PgBouncer user runs it, and its CPU
// per statement is the testbed's driver. pgbench -S runs the same
// statement; every transaction is logged (-l) with its end and latency,
// and the load's result, the calibration's closed loops and their round
// trips are read from those logs.

// pgbenchTxn is one transaction pgbench logged.
type pgbenchTxn struct {
	client int
	end    time.Time
	lat    time.Duration
	thread int // its pgbench thread: the log file's number
}

// pgbenchProc is a running pgbench.
type pgbenchProc struct {
	cmd *exec.Cmd
	dir string // its log folder
	out bytes.Buffer
	// exited, if set, is called as soon as pgbench has exited, before
	// its log is read (which costs this process CPU of its own).
	exited func()
}

// startPgbench starts pgbench -S on dsn with clients connections (threads:
// one per core, no more than the clients) until limit (-t N transactions
// per client, or -T seconds), logging every transaction.
func startPgbench(ctx context.Context, bin, dsn string, clients int, seed uint64, limit ...string) (*pgbenchProc, error) {
	dir, err := os.MkdirTemp("", "poolsim-pgbench-")
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	jobs := max(1, min(clients, runtime.NumCPU()))
	args := append([]string{"-S", "-n", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(jobs),
		"--random-seed", strconv.FormatUint(seed, 10), "-l", "--log-prefix", filepath.Join(dir, "txn")}, limit...)
	args = append(args, dsn)
	p := &pgbenchProc{dir: dir}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	return p, nil
}

// Pid is the pgbench process's.
func (p *pgbenchProc) Pid() int { return p.cmd.Process.Pid }

// Wait waits for pgbench to end and reads its transactions; its log
// folder is removed.
func (p *pgbenchProc) Wait() ([]pgbenchTxn, error) {
	defer os.RemoveAll(p.dir)
	err := p.cmd.Wait()
	if p.exited != nil {
		p.exited()
	}
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w: %s", err, lastLines(p.out.String(), 5))
	}
	files, err := filepath.Glob(filepath.Join(p.dir, "txn.*"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("pgbench: no transaction log in %s: %s", p.dir, lastLines(p.out.String(), 5))
	}
	var txns []pgbenchTxn
	for _, f := range files {
		t, err := readPgbenchLog(f)
		if err != nil {
			return nil, err
		}
		th, err := pgbenchLogThread(f)
		if err != nil {
			return nil, err
		}
		for i := range t {
			t[i].thread = th
		}
		txns = append(txns, t...)
	}
	slices.SortFunc(txns, func(a, b pgbenchTxn) int { return a.end.Compare(b.end) })
	return txns, nil
}

// pgbenchLogThread is the thread that wrote a pgbench -l file: PREFIX.PID
// is thread 0's, PREFIX.PID.N thread N's.
func pgbenchLogThread(path string) (int, error) {
	f := strings.Split(filepath.Base(path), ".")
	if len(f) < 3 {
		return 0, nil
	}
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil || n < 0 {
		return 0, fmt.Errorf("pgbench: log file %s: want PREFIX.PID or PREFIX.PID.THREAD", filepath.Base(path))
	}
	return n, nil
}

// threadSpread is the slowest pgbench thread's transactions' mean
// latency over the fastest's (the model's Metrics.DriverThreadSpread);
// 0 with fewer than two threads.
func threadSpread(txns []pgbenchTxn) float64 {
	type acc struct {
		sum time.Duration
		n   int64
	}
	by := map[int]*acc{}
	for _, t := range txns {
		a := by[t.thread]
		if a == nil {
			a = &acc{}
			by[t.thread] = a
		}
		a.sum += t.lat
		a.n++
	}
	if len(by) < 2 {
		return 0
	}
	lo, hi := 0.0, 0.0
	for _, a := range by {
		x := float64(a.sum) / float64(a.n)
		if lo == 0 || x < lo {
			lo = x
		}
		hi = max(hi, x)
	}
	if lo == 0 {
		return 0
	}
	return hi / lo
}

// errPgbenchFailed is a transaction pgbench logged as failed or skipped.
var errPgbenchFailed = errors.New("pgbench logged a failed transaction")

// readPgbenchLog reads one pgbench -l file: client_id transaction_no
// time(µs) script_no time_epoch time_us per line.
func readPgbenchLog(path string) ([]pgbenchTxn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pgbench: %w", err)
	}
	defer f.Close()
	var out []pgbenchTxn
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		t, err := parsePgbenchLine(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("pgbench: %s line %d: %w", filepath.Base(path), n, err)
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("pgbench: %s: %w", filepath.Base(path), err)
	}
	return out, nil
}

// parsePgbenchLine reads one transaction of a pgbench -l log.
func parsePgbenchLine(line string) (pgbenchTxn, error) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return pgbenchTxn{}, fmt.Errorf("want client_id transaction_no time script_no time_epoch time_us, got %q", line)
	}
	if f[2] == "failed" || f[2] == "skipped" {
		return pgbenchTxn{}, fmt.Errorf("%w: %q", errPgbenchFailed, line)
	}
	var v [4]int64
	for i, k := range []int{0, 2, 4, 5} {
		x, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil || x < 0 {
			return pgbenchTxn{}, fmt.Errorf("field %d is not a count: %q", k+1, line)
		}
		v[i] = x
	}
	if v[3] >= 1e6 {
		return pgbenchTxn{}, fmt.Errorf("time_us %d is not below a second: %q", v[3], line)
	}
	return pgbenchTxn{client: int(v[0]), lat: time.Duration(v[1]) * time.Microsecond, end: time.Unix(v[2], v[3]*1e3)}, nil
}

// pgbenchResult is a closed run's result from its transactions: time
// zero is the first transaction's start, the steady window runs from the
// first completion to the first client's last, as the Go driver's.
func pgbenchResult(txns []pgbenchTxn, clients int) *load.Result {
	res := &load.Result{Clients: clients}
	if len(txns) == 0 {
		return res
	}
	res.Start, res.End = txns[0].end.Add(-txns[0].lat), txns[0].end
	last := map[int]time.Time{}
	for _, t := range txns {
		if s := t.end.Add(-t.lat); s.Before(res.Start) {
			res.Start = s
		}
		if t.end.After(res.End) {
			res.End = t.end
		}
		if t.end.After(last[t.client]) {
			last[t.client] = t.end
		}
		res.Latency.Add(sim.FromDuration(t.lat))
	}
	res.OKTxns, res.Stmts, res.Sessions = int64(len(txns)), int64(len(txns)), int64(len(last))
	res.SteadyStart = txns[0].end
	for _, e := range last {
		if res.SteadyEnd.IsZero() || e.Before(res.SteadyEnd) {
			res.SteadyEnd = e
		}
	}
	for _, t := range txns {
		if t.end.After(res.SteadyStart) && !t.end.After(res.SteadyEnd) {
			res.SteadyTxns++
		}
	}
	return res
}

// pgbenchGuard bounds one pgbench-driven run.
const pgbenchGuard = 20 * time.Minute

// pgbenchUse is what a pgbench run used of the machine: its CPU time,
// all its threads' (its rusage), and their waits for a core (schedstat run
// delay, if DelayOK).
type pgbenchUse struct {
	CPU, Delay time.Duration
	DelayOK    bool
	// Spread is how far apart its threads' clients fared (threadSpread).
	Spread float64
}

// runPgbenchLoad is a pgbench-driven row's run: clients connections, each
// running txns transactions. exited, if not nil, is called as soon as
// pgbench has exited, before its log is read.
func runPgbenchLoad(ctx context.Context, bin, dsn string, clients, txns int, seed uint64, exited func()) (res *load.Result, use pgbenchUse, err error) {
	// A guard: a pooler that stops answering must not hold the run
	// forever (pgbench has no timeout of its own).
	ctx, cancel := context.WithTimeout(ctx, pgbenchGuard)
	defer cancel()
	p, err := startPgbench(ctx, bin, dsn, clients, seed, "-t", strconv.Itoa(txns))
	if err != nil {
		return nil, use, err
	}
	p.exited = exited
	dw := watchDelay(ctx, p.Pid())
	t, err := p.Wait()
	use.Delay, use.DelayOK = dw.total()
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, use, fmt.Errorf("%w (stopped after %v)", err, pgbenchGuard)
		}
		return nil, use, err
	}
	if st := p.cmd.ProcessState; st != nil {
		use.CPU = st.UserTime() + st.SystemTime()
	}
	use.Spread = threadSpread(t)
	return pgbenchResult(t, clients), use, nil
}

// lastLines is s's last n lines, on one line.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], " | ")
}

// pgbenchDriver is validate.driver pgbench for a row's calibration: the
// binary, and how to find the load role's backends (pgbench's connections
// are not ours to ask for their PIDs).
type pgbenchDriver struct {
	bin     string
	servers func(context.Context) ([]int, error)
}

// pgbench is the row's pgbench driver, or nil for poolsim's own.
func (l *lab) pgbench() *pgbenchDriver {
	if l.live.Driver != "pgbench" {
		return nil
	}
	return &pgbenchDriver{bin: l.pgbenchBin, servers: l.serverPids}
}

// pgbenchWarm is how long a pgbench closed loop runs before it is
// measured: its connections open first, one after another per thread.
const pgbenchWarm = 500 * time.Millisecond

// loop is closedLoop with pgbench: n connections to dsn for dur after
// pgbenchWarm. self is pgbench's CPU (the driver's), proc this process's
// (the in-process proxy's, through it), watched extra's (pgbouncer's) and
// the load role's backends', in each in that order. Straight to
// PostgreSQL (direct) it waits for pgbench's backends to exit; through a
// pooler they are the pool's, which stays.
//
// pgbench runs for a fixed time (-T) and the window is measured by this
// process's clock: on a loaded machine pgbench can end (its connections
// slow to open, the pool's servers slow to find) before the window has
// closed, its backends gone before their CPU was read. Then the loop runs
// again with a longer -T, up to twice. The window opens once want
// backends are found (pgbench's connections, or the pool's servers, are
// slow to open on a loaded machine), or serversWait after the warm-up with
// fewer, as long as there is one.
func (d *pgbenchDriver) loop(ctx context.Context, dsn string, n, want int, seed uint64, dur time.Duration, extra []int, direct bool) (loopCPU, error) {
	margin := 300 * time.Millisecond
	for try := 0; ; try++ {
		out, late, err := d.loopOnce(ctx, dsn, n, want, seed, dur, margin, extra, direct)
		if !late {
			return out, err
		}
		if try == 2 {
			why := "the machine is too busy to measure on"
			if err != nil { // pgbench failed: say how
				why = err.Error()
			}
			return out, fmt.Errorf("calibrate testbed: pgbench with %d connections ended before its %v window closed, 3 times (the last run for %v more): %s", n, dur, margin, why)
		}
		margin += 2 * time.Second
	}
}

// loopOnce is one try of loop: pgbench runs for pgbenchWarm + dur +
// margin, rounded up to whole seconds; late says it had ended before the
// window closed.
func (d *pgbenchDriver) loopOnce(ctx context.Context, dsn string, n, want int, seed uint64, dur, margin time.Duration, extra []int, direct bool) (out loopCPU, late bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, dur+margin+time.Minute) // a guard, as closedLoop's
	defer cancel()
	secs := int((pgbenchWarm + dur + margin + time.Second - 1) / time.Second)
	p, err := startPgbench(ctx, d.bin, dsn, n, seed, "-T", strconv.Itoa(secs))
	if err != nil {
		return out, false, fmt.Errorf("calibrate testbed: %w", err)
	}
	waited := false
	defer func() {
		if !waited {
			_ = p.cmd.Process.Kill()
			_, _ = p.Wait()
		}
	}()
	if err := probe.Sleep(ctx, pgbenchWarm); err != nil {
		return out, false, fmt.Errorf("calibrate testbed: %w", err)
	}
	backends, err := d.await(ctx, want, p.Pid())
	if err != nil {
		return out, false, err
	}
	pids := append(append([]int{p.Pid()}, extra...), backends...)
	m0 := sampleCPU()
	e0, ok0 := eachCPU(pids)
	g0, gok0 := migrations(pids[1:]) // the pooler's and the servers', not pgbench's
	if err := probe.Sleep(ctx, dur); err != nil {
		return out, false, fmt.Errorf("calibrate testbed: %w", err)
	}
	m1 := sampleCPU()
	e1, ok1 := eachCPU(pids)
	g1, gok1 := migrations(pids[1:])
	out.migr, out.migrOK = g1-g0, gok0 && gok1 && len(pids) > 1
	late = ended(p.Pid())
	waited = true
	txns, err := p.Wait()
	if err != nil && !late {
		return out, false, fmt.Errorf("calibrate testbed: %w", err)
	}
	if direct {
		if err := d.gone(ctx); err != nil {
			return out, false, err
		}
	}
	if late {
		return out, true, err // pgbench's own failure, if it was one, for the last try's message
	}
	var ends, rt []time.Duration
	for _, t := range txns {
		if !t.end.Before(m0.at) && t.end.Before(m1.at) {
			out.stmts++
			ends = append(ends, t.end.Sub(m0.at))
			rt = append(rt, t.lat)
		}
	}
	out.wall = m1.at.Sub(m0.at)
	out.proc, out.instr = m1.self-m0.self, m1.instr-m0.instr
	out.watchedOK = ok0 && ok1 && len(backends) > 0
	if out.watchedOK {
		out.self = e1[0] - e0[0]
		out.addWatched(e0[1:], e1[1:])
	}
	out.busy = busyCores(m0, m1)
	out.speed = speedTimeline(ends, 0, out.wall)
	out.p50, out.p99 = medianP99(rt)
	return out, false, nil
}

// serversWait is how long a loop waits, after pgbenchWarm, for all the
// backends it wants before it measures the ones it has.
const serversWait = 3 * time.Second

// await finds the load's backends: it asks again every 20 ms until want
// are there, pgbench (pid) has ended, or serversWait has passed with at
// least one.
func (d *pgbenchDriver) await(ctx context.Context, want, pid int) ([]int, error) {
	start := time.Now()
	for {
		pids, err := d.servers(ctx)
		if err != nil || len(pids) >= want || ended(pid) || (len(pids) > 0 && time.Since(start) >= serversWait) {
			return pids, err
		}
		if err := probe.Sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, fmt.Errorf("calibrate testbed: find the load's %d backends (%d so far): %w", want, len(pids), err)
		}
	}
}

// ended reports whether process pid has exited (gone, or a zombie not
// yet waited for), from /proc/PID/stat's state.
func ended(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	st := b[i+2]
	return st == 'Z' || st == 'X'
}

// gone waits until pgbench's backends have exited, so that the next loop
// finds max_connections free.
func (d *pgbenchDriver) gone(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		pids, err := d.servers(ctx)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if err := probe.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("calibrate testbed: pgbench's %d backends did not exit: %w", len(pids), err)
		}
	}
}
