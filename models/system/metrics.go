package system

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/sim"
)

// Metrics is one run's measurements. The JSON names are fixed (docs/run.md
// describes them); times ending _ms are milliseconds.
type Metrics struct {
	OKTxns       int64   `json:"ok_txns"`
	ConnRefused  int64   `json:"conn_refused"`
	WaitTimeouts int64   `json:"wait_timeouts"`
	WallMs       float64 `json:"wall_ms"`
	TPS          float64 `json:"tps"`
	MeanMs       float64 `json:"mean_ms"`
	P50Ms        float64 `json:"p50_ms"`
	P95Ms        float64 `json:"p95_ms"`
	P99Ms        float64 `json:"p99_ms"`
	WaitMeanMs   float64 `json:"wait_mean_ms"`
	WaitP50Ms    float64 `json:"wait_p50_ms"`
	WaitP99Ms    float64 `json:"wait_p99_ms"`
	// WaitMaxMs is the longest wait for a server of the whole run, the
	// drain after an open run's arrivals included: a connection that waits
	// as long as the run lasts never got a server while the others kept
	// theirs (a session pool smaller than persistent connections).
	WaitMaxMs   float64 `json:"wait_max_ms"`
	WaitProb    float64 `json:"wait_prob"` // fraction of assignments that waited at all (Erlang C's P(wait))
	HopMsPerTxn float64 `json:"hop_ms_per_txn"`
	// The server connections, as a share of the pool (pool size × pooler
	// processes; max_connections in direct mode): linked is the mean number
	// held for a client (a session-mode server from its first statement to
	// its client's disconnect and reset; a transaction-mode one for a
	// transaction), busy the mean number executing a statement. Session
	// mode can hold every server linked while they are rarely busy.
	ServerLinked float64 `json:"server_linked"`
	ServerBusy   float64 `json:"server_busy"`
	// Little's law on the pooler's wait queue over the steady window (the
	// whole run for a closed workload): the time average of the number
	// waiting (from the queue's own integral), the rate of departures from
	// the queue - assignments and query_wait_timeout disconnects - per
	// second, and their mean wait in seconds.
	WaitL      float64 `json:"wait_L"`
	WaitLambda float64 `json:"wait_lambda"`
	WaitW      float64 `json:"wait_W"`

	// The steady window (window.go). Open workloads: from the end of the
	// warm-up (warmup_ms, cut from every time average and percentile) to
	// the end of arrivals (steady_ms long); tps_steady is the completion
	// rate in it, offered_tps what arrived (arrival rate × transactions per
	// session), drain_ms the time from the end of arrivals to the last
	// completion, backlog_start/end the sessions in the system at the
	// window's two ends. Closed workloads: from the first completion
	// (warmup_ms) to the first client's last (steady_ms later), while every
	// client still takes part; p50/p99_steady are its latency percentiles
	// (open: the same as p50_ms and p99_ms). A closed run whose first
	// client is done at the first completion (one transaction per session)
	// has no such window: steady_ms is 0 and the steady figures are the
	// whole run's. warmup_at_limit is 1 when
	// MSER-5 cut as much as it may: the run is too short for a steady
	// state. session_mean_ms is the mean session duration of the clients
	// that got in.
	// Requests (workload.requests_per_session): completed requests (every
	// transaction of them completed), requests with a failed transaction,
	// ok_reqs / wall, and request latency from its first transaction's
	// start to its last result (the app time between its transactions
	// included). Without a request level every transaction is a request.
	// With workers a request's latency runs from its arrival: the wait in
	// the application queue for a free worker counts.
	OKReqs     int64   `json:"ok_reqs"`
	FailedReqs int64   `json:"failed_reqs"`
	ReqTPS     float64 `json:"req_tps"`
	ReqMeanMs  float64 `json:"req_mean_ms"`
	ReqP50Ms   float64 `json:"req_p50_ms"`
	ReqP99Ms   float64 `json:"req_p99_ms"`

	TPSSteady     float64 `json:"tps_steady"`
	P50SteadyMs   float64 `json:"p50_steady_ms"`
	P99SteadyMs   float64 `json:"p99_steady_ms"`
	WarmupMs      float64 `json:"warmup_ms"`
	SteadyMs      float64 `json:"steady_ms"`
	WarmupAtLimit int64   `json:"warmup_at_limit"`
	OfferedTPS    float64 `json:"offered_tps"`
	DrainMs       float64 `json:"drain_ms"`
	BacklogStart  int64   `json:"backlog_start"`
	BacklogEnd    int64   `json:"backlog_end"`
	SessionMeanMs float64 `json:"session_mean_ms"`
	// Accounting: every attempted transaction ends in exactly one of the
	// counts after it.
	AttemptedTxns     int64 `json:"attempted_txns"`
	RefusedTxns       int64 `json:"refused_txns"`
	TimedOutTxns      int64 `json:"timed_out_txns"`
	UnfinishedTxn     int64 `json:"unfinished_txns"`
	AppTimeoutTxns    int64 `json:"app_timeout_txns"`
	PreparedErrorTxns int64 `json:"prepared_error_txns"` // failed: prepared statement does not exist on this server
	Sessions          int64 `json:"sessions"`
	Assignments       int64 `json:"assignments"`
	WaitMaxLen        int64 `json:"wait_max_len"`
	ServerConns       int64 `json:"server_conns_peak"`
	// ClientConnsPeak is the most client connections open at once (to the
	// pooler, or in direct mode each with its own backend), counted from
	// open to close: what max_client_conn must allow, and a direct pool's
	// share of max_connections.
	ClientConnsPeak int64 `json:"client_conns_peak"`
	Events          int64 `json:"events"`

	// The application-side pool: acquire timeouts (failures, like
	// PgBouncer's query_wait_timeout) and Little's law on its wait queue.
	// With workers (workload.workers) the same fields measure the
	// application queue of requests waiting for a free worker: one
	// app_wait_p99_ms sample per request taken (zeros included), and
	// app_wait_L, _lambda, _W over every request (each passes through
	// the queue; lambda is the rate requests were taken).
	AppTimeouts   int64   `json:"app_timeouts"`
	AppWaitP99Ms  float64 `json:"app_wait_p99_ms"` // per acquisition
	AppWaitL      float64 `json:"app_wait_L"`
	AppWaitLambda float64 `json:"app_wait_lambda"`
	AppWaitW      float64 `json:"app_wait_W"`

	// Where each completed transaction's time went (p50 and p99 over
	// transactions): waiting for an app-pool connection, opening one,
	// waiting for a server at the pooler, queueing for the server's CPU,
	// the statements' own server time, hops and think time. The parts of
	// one transaction add up to its latency.
	DecAppWaitP50Ms  float64 `json:"app_wait_txn_p50_ms"`
	DecAppWaitP99Ms  float64 `json:"app_wait_txn_p99_ms"`
	DecConnectP50Ms  float64 `json:"connect_txn_p50_ms"`
	DecConnectP99Ms  float64 `json:"connect_txn_p99_ms"`
	DecWaitP50Ms     float64 `json:"pooler_wait_txn_p50_ms"`
	DecWaitP99Ms     float64 `json:"pooler_wait_txn_p99_ms"`
	DecCPUQueueP50Ms float64 `json:"cpu_queue_txn_p50_ms"`
	DecCPUQueueP99Ms float64 `json:"cpu_queue_txn_p99_ms"`
	DecServiceP50Ms  float64 `json:"service_txn_p50_ms"`
	DecServiceP99Ms  float64 `json:"service_txn_p99_ms"`
	DecHopP50Ms      float64 `json:"hop_txn_p50_ms"`
	DecHopP99Ms      float64 `json:"hop_txn_p99_ms"`
	DecThinkP50Ms    float64 `json:"think_txn_p50_ms"`
	DecThinkP99Ms    float64 `json:"think_txn_p99_ms"`
	DecPoolerP50Ms   float64 `json:"pooler_cpu_txn_p50_ms"`
	DecPoolerP99Ms   float64 `json:"pooler_cpu_txn_p99_ms"`

	// Connections and the server's footprint.
	ConnsOpened     int64   `json:"conns_opened"`
	TimeWaitPeak    int64   `json:"time_wait_peak"` // client sockets in TIME_WAIT at once, at most
	TimeWaitEnd     int64   `json:"time_wait_end"`  // still in TIME_WAIT when the run ends
	ServerMemPeakMB float64 `json:"server_mem_peak_mb"`
	CPUUtil         float64 `json:"cpu_util"`   // mean busy cores / cores (server.cores > 0); with a Machine, as its CPU counts them (CPU.Measure)
	CPUJobsL        float64 `json:"cpu_jobs_L"` // mean statements (and backend start-ups) running on the CPU

	// The pooler's processes: their threads' utilisation (the busiest and
	// the mean), how unevenly so_reuseport spread the clients (busiest /
	// mean), the fleet's server-connection budget and how far it exceeds
	// max_connections, logins PostgreSQL refused, and cancel requests
	// lost (or forwarded by peering) for landing on the wrong process.
	PoolerCPUMax     float64 `json:"pooler_cpu_max"`
	PoolerCPUMean    float64 `json:"pooler_cpu_mean"`
	ProcImbalance    float64 `json:"proc_imbalance"`
	ServerBudget     int64   `json:"server_budget"`
	BudgetOver       int64   `json:"budget_over_max_connections"`
	LoginsRefused    int64   `json:"logins_refused"`
	ServersEvicted   int64   `json:"servers_evicted"` // idle servers closed to make room under max_db_connections or max_user_connections
	CancelsLost      int64   `json:"cancels_lost"`
	CancelsForwarded int64   `json:"cancels_forwarded"`

	// Prepared statements: statements executed, Parse (and plan) done by
	// the server, the share of prepared executions whose server held the
	// statement, parse time saved per transaction (against parsing every
	// statement), and the pooler's cache memory.
	StmtExecs          int64   `json:"stmt_execs"`
	ServerParses       int64   `json:"server_parses"`
	ServerParsesPerS   float64 `json:"server_parses_per_s"`
	PreparedHitRate    float64 `json:"prepared_hit_rate"`
	ParseMsSavedPerTxn float64 `json:"parse_ms_saved_per_txn"`
	PoolerCacheMB      float64 `json:"pooler_cache_mb"`

	// Dists are the distributions the percentile metrics above were read
	// from (over the same window), compact, for a study to read the
	// percentiles of all its replications' samples together
	// (Replicated.Stat). Not a reported metric: nil in metrics read back
	// from a report or averaged over replications (Dists.Empty).
	Dists Dists `json:"-"`
}

