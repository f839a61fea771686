package load

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Spec is one load run.
type Spec struct {
	// DSN is where the clients connect: the pooler, or PostgreSQL itself.
	DSN string
	// Workload is the scenario's workload (closed or open).
	Workload system.Workload
	// Seed seeds the query, think and arrival draws.
	Seed uint64
	// Blocks wraps each multi-statement transaction in BEGIN ... COMMIT.
	Blocks bool
	// Statement makes each statement's SQL.
	Statement Statement
	// ConnectTimeout bounds one connection attempt; 0 means 30 s.
	ConnectTimeout time.Duration
	// Timeout bounds the whole run after the start; 0 means 10 minutes.
	Timeout time.Duration
	// Settle is how long a closed workload waits after its last connection
	// attempt before time zero, so that the work of the logins (refused
	// backends exiting, pooler logins) is over when the sessions start, as
	// in a model where connecting is instantaneous.
	Settle time.Duration
	// Warm, if set, runs once on each connection of a closed workload as
	// soon as it connects, before time zero: a new PostgreSQL backend
	// loads its catalog caches on its first statement (1.4-1.6 ms more
	// for a first pg_sleep than for the next on a 2-vCPU VM), part of
	// the connection's cost, which a model whose clients connect before
	// time zero does not have. A failure counts as the client's login
	// failing.
	Warm string
	// KeepConns keeps a closed workload's connections open after their
	// sessions end, until every client's session has ended (then they are
	// closed together, after the run's last transaction). Straight to
	// PostgreSQL a close ends the connection's backend, and backends that
	// exit together (the clients finish within milliseconds of each
	// other) take the cores from the last sessions' last statements: on
	// a 2-vCPU VM, 20 sessions of pg_sleep(3 ms) statements, statements
	// sent 225-235 ms after time zero took 12-65 ms in every run, against
	// 5 ms before - a cost of disconnecting that a model whose sessions
	// end at their last result does not have, as Warm and Settle keep the
	// logins' cost out of the run.
	KeepConns bool
	// Prepared runs the workload's statements as workload.statements
	// prepared-statement texts with the extended protocol (see
	// PreparedCounts); Statement must be a sleep or cpu statement.
	Prepared bool
	// Started, when set, is called at time zero, just before the sessions
	// start (after every closed-workload client has connected), so that a
	// caller can drop what the connections recorded so far.
	Started func()
	// SessionBase is the model's number of the group's first session (a
	// class's: its index << 40 in a configuration with classes, else 0):
	// a request's transaction count is drawn from the model's own stream
	// at (SessionBase + client, request), so that the live run and the
	// model run the same number of transactions.
	SessionBase uint64
	// ArrivalStream names the seeded stream of an open workload's
	// arrivals: the model's ("arrivals", or "arrivals/CLASS" with classes)
	// gives the model's arrival times; "" keeps the driver's own ("load
	// arrivals").
	ArrivalStream string
	// Hold makes every request hold a WITH HOLD cursor across its
	// transactions (see hold.go).
	Hold bool
}

// Result is what a run measured.
type Result struct {
	Start, End time.Time // time zero, and the last completed transaction
	// The steady window of a closed run, as the model's tps_steady: from
	// the first completed transaction (SteadyStart) to the end of the
	// first session among the clients that completed every transaction
	// (SteadyEnd), and the transactions completed within it.
	SteadyStart, SteadyEnd time.Time
	SteadyTxns             int64
	Clients                int   // clients that tried to connect
	OKTxns                 int64 // transactions completed
	Refused                int64 // connection attempts refused (53300, or max_client_conn)
	WaitTimeouts           int64 // clients disconnected by query_wait_timeout
	Failed                 int64 // clients ended by any other error
	Sessions               int64 // clients that sent at least one statement
	Stmts                  int64 // statements completed
	Latency                sim.Samples
	StmtRT                 sim.Samples // round trip of every completed statement but a transaction's first (those wait for a server in session and transaction pooling)
	Think                  sim.Samples // how long every think really took
	App                    sim.Samples // how long every app pause really took (request-level workloads; else every pause is a think)
	// Requests (workload.requests_per_session; without it every
	// transaction is a request): completed requests, requests a failure
	// ended, and the latency of every completed one, from its first
	// statement sent to its last result received.
	OKReqs     int64
	FailedReqs int64
	ReqLatency sim.Samples
	Errors     []string // the first few unexpected errors, deduplicated
	// Prepared is what the drivers did with prepared statements
	// (Spec.Prepared).
	Prepared PreparedCounts
}

