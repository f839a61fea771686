// Package probe tries each session feature of models/compat live, through a
// pooler (or straight against PostgreSQL), and reports which ones a pool
// mode really breaks.
//
// Every feature is probed the same way, in two transactions of one probe
// client P: the first sets the feature up (SET, LISTEN, PREPARE, a
// protocol-level Parse, an advisory lock, a WITH HOLD cursor, a temporary
// table), the second uses it. Between the two, a busy client B runs a long
// statement. With idle servers reused last in, first out, B takes the server
// P has just released, so in transaction and statement pooling P's second
// transaction runs on another server: the feature breaks exactly when it is
// tied to the server's session. With a direct connection to PostgreSQL
// (Spec.NotifyDSN) B holds its server until P is done (it waits for an
// advisory lock a watcher holds), else for Spec.Busy. Each transaction also
// reads pg_backend_pid(), so the report can say whether the server changed;
// a pooled probe whose server did not change is inconclusive and is
// retried.
// Transaction blocks are probed as BEGIN, two statements and COMMIT sent
// as separate messages while B is busy.
//
// The target needs a pool of at least two server connections per
// (database, user); Run opens two at the start by running two statements at
// once. Every network step is bounded by Spec.Timeout.
package probe

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
)

// Spec is one probe run.
type Spec struct {
	// DSN is the target: a pooler, or PostgreSQL for direct mode.
	DSN string
	// Mode is the target's pool mode (Direct for PostgreSQL itself); it
	// decides whether a probe whose server did not change is retried.
	Mode poolmode.Mode
	// NotifyDSN is a connection straight to PostgreSQL: the LISTEN probe
	// sends its NOTIFY from it, so the notifier needs no server of the pool
	// (in session mode both are taken), and B's hold on a server is timed
	// by an advisory lock taken there instead of by Busy. "" means DSN for
	// the NOTIFY, and Busy for B.
	NotifyDSN string
	// Timeout bounds each connection and statement; 0 means 10 s.
	Timeout time.Duration
	// Busy is how long B's statement keeps a server when there is no
	// NotifyDSN; 0 means 250 ms.
	Busy time.Duration
}

// Outcome is what one feature did.
type Outcome struct {
	Feature compat.Feature
	OK      bool
	// Changed reports that P's two transactions ran on different servers.
	Changed bool
	// Tries is how many attempts it took (a pooled probe whose server did
	// not change is retried, up to three times).
	Tries  int
	Detail string
}

// Result is one mode's probes, in compat.Features order.
type Result struct {
	Mode     poolmode.Mode
	Outcomes []Outcome
}

// Matrix is the observed feature matrix.
func (r Result) Matrix() compat.Matrix {
	var m compat.Matrix
	for _, o := range r.Outcomes {
		m[o.Feature] = o.OK
	}
	return m
}

const attempts = 3

// Run probes every feature of compat.Features through spec.DSN.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if spec.Timeout <= 0 {
		spec.Timeout = 10 * time.Second
	}
	if spec.Busy <= 0 {
		spec.Busy = 250 * time.Millisecond
	}
	p := &prober{spec: spec, tag: strconv.FormatInt(time.Now().UnixNano()%1_000_000_000, 36)}
	if err := p.warm(ctx); err != nil {
		return Result{Mode: spec.Mode}, err
	}
	res := Result{Mode: spec.Mode}
	for _, f := range compat.Features {
		var o Outcome
		var err error
		for try := 1; try <= attempts; try++ {
			o, err = p.probe(ctx, f)
			o.Feature, o.Tries = f, try
			if err != nil {
				return res, fmt.Errorf("probe %s: %w", f, err)
			}
			if !spec.Mode.Pooled() || spec.Mode == poolmode.Session || o.Changed || !o.OK || f == compat.Transactions {
				break
			}
		}
		if spec.Mode.Pooled() && spec.Mode != poolmode.Session && o.OK && !o.Changed && f != compat.Transactions {
			o.Detail += " (inconclusive: the server never changed)"
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	return res, nil
}

type prober struct {
	spec Spec
	tag  string // makes names unique per run
	n    atomic.Int64
}

func (p *prober) connect(ctx context.Context, onNotify func()) (*pgconn.PgConn, error) {
	return p.connectTo(ctx, p.spec.DSN, onNotify)
}

func (p *prober) connectTo(ctx context.Context, dsn string, onNotify func()) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = p.spec.Timeout
	if onNotify != nil {
		cfg.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) { onNotify() }
	}
	return pgconn.ConnectConfig(ctx, cfg)
}