// Dists are one run's distributions behind its percentile metrics, each a
// compact histogram (sim.Histogram: within sim.HistogramError of every
// sample, a few bytes per occupied bucket), over the window the metrics
// cover and over its second half (an open workload's steady window; none
// for a closed one), which a study compares with the whole to see whether
// the start-up is still in the figures (Replicated.StartBias). It is an
// immutable, comparable value - metrics of equal runs are equal (==) - and
// copies share it. The zero Dists holds none.
type Dists struct {
	// A byte, 1 when distLatSteady is distLatSteady's own (else it is
	// distLat, not coded twice), then 2·nDists histograms in their binary
	// form: the window's by distXxx, then the second half's.
	code string
}

// newDists codes the window's distributions and its second half's (nil:
// none).
func newDists(window, late *[nDists]sim.Histogram) Dists {
	var none [nDists]sim.Histogram
	if late == nil {
		late = &none
	}
	own := window[distLatSteady] != window[distLat] || late[distLatSteady] != late[distLat]
	b := []byte{0}
	if own {
		b[0] = 1
	}
	for _, hs := range [...]*[nDists]sim.Histogram{window, late} {
		for k, h := range hs {
			if k == distLatSteady && !own {
				h = sim.Histogram{}
			}
			b, _ = h.AppendBinary(b)
		}
	}
	return Dists{code: string(b)}
}