// Wall is time zero to the last completed transaction (0 without any).
func (r *Result) Wall() time.Duration {
	if r.OKTxns == 0 || r.End.Before(r.Start) {
		return 0
	}
	return r.End.Sub(r.Start)
}

// SteadyTPS is the transactions completed in the steady window per
// second: the model's tps_steady for a closed workload (the cold start and
// the ragged end, when fewer clients remain, left out). 0 without one.
func (r *Result) SteadyTPS() float64 {
	if r.SteadyEnd.IsZero() || !r.SteadyEnd.After(r.SteadyStart) {
		return 0
	}
	return float64(r.SteadyTxns) / r.SteadyEnd.Sub(r.SteadyStart).Seconds()
}

// TPS is completed transactions per second of wall time.
func (r *Result) TPS() float64 {
	w := r.Wall()
	if w <= 0 {
		return 0
	}
	return float64(r.OKTxns) / w.Seconds()
}

const maxErrors = 5

// outcome of an error.
type outcome uint8

const (
	failed outcome = iota
	refused
	waitTimeout
)

// classify tells a refusal (PostgreSQL's max_connections, a pooler's
// max_client_conn) and a query_wait_timeout from other errors.
func classify(err error) outcome {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return failed
	}
	switch {
	case pe.Code == poolmode.SQLStateTooManyConn:
		return refused
	case pe.Code == poolmode.SQLStatePooler && pe.Message == poolmode.ErrTooManyClients:
		return refused // PostgreSQL's refusal passed on by a pooler (PgBouncer sends it as 08P01)
	case pe.Code == poolmode.SQLStatePooler && strings.Contains(pe.Message, "max_client_conn"):
		return refused
	case pe.Code == poolmode.SQLStatePooler && pe.Message == poolmode.ErrQueryWaitTimeout:
		return waitTimeout
	}
	return failed
}

// client is one client's private record, merged after the run.
type client struct {
	ok, stmts        int64
	end              time.Time
	done             []time.Time // when each completed transaction ended
	ran              bool
	outcome          outcome
	err              error
	lat, rt, think   []sim.Time
	app, reqLat      []sim.Time
	okReqs, failReqs int64
	conn             *pgconn.PgConn
	queryRNG, thkRNG *sim.Rand
	index            int
	ps               *preparedState // Spec.Prepared
}

// Run runs spec's workload and returns what it measured. An error means the
// run could not be made (bad spec, context done); errors of single clients
// are counted in the Result.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	r, err := newRun(spec)
	if err != nil {
		return nil, err
	}
	if spec.Workload.Open() {
		return r.open(ctx)
	}
	return r.closed(ctx)
}

