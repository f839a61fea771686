package scenarios

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// suggestOn adds a did-you-mean to err (a word not among candidates).
func suggestOn(err error, word string, candidates []string) error {
	if err == nil {
		return nil
	}
	if hint := didYouMean(word, candidates); hint != "" {
		return fmt.Errorf("%w%s", err, hint)
	}
	return err
}

// field is one settable scenario value.
type field struct {
	key string // dotted path, e.g. "workload.clients"
	doc string // what it is and what it accepts
	set func(c *system.Config, n *yaml.Node) error
}

// fields lists every settable key in documentation order.
var fields = []field{
	{"seed", "random seed (non-negative integer)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, math.MaxInt64)
		c.Seed = uint64(v)
		return err
	}},
	{"workload.clients", "closed workload: sessions that all connect at t=0 (1..10000000); setting it makes the workload closed", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 10_000_000)
		c.Workload.Clients, c.Workload.ArrivalRate = int(v), 0
		return err
	}},
	{"workload.arrival_rate", "open workload: Poisson session arrivals (with workers: request arrivals), e.g. 80/s or 4800/min; setting it makes the workload open", func(c *system.Config, n *yaml.Node) error {
		v, err := rateValue(n)
		c.Workload.ArrivalRate, c.Workload.Clients = v, 0
		return err
	}},
	{"workload.duration", "open workload: how long arrivals go on (duration above 0)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Workload.Duration, n)
	}},
	{"workload.workers", "open workload served by a fixed set of application workers (Puma threads, Sidekiq or gunicorn workers), each holding one persistent connection (0..1000000; default 0 = none, each arrival its own session): the workers connect at t=0 as closed clients do; requests arrive at arrival_rate for duration, queue in the application (FIFO) while every worker is busy, and the longest-idle worker takes the next; a request runs txns_per_request transactions with app between its statements and transactions, and its latency runs from its arrival; a connection closed under a worker (query_wait_timeout, refusal) fails its request and the worker reconnects at its next; when arrivals stop the workers finish the queue and disconnect. Not with clients, think, requests_per_session, txns_per_session or an app_pool", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Workload.Workers = int(v)
		return err
	}},
	{"workload.txns_per_session", "transactions per client session (1..1000000), each its own request; with requests_per_session use txns_per_request instead", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Workload.TxnsPerSession = int(v)
		return err
	}},
	{"workload.requests_per_session", "requests per client session (1..1000000): a session runs requests, a request runs transactions (txns_per_request), with app between its statements and transactions and think between requests", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Workload.RequestsPerSession = int(v)
		return err
	}},
	{"workload.txns_per_request", "transactions per request (needs requests_per_session or workers): a whole number or an integer distribution such as {dist: uniform, min: 1, max: 3} (default 1)", func(c *system.Config, n *yaml.Node) error {
		return intDistInto(&c.Workload.TxnsPerRequest, n, 1, 1_000_000)
	}},
	{"workload.app", "application time between the statements of a transaction and between the transactions of a request (needs requests_per_session or workers): a duration or a distribution (default: workload.think)", func(c *system.Config, n *yaml.Node) error {
		c.Workload.AppSet = true
		return distInto(&c.Workload.App, n)
	}},
	{"workload.stmts_per_txn", "statements per transaction (1..100000)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Workload.StmtsPerTxn = int(v)
		return err
	}},
	{"workload.query", "server time per statement that is not CPU (I/O, sleep, locks; fixed, not shared): a duration or {dist: const|exp|uniform|lognormal|empirical, ...}", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Query, n)
	}},
	{"workload.cpu", "server CPU time per statement, on top of workload.query: shared by server.cores (processor sharing, USL contention); a duration or a distribution (default 0)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.CPU, n)
	}},
	{"workload.warmup", "open workload: the start of the run left out of every time average, percentile and rate (the steady window runs from it to the end of arrivals): auto (default: MSER-5 on the transaction latencies) or a duration (0s keeps everything); closed workloads ignore it", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		if s == "auto" {
			c.Workload.WarmupAuto, c.Workload.Warmup = true, 0
			return nil
		}
		c.Workload.WarmupAuto = false
		if err := durationInto(&c.Workload.Warmup, n); err != nil {
			return fmt.Errorf("want auto or a duration such as 10s: %v", err)
		}
		return nil
	}},
	{"workload.time_wait", "how long a connection the client closed lingers in TIME_WAIT (default 60s, Linux)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Workload.TimeWait, n)
	}},
	{"workload.statements", "distinct statement texts the workload runs (1..1048576; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1<<20)
		c.Workload.Statements = int(v)
		return err
	}},
	{"workload.zipf", "popularity skew of the statements: the k-th most used runs in proportion to 1/k^zipf (0 = uniform; 0..10)", func(c *system.Config, n *yaml.Node) error {
		return floatInto(&c.Workload.Zipf, n, 0, 10, "a number from 0 to 10")
	}},
	{"workload.parse", "server time to parse and plan a statement, paid unless the server holds it prepared (CPU on a CPU server; default 0)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Parse, n)
	}},
	{"workload.prepare_threshold", "executions of a text on a connection before the driver prepares it (JDBC prepareThreshold, 5 by default there); 0 never (default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Workload.PrepareThreshold = int(v)
		return err
	}},
	{"workload.stmt_text_size", "size of one statement's text in the pooler's prepared-statement cache, e.g. 2kB (default 2kB)", func(c *system.Config, n *yaml.Node) error {
		v, err := sizeValue(n)
		c.Workload.StmtTextSize = v
		return err
	}},
	{"workload.think", "client time between requests, and before a closed client's first one (without requests_per_session: after each statement but the session's last, as app and think alike): a duration or a distribution", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Workload.Think, n)
	}},
	{"app_pool.mode", "application-side pool: none (each client holds one connection per session), queue (QueuePool/HikariCP: borrow per transaction) or null (NullPool: a new connection per transaction)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		c.AppPool.Mode, err = system.ParseAppPoolMode(s)
		return suggestOn(err, s, []string{"none", "queue", "null"})
	}},
	{"app_pool.size", "connections the application pool keeps (1..100000; SQLAlchemy's default 5)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.AppPool.Size = int(v)
		return err
	}},
	{"app_pool.max_overflow", "extra connections opened under load and closed when returned to a full pool (0..100000; default 10)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 100_000)
		c.AppPool.MaxOverflow = int(v)
		return err
	}},
	{"app_pool.timeout", "longest wait for an application-pool connection before the transaction fails; 0s waits forever (default 30s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.AppPool.Timeout, n)
	}},
	{"pooler.mode", "direct | session | transaction | statement (PgBouncer's default: session)", func(c *system.Config, n *yaml.Node) error {
		s, err := scalar(n)
		if err != nil {
			return err
		}
		c.Pooler.PoolMode, err = poolmode.Parse(s)
		return suggestOn(err, s, []string{"direct", "session", "transaction", "statement"})
	}},
	{"pooler.hop", "one-way client<->pooler latency paid by every message each way (duration)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.Hop, n)
	}},
	{"pooler.max_client_conn", "client connections the pooler accepts (1..10000000; PgBouncer's default 100)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 10_000_000)
		c.Pooler.MaxClientConn = int(v)
		return err
	}},
	{"pooler.default_pool_size", "server connections per pool (1..100000; default 20)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Pooler.DefaultPoolSize = int(v)
		return err
	}},
	{"pooler.max_db_connections", "server connections per database, 0 = unlimited (default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 100_000)
		c.Pooler.MaxDBConnections = int(v)
		return err
	}},
	{"pooler.query_wait_timeout", "longest a client waits for a server before FATAL query_wait_timeout; 0s disables (default 120s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.QueryWaitTimeout, n)
	}},
	{"pooler.timeout_check", "how often the pooler checks query_wait_timeout: PgBouncer's janitor runs every 1/3 s (default 333.333ms), so a waiter goes at the first check after its timeout; 0s at the exact instant", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.TimeoutCheck, n)
	}},
	{"pooler.reset_cost", "server time of server_reset_query (DISCARD ALL) when a session-mode client leaves, before the server is reused (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.ResetCost, n)
	}},
	{"pooler.max_prepared_statements", "protocol-level prepared statements tracked per server, 0 = off (default 200)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 1_000_000)
		c.Pooler.MaxPreparedStatements = int(v)
		return err
	}},
	{"pooler.cpu_per_msg", "CPU time a pooler process spends relaying one message (each statement is two: request and response); 0 leaves the pooler's CPU out", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.CPUPerMsg, n)
	}},
	{"pooler.conn_overhead", "extra cost per message for each client connection a process serves, as a fraction of cpu_per_msg (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Pooler.ConnOverhead, n)
	}},
	{"pooler.wakeup", "time a sleeping pooler thread takes to wake for a message (scheduler latency; default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.Wakeup, n)
	}},
	{"pooler.cpu_per_assign", "CPU time a pooler process's thread spends handing a server to a client, queued behind its messages: every assignment, so statement mode pays it per statement (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return durationInto(&c.Pooler.CPUPerAssign, n)
	}},
	{"pooler.assign_first", "a pooler thread hands a released server to a waiting client, forwarding its query, before it relays the response to the client that released it (poolsim's proxy) rather than after (PgBouncer); needs pooler.cpu_per_assign (default false)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Pooler.AssignFirst, n)
	}},
	{"pooler.processes", "pooler processes behind one port with so_reuseport, each single-threaded with its own pools (1..1024; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1024)
		c.Pooler.Processes = int(v)
		return err
	}},
	{"pooler.budget", "how a fleet's max_client_conn, default_pool_size and max_db_connections apply: per_process (each gets all) or divided (each gets its share)", func(c *system.Config, n *yaml.Node) error {
		return choiceInto(&c.Pooler.Budget, n, []string{"per_process", "divided"}, []system.Budget{system.PerProcess, system.Divided})
	}},
	{"pooler.peering", "processes forward cancel requests that land on the wrong one (PgBouncer 1.19+ peering; default false)", func(c *system.Config, n *yaml.Node) error {
		return boolInto(&c.Pooler.Peering, n)
	}},
	{"pooler.cancels", "cancel requests to simulate across the fleet (0..10000000; default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 10_000_000)
		c.Pooler.Cancels = int(v)
		return err
	}},
	{"server.max_connections", "PostgreSQL max_connections (1..1000000; default 100)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 1_000_000)
		c.Server.MaxConnections = int(v)
		return err
	}},
	{"server.superuser_reserved_connections", "PostgreSQL superuser_reserved_connections: slots of max_connections the clients (not superusers) cannot take (0..max_connections-1; default 3, PostgreSQL's)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 999_999)
		c.Server.SuperuserReserved = int(v)
		return err
	}},
	{"server.connect", "cost of starting one backend: a duration or a distribution (default 0s)", func(c *system.Config, n *yaml.Node) error {
		return distInto(&c.Server.Connect, n)
	}},
	{"server.memory_per_conn", "server memory per open backend, e.g. 1.5MB or 1536kB (default 1.5MB, measured in seed 000)", func(c *system.Config, n *yaml.Node) error {
		v, err := sizeValue(n)
		c.Server.MemoryPerConn = v
		return err
	}},
	{"server.cores", "CPU cores shared by running statements' workload.cpu; 0 runs CPU time as a fixed delay (0..4096; default 0)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 0, 4096)
		c.Server.Cores = int(v)
		return err
	}},
	{"server.contention", "USL contention σ: each running statement slows by 1 + σ(n-1) + κn(n-1) with n running (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Server.Contention, n)
	}},
	{"server.coherency", "USL coherency κ (0..1; default 0)", func(c *system.Config, n *yaml.Node) error {
		return fractionInto(&c.Server.Coherency, n)
	}},
	{"server.connect_concurrency", "backends that can start at once; the rest queue in arrival order (1..100000; default 1)", func(c *system.Config, n *yaml.Node) error {
		v, err := intValue(n, 1, 100_000)
		c.Server.ConnectConcurrency = int(v)
		return err
	}},
}

