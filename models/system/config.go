package system

import (
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/models/poolconf"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Config is one simulated system.
type Config struct {
	Seed     uint64
	Workload Workload
	AppPool  AppPool
	Pooler   Pooler
	Server   Server
	// Machine, when set, is what the system runs on in place of the
	// server's own cores (machine.go): a live validation's test machine,
	// where the load driver and the pooler share the cores with
	// PostgreSQL (lab/testbed). nil is a production what-if.
	Machine Machine
	// Classes and Pools: several kinds of client, each connecting to one
	// of several pools (classes.go). Without classes the one class is
	// Workload and AppPool; with them Workload and AppPool are only the
	// defaults a class starts from.
	Classes []Class
	Pools   []PoolSpec
}

// AppPoolMode is how the application holds its connections.
type AppPoolMode uint8

const (
	// NoAppPool: each client opens one connection for its whole session
	// (a worker holding its own connection).
	NoAppPool AppPoolMode = iota
	// QueuePool: clients borrow a connection per transaction from a pool of
	// Size (plus MaxOverflow extra, closed when returned to a full pool),
	// waiting up to Timeout (SQLAlchemy QueuePool, HikariCP).
	QueuePool
	// NullPool: a new connection per transaction, closed after it
	// (SQLAlchemy NullPool).
	NullPool
)

var appPoolNames = [...]string{NoAppPool: "none", QueuePool: "queue", NullPool: "null"}

func (m AppPoolMode) String() string {
	if int(m) < len(appPoolNames) {
		return appPoolNames[m]
	}
	return fmt.Sprintf("AppPoolMode(%d)", m)
}

// ParseAppPoolMode reads none, queue or null.
func ParseAppPoolMode(s string) (AppPoolMode, error) {
	for i, n := range appPoolNames {
		if n == s {
			return AppPoolMode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown app_pool mode %q: want none, queue or null", s)
}

// AppPool is the application-side connection pool, between the clients
// and the pooler (or the server in direct mode).
type AppPool struct {
	Mode        AppPoolMode
	Size        int      // connections kept (QueuePool)
	MaxOverflow int      // extra connections opened under load, closed when returned to a full pool
	Timeout     sim.Time // longest wait for a connection before the transaction fails; 0 = forever
}

// Workload is what the clients do.
type Workload struct {
	Clients        int      // closed workload: sessions connecting at t=0
	ArrivalRate    float64  // open workload: session arrivals per second (0 = closed); with Workers, request arrivals
	Duration       sim.Time // open workload: arrivals stop after this
	TxnsPerSession int
	StmtsPerTxn    int
	Query          sim.Dist // server time per statement that is not CPU (I/O, sleep, locks): fixed
	CPU            sim.Dist // server CPU time per statement, shared by Server.Cores (0 = none)
	Think          sim.Dist // client time after each statement but the session's last (see Requests)
	TimeWait       sim.Time // how long a closed connection lingers in TIME_WAIT on the client

	// Workers: an open workload served by a fixed set of Workers
	// application workers (Puma threads, Sidekiq or gunicorn workers),
	// each holding one persistent connection (0 = none: each arrival is
	// a session of its own). See workers.go for the semantics.
	Workers int

	// Requests: a session runs RequestsPerSession requests, a request runs
	// TxnsPerRequest transactions (drawn per request), a transaction runs
	// StmtsPerTxn statements. App is the client's time between the
	// statements of a transaction and between the transactions of a
	// request (application code); Think is then the time between requests
	// (a web worker waiting for the next HTTP request), and a closed
	// client's wait before its first request, so that such clients start
	// spread out as workers that wait for traffic do. RequestsPerSession
	// 0 leaves the request level out: each of TxnsPerSession transactions
	// is its own request and Think follows every statement, as App and
	// Think alike (RequestLevel reports which). AppSet says App was given.
	RequestsPerSession int
	TxnsPerRequest     sim.IntDist
	App                sim.Dist
	AppSet             bool

	// The steady state of an open workload: its first Warmup of virtual
	// time is left out of every time average, percentile and rate of the
	// steady window (which ends when arrivals stop). WarmupAuto finds the
	// warm-up by MSER-5 on the transaction latencies instead (Warmup is
	// then ignored). Closed workloads ignore both: their steady window runs
	// from the first completion to the first client's last.
	Warmup     sim.Time
	WarmupAuto bool

	// Prepared statements: Statements distinct texts with Zipf popularity,
	// Parse of server time to parse and plan one unless the server holds it
	// prepared, drivers preparing a text after PrepareThreshold executions
	// (0 never), StmtTextSize bytes per text in the pooler's cache.
	Statements       int // 0 means 1
	Zipf             float64
	Parse            sim.Dist
	PrepareThreshold int
	StmtTextSize     int64
}

// Open reports whether the workload is open (Poisson arrivals); a
// workers workload is open too.
func (w Workload) Open() bool { return w.ArrivalRate > 0 }

// Persistent reports whether the workload's arrivals are served by a
// fixed set of workers with persistent connections (Workers > 0).
func (w Workload) Persistent() bool { return w.Workers > 0 }

// RequestLevel reports whether the workload has requests of their own
// (RequestsPerSession set, or workers: every arrival is one request).
func (w Workload) RequestLevel() bool { return w.RequestsPerSession > 0 || w.Persistent() }

// Requests is how many requests a session runs and how many transactions
// each: without a request level, TxnsPerSession requests of one. With
// workers it is per arrival: one request of TxnsPerRequest transactions.
func (w Workload) Requests() (perSession int, txns sim.IntDist) {
	if w.Persistent() {
		if w.TxnsPerRequest == (sim.IntDist{}) {
			return 1, sim.ConstInt(1)
		}
		return 1, w.TxnsPerRequest
	}
	if w.RequestLevel() {
		if w.TxnsPerRequest == (sim.IntDist{}) { // not given: one
			return w.RequestsPerSession, sim.ConstInt(1)
		}
		return w.RequestsPerSession, w.TxnsPerRequest
	}
	return w.TxnsPerSession, sim.ConstInt(1)
}

// MeanTxnsPerSession is the mean number of transactions a session runs;
// with workers, a request (one arrival). An open workload offers
// ArrivalRate × MeanTxnsPerSession transactions per second either way
// (OfferedTPS).
func (w Workload) MeanTxnsPerSession() float64 {
	n, t := w.Requests()
	return float64(n) * t.MeanValue()
}

// AppPause is the pause between the statements of a transaction and
// between the transactions of a request: App when given, else Think.
func (w Workload) AppPause() sim.Dist {
	if w.AppSet {
		return w.App
	}
	return w.Think
}

// Budget is how a fleet's limits apply to its processes.
type Budget uint8

const (
	// PerProcess gives every process the whole limit (the easy mistake:
	// the fleet's total is processes × the limit).
	PerProcess Budget = iota
	// Divided gives every process limit/processes, rounded up.
	Divided
)

// Pooler is the pooler between clients and server (ignored in Direct mode).
type Pooler struct {
	// Pooling is PgBouncer's settings of the pools, with PgBouncer's names
	// and meanings (models/poolconf): the model applies those in
	// AppliedPoolingKeys (pooler.go) and the proxy and the PgBouncer
	// launcher get the same values.
	poolconf.Pooling
	Hop sim.Time // one-way client<->pooler latency per message
	// TimeoutCheck is how often the pooler looks for waiters older than
	// QueryWaitTimeout (PgBouncer's janitor runs every 1/3 s, so a timeout
	// fires at the first check after it has passed); 0 fires it at the
	// exact instant.
	TimeoutCheck sim.Time
	// ResetCost is the server time of server_reset_query (DISCARD ALL)
	// when a session-mode client leaves, before the server is reused.
	ResetCost sim.Time

	// The pooler's own CPU: each process is one thread that relays
	// messages one at a time, CPUPerMsg each, slowed by ConnOverhead per
	// client connection it serves; a thread that was asleep first takes
	// Wakeup. 0 and 0 leave the pooler's CPU out of the model.
	CPUPerMsg    sim.Time
	ConnOverhead float64
	Wakeup       sim.Time
	// CPUPerAssign is the thread's CPU to hand a server to a client: every
	// assignment (a waiter getting a released server, or a client an idle
	// one) is a piece of work queued FIFO behind the thread's messages, so
	// statement mode pays it for every statement. 0 leaves it out.
	CPUPerAssign sim.Time
	// AssignFirst: when a released server goes to a waiting client, the
	// thread hands it over (and forwards the waiter's query) before it
	// relays the response to the client that released it, as poolsim's
	// proxy does - its event loop writes the server's next query first in
	// the turn's batch - instead of after, as PgBouncer does (it releases
	// the server once the ReadyForQuery is sent). The server's next
	// statement then waits for the assignment alone. Needs CPUPerAssign.
	AssignFirst bool
	// A fleet: Processes behind one port (so_reuseport), the kernel
	// hashing each new connection to one of them; Budget says how
	// max_client_conn, default_pool_size and max_db_connections apply;
	// Cancels cancel requests are simulated, each lost when it lands on a
	// process that does not hold its client, unless Peering forwards it.
	Processes int
	Budget    Budget
	Peering   bool
	Cancels   int
}

// Server is the PostgreSQL server.
type Server struct {
	MaxConnections int
	// SuperuserReserved is superuser_reserved_connections: the slots of
	// max_connections only a superuser may take. The clients are not
	// superusers, so a backend that would take one is refused (PostgreSQL:
	// "remaining connection slots are reserved for non-replication
	// superuser connections"); Usable is what is left to them.
	SuperuserReserved  int
	Connect            sim.Dist // cost of starting one backend
	ConnectConcurrency int      // backends that can start at once
	MemoryPerConn      int64    // bytes of server memory per open backend
	// Cores shares statements' CPU time among the running statements
	// (processor sharing); 0 runs CPU time as a fixed delay. Contention (σ)
	// and Coherency (κ) slow every running statement by the Universal
	// Scalability Law's factor 1 + σ(n−1) + κn(n−1) for n running.
	Cores      int
	Contention float64
	Coherency  float64
}

// Usable is the connections PostgreSQL lets the clients (not superusers)
// open: max_connections less superuser_reserved_connections.
func (s Server) Usable() int { return s.MaxConnections - s.SuperuserReserved }

// Default is a stock installation: PgBouncer's and PostgreSQL's defaults,
// one client running one one-statement transaction.
func Default() Config {
	return Config{
		Seed: 1,
		Workload: Workload{
			Clients:        1,
			TxnsPerSession: 1,
			StmtsPerTxn:    1,
			TimeWait:       60 * sim.Second, // Linux
			WarmupAuto:     true,
			Statements:     1,
			StmtTextSize:   2 << 10, // seed 004: 2-3 kB a statement
		},
		Pooler: Pooler{
			Pooling:      defaultPooling(),
			TimeoutCheck: PgBouncerJanitor,
			Processes:    1,
		},
		AppPool: AppPool{ // SQLAlchemy's QueuePool defaults, used when the mode is queue
			Size:        5,
			MaxOverflow: 10,
			Timeout:     30 * sim.Second,
		},
		Server: Server{
			MaxConnections:     100,
			SuperuserReserved:  3, // PostgreSQL's default
			ConnectConcurrency: 1,
			MemoryPerConn:      1536 << 10, // about 1.5 MB per idle backend, measured in seed 000
		},
	}
}

// AppliedPoolingKeys are the keys of poolconf.Pooling the model applies
// (pool_mode as pooler.mode, which also takes direct): each is a scenario
// key pooler.<key>, and poolsim validate hands the whole Pooling to the
// proxy and to PgBouncer. The others are PgBouncer's defaults, there too.
var AppliedPoolingKeys = []string{"pool_mode", "default_pool_size", "min_pool_size", "max_client_conn", "max_db_connections",
	"max_user_connections", "query_wait_timeout", "max_prepared_statements"}

// defaultPooling is PgBouncer's defaults (pool_mode session,
// max_client_conn 100, default_pool_size 20, query_wait_timeout 120 s),
// with max_prepared_statements 200 as in PgBouncer 1.24+.
func defaultPooling() poolconf.Pooling {
	p := poolconf.DefaultPooling()
	p.MaxPreparedStatements = 200
	return p
}

// PgBouncerJanitor is the period of PgBouncer's janitor, which checks
// query_wait_timeout (full_maint_period = USEC/3 in src/janitor.c).
const PgBouncerJanitor = 333333 * sim.Microsecond

// ErrInvalid wraps every configuration error.
var ErrInvalid = errors.New("invalid system")

// Validate checks that the configuration can be simulated.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Classes) == 0 {
		c.Workload.validate("workload", bad)
		c.AppPool.validate("app_pool", bad)
		workersAppPool(c.Workload, c.AppPool, "", bad)
	}
	c.validateClasses(bad)
	p := c.Pooler
	if p.PoolMode > poolmode.Statement {
		bad("pooler.mode %v is not a mode", p.PoolMode)
	}
	if p.MaxClientConn < 1 {
		bad("pooler.max_client_conn must be at least 1, got %d", p.MaxClientConn)
	}
	if p.DefaultPoolSize < 1 {
		bad("pooler.default_pool_size must be at least 1, got %d", p.DefaultPoolSize)
	}
	if p.MaxDBConnections < 0 || p.MaxUserConnections < 0 {
		bad("pooler.max_db_connections and max_user_connections must be 0 (unlimited) or more, got %d and %d", p.MaxDBConnections, p.MaxUserConnections)
	}
	if p.Hop < 0 || p.QueryWaitTimeout < 0 || p.CPUPerMsg < 0 || p.Wakeup < 0 || p.ConnOverhead < 0 || p.TimeoutCheck < 0 || p.ResetCost < 0 || p.CPUPerAssign < 0 {
		bad("pooler durations and conn_overhead must not be negative")
	}
	if p.AssignFirst && p.CPUPerAssign == 0 {
		bad("pooler.assign_first orders the thread's assignment before its relay of the response: it needs pooler.cpu_per_assign above 0")
	}
	if p.Processes < 1 {
		bad("pooler.processes must be at least 1, got %d", p.Processes)
	}
	if p.Cancels < 0 {
		bad("pooler.cancels must not be negative")
	}
	s := c.Server
	if s.Cores < 0 || s.MemoryPerConn < 0 {
		bad("server.cores and server.memory_per_conn must not be negative")
	}
	if !(s.Contention >= 0 && s.Contention <= 1) || !(s.Coherency >= 0 && s.Coherency <= 1) {
		bad("server.contention and server.coherency must be from 0 to 1")
	}
	if s.MaxConnections < 1 {
		bad("server.max_connections must be at least 1, got %d", s.MaxConnections)
	}
	if s.SuperuserReserved < 0 || s.SuperuserReserved >= s.MaxConnections {
		bad("server.superuser_reserved_connections %d: want 0 or more and below server.max_connections %d (PostgreSQL refuses to start otherwise)", s.SuperuserReserved, s.MaxConnections)
	}
	if s.ConnectConcurrency < 1 {
		bad("server.connect_concurrency must be at least 1, got %d", s.ConnectConcurrency)
	}
	if c.Machine != nil {
		c.Machine.Check(c, bad)
	}
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(msgs, "; "))
}