func closeConn(c *pgconn.PgConn) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// exec runs sql (a simple Query, possibly several statements) bounded by the
// timeout. When the first statement is SELECT pg_backend_pid() its value is
// returned even if a later one fails.
func (p *prober) exec(ctx context.Context, c *pgconn.PgConn, sql string) ([]*pgconn.Result, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, p.spec.Timeout)
	defer cancel()
	rs, err := c.Exec(ctx, sql).ReadAll()
	var pid uint32
	if len(rs) > 0 && len(rs[0].Rows) == 1 && len(rs[0].Rows[0]) >= 1 {
		if v, perr := strconv.ParseUint(string(rs[0].Rows[0][0]), 10, 32); perr == nil {
			pid = uint32(v)
		}
	}
	return rs, pid, err
}

// warm opens two server connections: two clients each run a statement at
// the same time, so the pool must hold two.
func (p *prober) warm(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() { // owner: warm; ends with the statement
			defer wg.Done()
			c, err := p.connect(ctx, nil)
			if err != nil {
				errs[i] = err
				return
			}
			defer closeConn(c)
			_, _, errs[i] = p.exec(ctx, c, "SELECT pg_sleep(0.05)")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("probe: warm up: %w", err)
	}
	return nil
}

// busy makes B hold a server until wait is called; wait blocks until B's
// statement has ended.
//
// With a direct connection (NotifyDSN) B's statement waits for an advisory
// lock that a watcher holds, so B keeps its server exactly until wait
// releases the lock, and busy returns once B is seen waiting: nothing
// depends on how fast the machine is. Without one, B sleeps for Busy and
// busy gives it a moment to start.
func (p *prober) busy(ctx context.Context, b *pgconn.PgConn) (wait func()) {
	// A pooler puts P's server back before P has its result (on
	// ReadyForQuery); a moment more, so that B takes that server.
	_ = Sleep(ctx, 5*time.Millisecond)
	tag := "-- poolsim probe busy " + p.tag + "_" + strconv.FormatInt(p.n.Add(1), 10)
	if p.spec.NotifyDSN != "" {
		if wait, ok := p.busyLocked(ctx, b, tag); ok {
			return wait
		}
	}
	sql := "SELECT pg_sleep(" + strconv.FormatFloat(p.spec.Busy.Seconds(), 'f', -1, 64) + ") " + tag
	done := make(chan struct{})
	go func() { // owner: busy's caller, through wait
		defer close(done)
		_, _, _ = p.exec(ctx, b, sql)
	}()
	t := time.NewTimer(min(40*time.Millisecond, p.spec.Busy/4))
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	return func() { <-done }
}

// busyLockClass is the first key of the advisory locks busy uses (the
// two-key form, which never meets the AdvisoryLocks probe's one-key locks).
const busyLockClass = 0x706f6f6c // "pool"