func lookup(key string) (field, bool) {
	for _, f := range fields {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}

func keysUnder(prefix string) []string {
	var ks []string
	for _, f := range fields {
		if k, ok := strings.CutPrefix(f.key, prefix+"."); ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// Fields describes every settable key, in order, as "key: doc" lines (for
// help texts).
func Fields() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = fmt.Sprintf("%-34s %s", f.key, f.doc)
	}
	return append(out, ClassFields()...)
}

func scalar(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("want a single value, got a %s", kindName(n))
	}
	return n.Value, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}

func intValue(n *yaml.Node, lo, hi int64) (int64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a whole number from %d to %d, got %q", lo, hi, s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("must be from %d to %d, got %d", lo, hi, v)
	}
	return v, nil
}

// maxDuration bounds every duration: a week of virtual time.
const maxDuration = 7 * 24 * time.Hour

func durationValue(n *yaml.Node) (sim.Time, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want a duration such as 300us, 5.48ms or 3s, got %q", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	if d > maxDuration {
		return 0, fmt.Errorf("must be at most %s, got %s", maxDuration, s)
	}
	return sim.FromDuration(d), nil
}

func boolInto(dst *bool, n *yaml.Node) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*dst = v
	return nil
}

func durationInto[T ~int64](dst *T, n *yaml.Node) error {
	d, err := durationValue(n)
	if err == nil {
		*dst = T(d)
	}
	return err
}