// Empty reports whether d holds no distributions.
func (d Dists) Empty() bool { return d.code == "" }

// hist is distribution k of the window (late false) or of its second
// half.
func (d Dists) hist(k int, late bool) sim.Histogram {
	if k == distLatSteady && d.code[0] == 0 {
		k = distLat
	}
	if late {
		k += nDists
	}
	s := d.code[1:]
	var err error
	for ; k > 0 && err == nil; k-- {
		s, err = sim.SkipHistogram(s)
	}
	h, _, err2 := sim.ReadHistogram(s)
	if err != nil || err2 != nil {
		panic("system: Dists corrupted") // only newDists and UnmarshalText make them, checked
	}
	return h
}

// MarshalText codes d for a shard file: base64 of its histograms.
func (d Dists) MarshalText() ([]byte, error) {
	return base64.RawStdEncoding.AppendEncode(nil, []byte(d.code)), nil
}

// UnmarshalText reads what MarshalText wrote, checking every histogram.
func (d *Dists) UnmarshalText(text []byte) error {
	b, err := base64.RawStdEncoding.AppendDecode(nil, text)
	if err != nil {
		return fmt.Errorf("distributions: %w", err)
	}
	s := string(b)
	if s == "" {
		*d = Dists{}
		return nil
	}
	if s[0] > 1 {
		return errors.New("distributions: not this poolsim's")
	}
	rest := s[1:]
	for range 2 * nDists {
		if _, rest, err = sim.ReadHistogram(rest); err != nil {
			return fmt.Errorf("distributions: %w", err)
		}
	}
	if rest != "" {
		return errors.New("distributions: trailing bytes")
	}
	d.code = s
	return nil
}

// The distributions of Dists.
const (
	distLat       = iota // transaction latency
	distLatSteady        // the latencies of the steady window (closed: a window of distLat's)
	distWait             // pooler waits, one per assignment
	distReq              // request latency
	distAppWait          // application-pool waits, one per acquisition
	distDec              // the parts of a transaction's latency: distDec+i for each of the 8
	nDists        = distDec + 8
)