// newRun checks spec and prepares its run.
func newRun(spec Spec) (*run, error) {
	if err := spec.Statement.Validate(); err != nil {
		return nil, err
	}
	w := spec.Workload
	if n, _ := w.Requests(); n < 1 || w.StmtsPerTxn < 1 {
		return nil, fmt.Errorf("load: txns_per_session (or requests_per_session) and stmts_per_txn must be at least 1")
	}
	if spec.Prepared && w.RequestLevel() {
		return nil, fmt.Errorf("load: prepared statements run without a request level (workload.requests_per_session)")
	}
	cfg, err := pgconn.ParseConfig(spec.DSN)
	if err != nil {
		return nil, fmt.Errorf("load: dsn: %w", err)
	}
	cfg.ConnectTimeout = spec.ConnectTimeout
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 30 * time.Second
	}
	timeout := spec.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	r := &run{spec: spec, cfg: cfg, timeout: timeout}
	if spec.Prepared {
		if err := r.preparedSetup(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// RunGroups runs several groups of clients at once - the client classes
// of a scenario, each with its own DSN (pool), workload and statement - and
// returns each group's Result in order. Closed groups share one barrier
// and one time zero; open groups start their arrivals together. Groups
// must be all closed or all open.
func RunGroups(ctx context.Context, specs []Spec) ([]*Result, error) {
	if len(specs) == 0 {
		return nil, errors.New("load: no groups")
	}
	runs := make([]*run, len(specs))
	open := 0
	for i, spec := range specs {
		r, err := newRun(spec)
		if err != nil {
			return nil, fmt.Errorf("load: group %d: %w", i+1, err)
		}
		runs[i] = r
		if spec.Workload.Open() {
			open++
		}
	}
	if open != 0 && open != len(specs) {
		return nil, errors.New("load: groups must be all closed or all open")
	}
	if open == 0 {
		return closedGroups(ctx, runs)
	}
	res := make([]*Result, len(runs))
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() { // owner: RunGroups; ends when the group's arrivals and sessions do
			defer wg.Done()
			res[i], errs[i] = r.open(ctx)
		}()
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

type run struct {
	spec    Spec
	cfg     *pgconn.Config
	timeout time.Duration
	cdf     []float64 // Spec.Prepared: statement popularity
	texts   []string  // Spec.Prepared: statement texts
	keep    bool      // Spec.KeepConns, in a closed run: closedGroups closes the connections
}

func (r *run) newClient(i int) *client {
	c := &client{
		queryRNG: sim.NewRand(r.spec.Seed, fmt.Sprintf("load query %d", i)),
		thkRNG:   sim.NewRand(r.spec.Seed, fmt.Sprintf("load think %d", i)),
		index:    i,
	}
	if r.spec.Prepared {
		c.ps = &preparedState{
			rng:      sim.NewRand(r.spec.Seed, fmt.Sprintf("load statements %d", i)),
			execs:    make([]int32, len(r.cdf)),
			prepared: make([]bool, len(r.cdf)),
		}
	}
	return c
}

// connect opens c's connection; a failure ends the client.
func (r *run) connect(ctx context.Context, c *client) bool {
	conn, err := pgconn.ConnectConfig(ctx, r.cfg)
	if err != nil {
		c.outcome, c.err = classify(err), err
		return false
	}
	c.conn = conn
	return true
}

// warm runs Spec.Warm on c's new connection, if set; a failure is the
// client's, as a failed login is.
func (r *run) warm(ctx context.Context, c *client) bool {
	if r.spec.Warm == "" {
		return true
	}
	if _, err := c.conn.Exec(ctx, r.spec.Warm).ReadAll(); err != nil {
		c.outcome, c.err = classify(err), fmt.Errorf("load: warm the connection: %w", err)
		closeConn(c.conn)
		c.conn = nil
		return false
	}
	return true
}

func (r *run) closed(ctx context.Context) (*Result, error) {
	res, err := closedGroups(ctx, []*run{r})
	if len(res) == 0 {
		return nil, err
	}
	return res[0], err
}

// closedGroups runs closed groups of clients together: every client of
// every group connects, and after the barrier and the longest Settle they
// all start at one time zero.
func closedGroups(ctx context.Context, runs []*run) ([]*Result, error) {
	clients := make([][]*client, len(runs))
	start := make(chan struct{})
	var connected, done sync.WaitGroup
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var settle, timeout time.Duration
	for g, r := range runs {
		settle, timeout = max(settle, r.spec.Settle), max(timeout, r.timeout)
		r.keep = r.spec.KeepConns
		clients[g] = make([]*client, r.spec.Workload.Clients)
		for i := range r.spec.Workload.Clients {
			c := r.newClient(i)
			clients[g][i] = c
			connected.Add(1)
			done.Add(1)
			go func() { // owner: closedGroups; ends when the session does
				defer done.Done()
				ok := r.connect(runCtx, c) && r.warm(runCtx, c)
				connected.Done()
				if !ok {
					return
				}
				select {
				case <-start:
				case <-runCtx.Done():
					closeConn(c.conn)
					return
				}
				r.session(runCtx, c)
			}()
		}
	}
	connected.Wait()
	if settle > 0 {
		t := time.NewTimer(settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := ctx.Err(); err != nil {
		cancel()
		done.Wait()
		return nil, fmt.Errorf("load: %w", err)
	}
	for _, r := range runs {
		if r.spec.Started != nil {
			r.spec.Started()
		}
	}
	t0 := time.Now()
	deadline := time.AfterFunc(timeout, cancel)
	close(start)
	done.Wait()
	deadline.Stop()
	var closing sync.WaitGroup
	for g, r := range runs {
		if !r.keep {
			continue
		}
		for _, c := range clients[g] {
			if c.conn != nil {
				closing.Go(func() { closeConn(c.conn) }) // owner: closedGroups, within closeConn's second
			}
		}
	}
	closing.Wait()
	res := make([]*Result, len(runs))
	for g := range runs {
		res[g] = merge(t0, clients[g])
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("load: %w", err)
	}
	if runCtx.Err() != nil {
		return res, fmt.Errorf("load: run timed out after %v", timeout)
	}
	return res, nil
}

func (r *run) open(ctx context.Context) (*Result, error) {
	w := r.spec.Workload
	if w.Persistent() {
		return r.workers(ctx)
	}
	runCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var done sync.WaitGroup
	var clients []*client
	if r.spec.Started != nil {
		r.spec.Started()
	}
	t0 := time.Now()
	first := time.Time{}
	r.arrivals(runCtx, t0, func(i int, _ time.Time) {
		if first.IsZero() {
			first = time.Now()
		}
		c := r.newClient(i)
		clients = append(clients, c)
		done.Add(1)
		go func() { // owner: open; ends when the session does
			defer done.Done()
			if r.connect(runCtx, c) {
				r.session(runCtx, c)
			}
		}()
	})
	done.Wait()
	if first.IsZero() {
		first = t0
	}
	res := merge(first, clients) // the model's wall starts at the first arrival
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("load: %w", err)
	}
	if runCtx.Err() != nil {
		return res, fmt.Errorf("load: run timed out after %v", r.timeout)
	}
	return res, nil
}

// session runs c's requests and closes its connection: requests of
// transactions of statements, with the app pause between the statements of
// a transaction and between the transactions of a request, and think
// between requests (and, for a closed request-level client, before its
// first one, as in the model). Without a request level every transaction
// is a request and every pause a think, as before requests existed.
func (r *run) session(ctx context.Context, c *client) {
	if c.ps != nil {
		r.preparedSession(ctx, c)
		return
	}
	defer r.hangUp(c)
	w := r.spec.Workload
	blocks := r.spec.Blocks && w.StmtsPerTxn > 1
	reqs, per := w.Requests()
	if w.RequestLevel() && !w.Open() {
		if !r.pause(ctx, c, w.Think, &c.think) {
			return
		}
	}
	for req := range reqs {
		n := r.txnsOf(r.spec.SessionBase+uint64(c.index), uint64(req), per)
		var reqStart time.Time
		lastReq := req == reqs-1
		for txn := range n {
			var t0 time.Time
			for s := range w.StmtsPerTxn {
				sql := r.statementSQL(c.queryRNG, txn, n, s, blocks)
				t := time.Now()
				if s == 0 {
					t0 = t
					if txn == 0 {
						reqStart = t
					}
				}
				c.ran = true
				_, err := c.conn.Exec(ctx, sql).ReadAll()
				end := time.Now()
				if err != nil {
					c.outcome, c.err = classify(err), err
					c.failReqs += int64(reqs - req)
					return
				}
				lastStmt := s == w.StmtsPerTxn-1
				c.statementDone(s, lastStmt, t0, t, end)
				if lastStmt && txn == n-1 {
					c.okReqs++
					c.reqLat = append(c.reqLat, sim.FromDuration(end.Sub(reqStart)))
				}
				if lastReq && txn == n-1 && lastStmt {
					return // the session's last statement: no pause after it
				}
				switch {
				case !w.RequestLevel():
					if !r.pause(ctx, c, w.Think, &c.think) {
						return
					}
				case lastStmt && txn == n-1:
					if !r.pause(ctx, c, w.Think, &c.think) {
						return
					}
				default:
					if !r.pause(ctx, c, w.AppPause(), &c.app) {
						return
					}
				}
			}
		}
	}
}

// arrivals calls each with every arrival of the open workload in turn -
// its number and its time - at that time after t0, until the workload's
// duration is over or ctx is done. The times are the seeded stream's
// (Spec.ArrivalStream: the model's gives the model's arrivals), the gaps
// in the model's arithmetic (sim.FromSeconds).
func (r *run) arrivals(ctx context.Context, t0 time.Time, each func(i int, at time.Time)) {
	w := r.spec.Workload
	name := r.spec.ArrivalStream
	if name == "" {
		name = "load arrivals"
	}
	rng := sim.NewRand(r.spec.Seed, name)
	at := time.Duration(0)
	for i := 0; ; i++ {
		at += sim.FromSeconds(rng.ExpFloat64() / w.ArrivalRate).Duration()
		if at >= w.Duration.Duration() {
			return
		}
		t := time.NewTimer(time.Until(t0.Add(at)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		each(i, t0.Add(at))
	}
}

// txnsOf is how many transactions request req of the model's session
// key runs: per's draw from the model's own stream there (common random
// numbers with the model).
func (r *run) txnsOf(key, req uint64, per sim.IntDist) int {
	if !per.Random() {
		return per.Min
	}
	rr := sim.NewStreams(r.spec.Seed, "requests").At(key, req)
	return per.Sample(&rr)
}

// statementSQL is statement s of transaction txn of a request of n
// transactions: the scenario's statement for a query time drawn from
// rng, in a transaction block when blocks is set, with the request's
// WITH HOLD cursor when Spec.Hold is.
func (r *run) statementSQL(rng *sim.Rand, txn, n, s int, blocks bool) string {
	w := r.spec.Workload
	sql := r.spec.Statement.Next(w.Query.Sample(rng).Duration(), rng)
	if r.spec.Hold {
		sql = holdSQL(sql, txn, n, s, w.StmtsPerTxn)
	}
	if blocks && s == 0 {
		sql = "BEGIN; " + sql
	}
	if blocks && s == w.StmtsPerTxn-1 {
		sql += "; COMMIT"
	}
	if r.spec.Hold && txn == n-1 && s == w.StmtsPerTxn-1 {
		sql += "; " + holdClose
	}
	return sql
}

// pause sleeps one draw of d (from c's think stream) and records how long
// it really took in *rec; false when ctx ended it.
func (r *run) pause(ctx context.Context, c *client, d sim.Dist, rec *[]sim.Time) bool {
	p := d.Sample(c.thkRNG).Duration()
	if p <= 0 {
		return true
	}
	ts := time.Now()
	tm := time.NewTimer(p)
	select {
	case <-ctx.Done():
		tm.Stop()
		c.err = ctx.Err()
		return false
	case <-tm.C:
	}
	*rec = append(*rec, sim.FromDuration(time.Since(ts)))
	return true
}

func merge(t0 time.Time, clients []*client) *Result {
	res := &Result{Start: t0, End: t0, Clients: len(clients)}
	seen := map[string]bool{}
	defer func() {
		for _, c := range clients {
			if len(c.done) > 0 && (res.SteadyStart.IsZero() || c.done[0].Before(res.SteadyStart)) {
				res.SteadyStart = c.done[0]
			}
		}
		for _, c := range clients {
			for _, d := range c.done {
				if d.After(res.SteadyStart) && !d.After(res.SteadyEnd) {
					res.SteadyTxns++
				}
			}
		}
	}()
	for _, c := range clients {
		res.OKTxns += c.ok
		res.Stmts += c.stmts
		if c.ps != nil {
			res.Prepared.add(c.ps.n)
		}
		if c.ran {
			res.Sessions++
		}
		if c.end.After(res.End) {
			res.End = c.end
		}
		for _, v := range c.lat {
			res.Latency.Add(v)
		}
		if c.err == nil && c.ok > 0 && (res.SteadyEnd.IsZero() || c.end.Before(res.SteadyEnd)) {
			res.SteadyEnd = c.end
		}
		for _, v := range c.rt {
			res.StmtRT.Add(v)
		}
		for _, v := range c.think {
			res.Think.Add(v)
		}
		for _, v := range c.app {
			res.App.Add(v)
		}
		for _, v := range c.reqLat {
			res.ReqLatency.Add(v)
		}
		res.OKReqs += c.okReqs
		res.FailedReqs += c.failReqs
		if c.err == nil {
			continue
		}
		switch c.outcome {
		case refused:
			res.Refused++
		case waitTimeout:
			res.WaitTimeouts++
		default:
			res.Failed++
			if msg := c.err.Error(); !seen[msg] && len(res.Errors) < maxErrors {
				seen[msg] = true
				res.Errors = append(res.Errors, msg)
			}
		}
	}
	return res
}

// hangUp ends c's session: it closes the connection, unless the run
// holds its connections until every session has ended (Spec.KeepConns,
// closed workloads: closedGroups closes them then).
func (r *run) hangUp(c *client) {
	if r.keep {
		return
	}
	closeConn(c.conn)
}

// closeConn closes a connection politely (Terminate), within a second.
func closeConn(c *pgconn.PgConn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}

// statementDone records statement s, sent at t and answered at end, of
// a transaction begun at t0; last says it was the transaction's last.
func (c *client) statementDone(s int, last bool, t0, t, end time.Time) {
	c.stmts++
	if s > 0 {
		c.rt = append(c.rt, sim.FromDuration(end.Sub(t)))
	}
	if last {
		c.ok++
		c.end = end
		c.lat = append(c.lat, sim.FromDuration(end.Sub(t0)))
		c.done = append(c.done, end)
	}
}