func rateValue(n *yaml.Node) (float64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	num, unit, _ := strings.Cut(s, "/")
	per := 1.0
	switch unit {
	case "", "s":
	case "ms":
		per = 1e-3
	case "min":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, fmt.Errorf("want a rate such as 80/s or 4800/min, got %q", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("want a rate such as 80/s or 4800/min, got %q", s)
	}
	v /= per
	if v <= 0 || v > 1e9 {
		return 0, fmt.Errorf("must be above 0 and at most 1e9 per second, got %q", s)
	}
	return v, nil
}

func fractionInto(dst *float64, n *yaml.Node) error {
	return floatInto(dst, n, 0, 1, "a number from 0 to 1")
}

// choiceInto sets *dst to values[i] for the scalar names[i]; any other
// value is an error that lists the names.
func choiceInto[T any](dst *T, n *yaml.Node, names []string, values []T) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	for i, name := range names {
		if s == name {
			*dst = values[i]
			return nil
		}
	}
	want := names[len(names)-1]
	if len(names) > 1 {
		want = strings.Join(names[:len(names)-1], ", ") + " or " + want
	}
	return fmt.Errorf("want %s, got %q", want, s)
}

// floatInto reads a number from lo to hi; want says what is expected.
func floatInto(dst *float64, n *yaml.Node, lo, hi float64, want string) error {
	s, err := scalar(n)
	if err != nil {
		return err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= lo && v <= hi) {
		return fmt.Errorf("want %s, got %q", want, s)
	}
	*dst = v
	return nil
}

// sizeValue reads a memory size: a number of bytes, or a number with B,
// kB, MB or GB (PostgreSQL's units: 1kB = 1024 bytes).
func sizeValue(n *yaml.Node) (int64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	num, mult := s, 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"kB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*mult > 1<<40 {
		return 0, fmt.Errorf("want a size such as 1.5MB, 1536kB or 0 (at most 1TB), got %q", s)
	}
	return int64(math.Round(v * mult)), nil
}