// busyLocked is busy with a lock: a watcher connection straight to
// PostgreSQL takes an advisory lock, B's statement waits for it (and
// releases it at once when it gets it), and the returned wait releases it.
// ok is false when the watcher cannot be had.
func (p *prober) busyLocked(ctx context.Context, b *pgconn.PgConn, tag string) (wait func(), ok bool) {
	w, err := p.connectTo(ctx, p.spec.NotifyDSN, nil)
	if err != nil {
		return nil, false
	}
	key := strconv.Itoa(busyLockClass) + ", " + strconv.FormatInt(p.n.Add(1), 10)
	if _, _, err := p.exec(ctx, w, "SELECT pg_advisory_lock("+key+")"); err != nil {
		closeConn(w)
		return nil, false
	}
	sql := "SELECT pg_advisory_lock(" + key + "), pg_advisory_unlock(" + key + ") " + tag
	done := make(chan struct{})
	go func() { // owner: busyLocked's caller, through wait
		defer close(done)
		_, _, _ = p.exec(ctx, b, sql)
	}()
	p.running(ctx, w, sql)
	return func() {
		_, _, _ = p.exec(ctx, w, "SELECT pg_advisory_unlock("+key+")")
		<-done
		closeConn(w)
	}, true
}

// running waits, on w (straight to PostgreSQL), until sql is active on a
// server (waiting for its lock counts), up to the timeout; it reports
// whether it saw it.
func (p *prober) running(ctx context.Context, w *pgconn.PgConn, sql string) bool {
	ctx, cancel := context.WithTimeout(ctx, p.spec.Timeout)
	defer cancel()
	q := "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = '" + strings.ReplaceAll(sql, "'", "''") + "'"
	for {
		rs, err := w.Exec(ctx, q).ReadAll()
		if err != nil {
			return false
		}
		if len(rs) == 1 && len(rs[0].Rows) == 1 && string(rs[0].Rows[0][0]) != "0" {
			return true
		}
		t := time.NewTimer(2 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
}

// step is one of P's two transactions: it returns P's server process id.
type step func(ctx context.Context, c *pgconn.PgConn) (pid uint32, err error)

// check is P's second transaction: it says whether the feature worked.
type check func(ctx context.Context, c *pgconn.PgConn) (pid uint32, ok bool, detail string, err error)

func (p *prober) probe(ctx context.Context, f compat.Feature) (Outcome, error) {
	id := p.tag + "_" + strconv.FormatInt(p.n.Add(1), 10)
	if f == compat.Transactions {
		return p.transactions(ctx)
	}
	var notified atomic.Bool
	var onNotify func()
	if f == compat.Listen {
		onNotify = func() { notified.Store(true) }
	}
	var setup step
	var use check
	simple := func(setupSQL, useSQL string, judge func(rs []*pgconn.Result) (bool, string)) {
		setup = func(ctx context.Context, c *pgconn.PgConn) (uint32, error) {
			_, pid, err := p.exec(ctx, c, "SELECT pg_backend_pid(); "+setupSQL)
			return pid, err
		}
		use = func(ctx context.Context, c *pgconn.PgConn) (uint32, bool, string, error) {
			rs, pid, err := p.exec(ctx, c, "SELECT pg_backend_pid(); "+useSQL)
			if err != nil {
				return pid, false, pgMessage(err), nil
			}
			ok, detail := judge(rs)
			return pid, ok, detail, nil
		}
	}
	noError := func(what string) func([]*pgconn.Result) (bool, string) {
		return func([]*pgconn.Result) (bool, string) { return true, what }
	}
	second := func(rs []*pgconn.Result) string {
		if len(rs) < 2 || len(rs[1].Rows) == 0 || len(rs[1].Rows[0]) == 0 || rs[1].Rows[0][0] == nil {
			return ""
		}
		return string(rs[1].Rows[0][0])
	}
	switch f {
	case compat.SetReset:
		val := "v" + id
		simple("SET poolsim.probe = '"+val+"'", "SELECT current_setting('poolsim.probe', true)",
			func(rs []*pgconn.Result) (bool, string) {
				got := second(rs)
				if got == val {
					return true, "SET value seen in the next transaction"
				}
				return false, fmt.Sprintf("SET value lost: poolsim.probe is %q in the next transaction", got)
			})
	case compat.Listen:
		ch := "poolsim_probe_" + id
		setup = func(ctx context.Context, c *pgconn.PgConn) (uint32, error) {
			_, pid, err := p.exec(ctx, c, "SELECT pg_backend_pid(); LISTEN "+ch)
			return pid, err
		}
		use = func(ctx context.Context, c *pgconn.PgConn) (uint32, bool, string, error) {
			_, pid, err := p.exec(ctx, c, "SELECT pg_backend_pid()")
			if err != nil {
				return pid, false, pgMessage(err), nil
			}
			ndsn := p.spec.NotifyDSN
			if ndsn == "" {
				ndsn = p.spec.DSN
			}
			n, err := p.connectTo(ctx, ndsn, nil)
			if err != nil {
				return pid, false, "", fmt.Errorf("notifier: %w", err)
			}
			_, _, err = p.exec(ctx, n, "NOTIFY "+ch)
			closeConn(n)
			if err != nil {
				return pid, false, "", fmt.Errorf("notifier: %w", err)
			}
			// Poll for it while B still holds the server P listened on, so
			// that P cannot be handed that server (and its notification).
			// B sleeping holds it for Busy; B waiting for the watcher's
			// lock holds it until use returns, so the window can allow for
			// a busy machine.
			window := p.spec.Busy / 3
			if p.spec.NotifyDSN != "" {
				window = max(window, time.Second)
			}
			until := time.Now().Add(window)
			for {
				if _, _, err := p.exec(ctx, c, "SELECT 1"); err != nil {
					return pid, false, pgMessage(err), nil
				}
				if notified.Load() {
					return pid, true, "NOTIFY delivered to the listener", nil
				}
				if time.Now().After(until) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			return pid, false, "NOTIFY never reached the listener", nil
		}
	case compat.SQLPrepare:
		name := "poolsim_p_" + id
		simple("PREPARE "+name+" AS SELECT 1", "EXECUTE "+name, noError("EXECUTE found the statement"))
	case compat.ProtocolPrepared:
		name := "poolsim_pp_" + id
		setup = func(ctx context.Context, c *pgconn.PgConn) (uint32, error) {
			return p.pipeline(ctx, c, func(pl *pgconn.Pipeline) { pl.SendPrepare(name, "SELECT 1", nil) })
		}
		use = func(ctx context.Context, c *pgconn.PgConn) (uint32, bool, string, error) {
			pid, err := p.pipeline(ctx, c, func(pl *pgconn.Pipeline) { pl.SendQueryPrepared(name, nil, nil, nil) })
			if err != nil {
				return pid, false, pgMessage(err), nil
			}
			return pid, true, "Bind found the statement", nil
		}
	case compat.AdvisoryLocks:
		key := strconv.FormatInt(time.Now().UnixNano()%1_000_000_007+p.n.Load(), 10)
		simple("SELECT pg_advisory_lock("+key+")", "SELECT pg_advisory_unlock("+key+")",
			func(rs []*pgconn.Result) (bool, string) {
				if second(rs) == "t" {
					return true, "the lock was still held"
				}
				return false, "pg_advisory_unlock: the session does not hold the lock"
			})
	case compat.WithHoldCursors:
		name := "poolsim_c_" + id
		simple("DECLARE "+name+" CURSOR WITH HOLD FOR SELECT 1", "FETCH 1 FROM "+name, noError("FETCH found the cursor"))
	case compat.TempTables:
		name := "poolsim_t_" + id
		simple("CREATE TEMP TABLE "+name+" (x int)", "SELECT count(*) FROM "+name, noError("the temporary table was there"))
	default:
		return Outcome{}, fmt.Errorf("no probe for %v", f)
	}
	return p.twoTransactions(ctx, onNotify, setup, use)
}

// twoTransactions runs setup, makes B busy, then runs use.
func (p *prober) twoTransactions(ctx context.Context, onNotify func(), setup step, use check) (Outcome, error) {
	c, err := p.connect(ctx, onNotify)
	if err != nil {
		return Outcome{}, err
	}
	defer closeConn(c)
	b, err := p.connect(ctx, nil)
	if err != nil {
		return Outcome{}, err
	}
	defer closeConn(b)
	pid1, err := setup(ctx, c)
	if err != nil {
		return Outcome{OK: false, Detail: "setting it up failed: " + pgMessage(err)}, nil
	}
	wait := p.busy(ctx, b)
	pid2, ok, detail, err := use(ctx, c)
	wait()
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{OK: ok, Changed: pid1 != 0 && pid2 != 0 && pid1 != pid2, Detail: detail}, nil
}

// pipeline sends SELECT pg_backend_pid() and add's messages, then one Sync:
// one transaction of the extended protocol.
func (p *prober) pipeline(ctx context.Context, c *pgconn.PgConn, add func(*pgconn.Pipeline)) (uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, p.spec.Timeout)
	defer cancel()
	pl := c.StartPipeline(ctx)
	pl.SendQueryParams("SELECT pg_backend_pid()", nil, nil, nil, nil)
	add(pl)
	if err := pl.Sync(); err != nil {
		_ = pl.Close()
		return 0, err
	}
	var pid uint32
	var first error
	for {
		r, err := pl.GetResults()
		if err != nil {
			if first == nil {
				first = err
			}
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				continue // the server skips to the Sync
			}
			break
		}
		if r == nil {
			break
		}
		switch r := r.(type) {
		case *pgconn.ResultReader:
			res := r.Read()
			if res.Err != nil && first == nil {
				first = res.Err
			}
			if pid == 0 && len(res.Rows) == 1 && len(res.Rows[0]) == 1 {
				if v, err := strconv.ParseUint(string(res.Rows[0][0]), 10, 32); err == nil {
					pid = uint32(v)
				}
			}
		case *pgconn.PipelineSync:
			if err := pl.Close(); err != nil && first == nil {
				first = err
			}
			return pid, first
		}
	}
	if err := pl.Close(); err != nil && first == nil {
		first = err
	}
	return pid, first
}

// transactions probes a transaction block sent as separate messages: the
// two statements must see the same transaction id.
func (p *prober) transactions(ctx context.Context) (Outcome, error) {
	c, err := p.connect(ctx, nil)
	if err != nil {
		return Outcome{}, err
	}
	defer closeConn(c)
	b, err := p.connect(ctx, nil)
	if err != nil {
		return Outcome{}, err
	}
	defer closeConn(b)
	fail := func(what string, err error) Outcome {
		return Outcome{Detail: what + ": " + pgMessage(err)}
	}
	if _, _, err := p.exec(ctx, c, "BEGIN"); err != nil {
		return fail("BEGIN", err), nil
	}
	r1, pid1, err := p.exec(ctx, c, "SELECT pg_backend_pid(), txid_current()")
	if err != nil {
		return fail("first statement", err), nil
	}
	wait := p.busy(ctx, b)
	r2, pid2, err := p.exec(ctx, c, "SELECT pg_backend_pid(), txid_current()")
	wait()
	if err != nil {
		return fail("second statement", err), nil
	}
	if _, _, err := p.exec(ctx, c, "COMMIT"); err != nil {
		return fail("COMMIT", err), nil
	}
	x1, x2 := cell(r1, 1), cell(r2, 1)
	o := Outcome{OK: x1 == x2 && pid1 == pid2, Changed: pid1 != pid2}
	if o.OK {
		o.Detail = "both statements ran in transaction " + x1
	} else {
		o.Detail = fmt.Sprintf("the statements ran in transactions %s and %s", x1, x2)
	}
	return o, nil
}

// pgMessage is an error's server message, or the error.
func pgMessage(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity + " " + pe.Code + " " + pe.Message
	}
	return err.Error()
}

// cell is column col of the first row of the first result, or "".
func cell(rs []*pgconn.Result, col int) string {
	if len(rs) == 0 || len(rs[0].Rows) == 0 || len(rs[0].Rows[0]) <= col {
		return ""
	}
	return string(rs[0].Rows[0][col])
}

// Sleep waits d, or until ctx is done (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