// validate checks a workload; p names it in errors ("workload", or
// "classes.web.workload").
func (w Workload) validate(p string, bad func(string, ...any)) {
	switch {
	case w.Open() && w.Clients > 0:
		bad("%s: clients and arrival_rate both set: use clients for a closed workload or arrival_rate with duration for an open one", p)
	case w.Open() && w.Duration <= 0:
		bad("%s.duration must be above 0 with arrival_rate", p)
	case !w.Open() && w.Clients <= 0:
		bad("%s.clients must be at least 1 (or set arrival_rate for an open workload)", p)
	}
	if w.TxnsPerSession < 1 {
		bad("%s.txns_per_session must be at least 1, got %d", p, w.TxnsPerSession)
	}
	w.validateWorkers(p, bad)
	if w.RequestsPerSession < 0 {
		bad("%s.requests_per_session must be at least 1, got %d", p, w.RequestsPerSession)
	}
	if _, t := w.Requests(); w.RequestLevel() && (t.Min < 1 || t.Max > 1_000_000) {
		bad("%s.txns_per_request must draw from 1 to 1000000 transactions, got %v", p, t)
	}
	if !w.RequestLevel() && (w.AppSet || w.TxnsPerRequest != (sim.IntDist{})) {
		bad("%s.app and workload.txns_per_request need workload.requests_per_session: a session runs requests of transactions", p)
	}
	if w.Statements < 0 || w.Statements > 1<<20 || w.Zipf < 0 || w.PrepareThreshold < 0 || w.StmtTextSize < 0 {
		bad("%s prepared-statement settings out of range: statements 0..1048576 (0 means 1), zipf, prepare_threshold and stmt_text_size not negative", p)
	}
	if w.StmtsPerTxn < 1 {
		bad("%s.stmts_per_txn must be at least 1, got %d", p, w.StmtsPerTxn)
	}
	if w.Warmup < 0 {
		bad("%s.warmup must not be negative", p)
	}
	if w.Open() && !w.WarmupAuto && w.Warmup > 0 && w.Warmup >= w.Duration {
		bad("%s.warmup (%v) must be shorter than %s.duration (%v): the steady window runs from the one to the other", p, w.Warmup, p, w.Duration)
	}
}

// validate checks an application pool; p names it in errors.
func (a AppPool) validate(p string, bad func(string, ...any)) {
	if a.Mode > NullPool {
		bad("%s.mode %v is not a mode", p, a.Mode)
	}
	if a.Mode == QueuePool && a.Size < 1 {
		bad("%s.size must be at least 1 with mode queue, got %d", p, a.Size)
	}
	if a.Size < 0 || a.MaxOverflow < 0 || a.Timeout < 0 {
		bad("%s size, max_overflow and timeout must not be negative", p)
	}
}

// share is a fleet process's part of a limit.
func (c Config) share(limit int) int {
	if c.Pooler.Budget == Divided {
		return (limit + c.Pooler.Processes - 1) / c.Pooler.Processes
	}
	return limit
}

// poolLimit is how many server connections each process's pool may open.
func (c Config) poolLimit() int {
	n := min(c.share(c.Pooler.DefaultPoolSize), c.Server.Usable())
	if c.Pooler.MaxDBConnections > 0 {
		n = min(n, c.share(c.Pooler.MaxDBConnections))
	}
	return n
}