// percentiles are the metrics read as a percentile of one of Dists: the
// distribution and the percentile.
var percentiles = map[string]struct {
	dist int
	p    float64
}{
	"p50_ms": {distLat, 50}, "p95_ms": {distLat, 95}, "p99_ms": {distLat, 99},
	"p50_steady_ms": {distLatSteady, 50}, "p99_steady_ms": {distLatSteady, 99},
	"wait_p50_ms": {distWait, 50}, "wait_p99_ms": {distWait, 99},
	"req_p50_ms": {distReq, 50}, "req_p99_ms": {distReq, 99},
	"app_wait_p99_ms":     {distAppWait, 99},
	"app_wait_txn_p50_ms": {distDec + 0, 50}, "app_wait_txn_p99_ms": {distDec + 0, 99},
	"connect_txn_p50_ms": {distDec + 1, 50}, "connect_txn_p99_ms": {distDec + 1, 99},
	"pooler_wait_txn_p50_ms": {distDec + 2, 50}, "pooler_wait_txn_p99_ms": {distDec + 2, 99},
	"cpu_queue_txn_p50_ms": {distDec + 3, 50}, "cpu_queue_txn_p99_ms": {distDec + 3, 99},
	"service_txn_p50_ms": {distDec + 4, 50}, "service_txn_p99_ms": {distDec + 4, 99},
	"hop_txn_p50_ms": {distDec + 5, 50}, "hop_txn_p99_ms": {distDec + 5, 99},
	"think_txn_p50_ms": {distDec + 6, 50}, "think_txn_p99_ms": {distDec + 6, 99},
	"pooler_cpu_txn_p50_ms": {distDec + 7, 50}, "pooler_cpu_txn_p99_ms": {distDec + 7, 99},
}

// Result is a run's metrics and its mode's feature matrix; with classes,
// each class's metrics too (over the same steady window).
type Result struct {
	Metrics Metrics       `json:"metrics"`
	Compat  compat.Matrix `json:"compat"`
	Classes []ClassResult `json:"classes,omitempty"`
	// Machine is what the configuration's Machine reported of the run
	// (Parts.Report): of its machine's own type; nil without one.
	Machine any `json:"-"`
}

// ClassResult is one class's metrics. The server's own figures (CPU,
// memory, server connections at peak) are the run's; prepared statements
// and the pooler fleet's balance, budget and cancels are only in the
// run's metrics.
type ClassResult struct {
	Name    string  `json:"name"`
	Metrics Metrics `json:"metrics"`
}

func ms(t sim.Time) float64 { return t.Milliseconds() }

// Outcomes adds up how the attempted transactions ended: completed,
// refused, timed out at the pooler or the application pool, failed on a
// missing prepared statement, or unfinished. It equals AttemptedTxns.
func (m Metrics) Outcomes() int64 {
	return m.OKTxns + m.RefusedTxns + m.TimedOutTxns + m.AppTimeoutTxns + m.PreparedErrorTxns + m.UnfinishedTxn
}

// Field is one metric of Metrics: its JSON and CSV name, whether it is a
// count, and how to read it. Fields lists them in declaration order, so
// writers and readers of every format share one list.
type Field struct {
	Name  string
	Count bool // an integer count (a float when averaged over replications)
	index int
	// A percentile: of Dists[dist], at pct (pct 0: not a percentile).
	dist int
	pct  float64
	pos  int // its place in Fields()
}

// Pos is f's place in Fields(): an index for a table of every metric.
func (f Field) Pos() int { return f.pos }

// Percentile reports whether f is a percentile of a distribution of the
// run (p99_ms, wait_p99_ms, ...): over replications it is read from their
// samples together, not averaged (Replicated.Stat).
func (f Field) Percentile() bool { return f.pct > 0 }

var fields = func() []Field {
	t := reflect.TypeOf(Metrics{})
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue // a diagnostic, not a reported metric
		}
		fd := Field{Name: name, Count: f.Type.Kind() == reflect.Int64, index: i, pos: len(out)}
		if p, ok := percentiles[name]; ok {
			fd.dist, fd.pct = p.dist, p.p
		}
		out = append(out, fd)
	}
	return out
}()

// Fields are the metrics in declaration order. The slice is shared: do
// not change it.
func Fields() []Field { return fields }

// FieldByName finds a metric by its JSON name.
func FieldByName(name string) (Field, bool) {
	for _, f := range fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Get reads the metric from m as a float64.
func (f Field) Get(m *Metrics) float64 {
	v := reflect.ValueOf(m).Elem().Field(f.index)
	if f.Count {
		return float64(v.Int())
	}
	return v.Float()
}

// Set writes x into m; a count is rounded to the nearest integer.
func (f Field) Set(m *Metrics, x float64) {
	v := reflect.ValueOf(m).Elem().Field(f.index)
	if f.Count {
		v.SetInt(int64(math.Round(x)))
		return
	}
	v.SetFloat(x)
}
