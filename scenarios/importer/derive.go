package importer

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/scenarios"
)

// Sources are the facts import combines; any may be nil, one at least
// must give the statements' times.
type Sources struct {
	Console *ConsoleFacts
	PG      *PGFacts
	Log     *LogFacts
	Pgbench *PgbenchFacts
}

// Setting is one scenario value and where it came from.
type Setting struct {
	Key   string // the dotted scenario key, e.g. workload.clients
	Value string // as YAML
	From  string // source, window and formula, for the comment above it
}

// Figure is one observed figure the fidelity report puts beside the
// model's.
type Figure struct {
	Name   string  // e.g. "transactions/s"
	Metric string  // which model figure it compares with (see modelFigure)
	Value  float64 // observed
	Unit   string
	From   string // source and formula
	// Abs is the absolute difference that passes whatever the relative
	// error (a wait of 0.2 ms against 0.1 ms is a fit).
	Abs float64
}

// Import is a derived scenario: its settings with their provenance, what
// was observed to check it against, and what it could not carry.
type Import struct {
	Name     string
	Database string
	Settings []Setting
	Observed []Figure
	Sources  []string // one line per source: what was read, over which window
	Mix      []string // the statement mix from pg_stat_statements, most time first
	Caveats  []string // assumptions the values rest on
	Dropped  []string // what the sources showed that the model cannot take yet, and why
}

// Options tune a derivation.
type Options struct {
	Name string // the scenario's name; "" = imported-DATABASE
}

// maxTxns bounds a closed workload's transactions (clients ×
// txns_per_session), so the model's run stays short.
const maxTxns = 1_000_000

// minTxnsPerSession is the fewest transactions a closed client runs in
// the imported scenario, so the start (every client at once) weighs
// little in the means.
const minTxnsPerSession = 200

// setting adds a value.
func (im *Import) set(key, value, from string, args ...any) {
	im.Settings = append(im.Settings, Setting{Key: key, Value: value, From: fmt.Sprintf(from, args...)})
}

func (im *Import) caveat(format string, args ...any) {
	im.Caveats = append(im.Caveats, fmt.Sprintf(format, args...))
}

func (im *Import) drop(format string, args ...any) {
	im.Dropped = append(im.Dropped, fmt.Sprintf(format, args...))
}

// Value returns a setting's YAML value, or "".
func (im *Import) Value(key string) string {
	for _, s := range im.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// Derive combines the sources into a scenario.
func Derive(src Sources, opt Options) (*Import, error) {
	c, pg, lg, pb := src.Console, src.PG, src.Log, src.Pgbench
	if c == nil && pg == nil && lg == nil {
		if pb != nil {
			return nil, fmt.Errorf("%w: a pgbench log gives the clients, the transaction rate and latency, but not what a transaction is made of: add --pgbouncer, --pg or --csvlog", ErrNoData)
		}
		return nil, fmt.Errorf("%w: no source: give --pgbouncer, --pg, --csvlog or --pgbench-log", ErrBadInput)
	}
	im := &Import{}
	switch {
	case c != nil:
		im.Database = c.Database
	case lg != nil:
		im.Database = lg.Database
	default:
		im.Database = pg.Database
	}
	im.Name = opt.Name
	if im.Name == "" {
		im.Name = "imported-" + im.Database
	}
	im.describeSources(src)
	pooled := c != nil

	// The transaction rate, which several values and the fidelity report use.
	var x float64
	var xFrom string
	switch {
	case c != nil:
		x = c.XactsPerSec()
		xFrom = fmt.Sprintf("pgbouncer SHOW STATS: Δtotal_xact_count / window = %d / %.2fs", c.Xacts, c.Window.Span().Seconds())
	case pb != nil:
		x = pb.TxnsPerSec()
		xFrom = fmt.Sprintf("pgbench log: %d transactions / %.2fs", pb.Txns, pb.Window.Span().Seconds())
	case lg != nil:
		x = lg.TxnsPerSec()
		xFrom = fmt.Sprintf("csvlog: %d transactions / %.2fs", lg.Txns, lg.Window.Span().Seconds())
	case pg.Ends > 0:
		x = float64(pg.Ends) / pg.Window.Span().Seconds()
		xFrom = fmt.Sprintf("pg_stat_statements: %d COMMIT/END/ROLLBACK calls / %.2fs", pg.Ends, pg.Window.Span().Seconds())
	}

	// Statements per transaction: round trips, as the pool sees them.
	q, qFrom := 1.0, "no source tells transactions apart: one statement each"
	switch {
	case c != nil:
		q = c.QueriesPerXact()
		qFrom = fmt.Sprintf("pgbouncer SHOW STATS: Δtotal_query_count / Δtotal_xact_count = %d / %d = %.3f round trips per transaction", c.Queries, c.Xacts, q)
	case lg != nil:
		q = lg.TripsPerTxn()
		qFrom = fmt.Sprintf("csvlog: %d round trips in %d transactions (BEGIN ... COMMIT blocks; a statement outside one is its own) = %.3f", lg.TxnTrips, lg.Txns, q)
	case pg.Ends > 0:
		q = float64(pg.Calls) / float64(pg.Ends)
		qFrom = fmt.Sprintf("pg_stat_statements: %d calls / %d COMMIT/END/ROLLBACK = %.3f (each statement taken as one round trip)", pg.Calls, pg.Ends, q)
		im.caveat("statements per transaction come from pg_stat_statements alone, which counts statements, not round trips: several statements sent in one query string would be several here")
	default:
		im.caveat("no source tells transactions apart (no --pgbouncer or --csvlog, and pg_stat_statements counted no COMMIT): every statement is taken as its own transaction")
	}
	qn := max(1, int(math.Round(q)))
	if math.Abs(q-float64(qn)) > 0.05 {
		im.caveat("transactions have %.2f round trips on average; the model runs exactly %d each (a mix of transaction shapes is not modelled)", q, qn)
	}

	// Server time per round trip.
	query, queryText, queryFrom, err := im.queryTime(src, qn)
	if err != nil {
		return nil, err
	}

	// Clients, and whether they come and go.
	n, nFrom, err := im.clients(src)
	if err != nil {
		return nil, err
	}
	im.workload(src, n, nFrom, x, xFrom, q, qn, qFrom, query, queryText, queryFrom, pooled)
	im.pooler(src)
	im.server(src)
	im.observed(src, x, xFrom)
	if pg != nil {
		im.mix(pg)
	}
	im.caveat("statement times are modelled as fixed server time (workload.query), not as CPU shared by cores: the sources do not say which part of a statement is CPU; on a CPU-bound server set workload.cpu and server.cores")
	if pooled {
		im.caveat("the client<->pooler latency (pooler.hop) is not measured by any source: it is inside workload.think")
	}
	if pg == nil {
		im.caveat("no --pg: server.max_connections is PostgreSQL's default (100), not the server's")
	}
	// Values the model cannot take (a pool of a million, say) are the
	// sources' oddity, not a scenario to write.
	if _, err := scenarios.Parse(im.YAML("", ""), im.Name); err != nil {
		return nil, fmt.Errorf("%w: the sources give values the model cannot take: %v", ErrNoData, err)
	}
	return im, nil
}

// describeSources writes one line per source.
func (im *Import) describeSources(src Sources) {
	if c := src.Console; c != nil {
		im.Sources = append(im.Sources, fmt.Sprintf("--pgbouncer: %s, database %s, %d samples over %s", c.Version, c.Database, c.Window.Samples, c.Window))
	}
	if pg := src.PG; pg != nil {
		im.Sources = append(im.Sources, fmt.Sprintf("--pg: PostgreSQL %s, database %s, pg_stat_statements over %s", pg.Version, pg.Database, pg.Window))
	}
	if lg := src.Log; lg != nil {
		w := "the log's own span"
		if lg.Windowed {
			w = "the live sources' window"
		}
		im.Sources = append(im.Sources, fmt.Sprintf("--csvlog: %s (%s), database %s, %d round trips over %s (%s)",
			strings.Join(lg.Files, ", "), lg.Format, lg.Database, len(lg.RoundTrips), lg.Window, w))
	}
	if pb := src.Pgbench; pb != nil {
		kind := "per-transaction"
		if pb.Aggregated {
			kind = "aggregated"
		}
		im.Sources = append(im.Sources, fmt.Sprintf("--pgbench-log: %s (%s), %d transactions over %s", strings.Join(pb.Files, ", "), kind, pb.Txns, pb.Window))
	}
}

// queryTime chooses the server time per round trip: the log's own
// durations when there is a log, else pg_stat_statements' mix, else
// PgBouncer's mean.
func (im *Import) queryTime(src Sources, qn int) (mean time.Duration, text, from string, err error) {
	c, pg, lg := src.Console, src.PG, src.Log
	switch {
	case lg != nil:
		trips := lg.RoundTrips
		shift := time.Duration(0)
		if c != nil && c.ServerPerQuery() > lg.MeanTrip() {
			// PgBouncer holds the server for the round trip between it and
			// the server too: the log's times shifted by the difference
			// keep their shape and hold the server as long as PgBouncer
			// measured.
			shift = c.ServerPerQuery() - lg.MeanTrip()
			trips = make([]time.Duration, len(lg.RoundTrips))
			for i, d := range lg.RoundTrips {
				trips[i] = d + shift
			}
		}
		samples := groupMeans(trips, 200)
		mean = meanDur(trips)
		text = samplesText(samples)
		sorted := slices.Clone(trips)
		slices.Sort(sorted)
		from = fmt.Sprintf("csvlog: the server's duration of each of %d round trips (a simple query, or parse+bind+execute) over %s",
			len(lg.RoundTrips), lg.Window)
		if shift > 0 {
			from += fmt.Sprintf(", each plus %s: PgBouncer's query time without the wait, %s ((Δtotal_query_time − Δtotal_wait_time) / Δtotal_query_count), less the log's mean, %s - the pooler<->server round trip, during which the server is held too",
				short(shift), short(c.ServerPerQuery()), short(lg.MeanTrip()))
		}
		from += fmt.Sprintf("; written as %d equal-count groups of the sorted times, each group's mean (the mean stays exact): mean %s, p50 %s, p99 %s",
			len(samples), short(mean), short(pct(sorted, 50)), short(pct(sorted, 99)))
		if c != nil && shift == 0 {
			im.caveat("server time per round trip: the log says %s, PgBouncer %s (its query time without the wait); the log's is used", short(lg.MeanTrip()), short(c.ServerPerQuery()))
		}
		if pg != nil && pg.Calls > 0 {
			perTrip := pg.Total.Seconds() / pg.Window.Span().Seconds() / (float64(len(lg.RoundTrips)) / lg.Window.Span().Seconds())
			im.caveat("pg_stat_statements' execution time per round trip is %s (Σ total_exec_time per second over the log's round trips per second; planning, parsing and the protocol are not in it) against the log's %s",
				short(time.Duration(perTrip*1e9)), short(lg.MeanTrip()))
		}
	case pg != nil:
		trips := float64(pg.Calls) / pg.Window.Span().Seconds()
		how := "one round trip per statement"
		if c != nil {
			trips = float64(c.Queries) / c.Window.Span().Seconds()
			how = "PgBouncer's round trips per second"
		}
		per := pg.Total.Seconds() / pg.Window.Span().Seconds() / trips
		mean = time.Duration(per * 1e9)
		cv := 0.0
		if pg.Mean > 0 {
			cv = float64(pg.Stddev) / float64(pg.Mean)
		}
		if cv < 0.01 {
			text = durText(mean)
			from = fmt.Sprintf("pg_stat_statements over %s: Σ total_exec_time per second / %s = %s; the times hardly vary (CV %.3f): a constant", pg.Window, how, short(mean), cv)
		} else {
			sigma := math.Sqrt(math.Log(1 + cv*cv))
			text = fmt.Sprintf("{dist: lognormal, mean: %s, sigma: %.4f}", durText(mean), sigma)
			from = fmt.Sprintf("pg_stat_statements over %s: mean = Σ total_exec_time per second / %s = %s; shape: a lognormal with the whole mix's coefficient of variation (stddev %s / mean %s per call = %.3f, from the snapshots' sums and sums of squares), σ = √ln(1+CV²) = %.4f",
				pg.Window, how, short(mean), short(pg.Stddev), short(pg.Mean), cv, sigma)
		}
		im.caveat("pg_stat_statements' execution time leaves out planning, parsing and the protocol, so a round trip is a little longer than workload.query says")
	default:
		mean = c.ServerPerQuery()
		text = durText(mean)
		from = fmt.Sprintf("pgbouncer SHOW STATS: (Δtotal_query_time − Δtotal_wait_time) / Δtotal_query_count = %s; no source gives the shape: a constant", short(mean))
	}
	if mean <= 0 {
		return 0, "", "", fmt.Errorf("%w: the server time per round trip came out as %v: the window holds too little work", ErrNoData, mean)
	}
	return mean, text, from, nil
}

// clients chooses the number of clients.
func (im *Import) clients(src Sources) (int, string, error) {
	c, lg, pb := src.Console, src.Log, src.Pgbench
	switch {
	case c != nil:
		return max(1, int(math.Round(c.Clients))), fmt.Sprintf("pgbouncer SHOW POOLS, %d samples: mean cl_active + cl_waiting = %.2f + %.2f",
			c.Window.Samples, c.ClActive, c.ClWaiting), nil
	case pb != nil && pb.Clients > 0:
		return pb.Clients, fmt.Sprintf("pgbench log: %d distinct client ids", pb.Clients), nil
	case lg != nil && lg.OpenMean > 0 && lg.Connections:
		return max(1, int(math.Round(lg.OpenMean))), fmt.Sprintf("csvlog: time-average of the database's open sessions over %s = %.2f", lg.Window, lg.OpenMean), nil
	case lg != nil && lg.OpenMean > 0:
		im.caveat("the log has no connection lines (log_connections is off): sessions are counted from their first line to their last")
		return max(1, int(math.Round(lg.OpenMean))), fmt.Sprintf("csvlog: time-average of the database's sessions over %s (first line to last) = %.2f", lg.Window, lg.OpenMean), nil
	}
	return 0, "", fmt.Errorf("%w: how many clients there are is unknown: give --pgbouncer (SHOW POOLS), --pgbench-log, or a --csvlog", ErrNoData)
}

// workload writes the workload: block.
func (im *Import) workload(src Sources, n int, nFrom string, x float64, xFrom string, q float64, qn int, qFrom string,
	query time.Duration, queryText, queryFrom string, pooled bool) {
	c, lg, pb := src.Console, src.Log, src.Pgbench
	// Open or closed: clients that come and go during the window make
	// sessions; a fixed set of connected clients is a closed workload.
	arrivals, span, arrFrom := 0, time.Duration(0), ""
	switch {
	case c != nil && c.ClientArrivals > 0:
		arrivals, span = c.ClientArrivals, c.Window.Span()
		arrFrom = fmt.Sprintf("pgbouncer SHOW CLIENTS: %d client connections appeared between samples (a lower bound: a client that comes and goes between two samples is not seen)", arrivals)
	case c == nil && lg != nil && lg.Arrivals > 0:
		arrivals, span = lg.Arrivals, lg.Window.Span()
		arrFrom = fmt.Sprintf("csvlog: %d sessions authorized in the window", arrivals)
	}
	open := arrivals >= max(2, n) && x > 0
	g := im.gaps(src, n, x, qn, query, open, pooled)
	// With both gaps known, the request level sets them apart: app inside
	// a transaction, think between transactions (each its own request).
	requests := g.z >= 0 && qn > 1
	perKey, perNote := "workload.txns_per_session", ""
	if requests {
		perKey = "workload.requests_per_session"
		perNote = " (each transaction its own request: the sources do not show which transactions an application request groups, so txns_per_request stays 1)"
	}
	if open {
		rate := float64(arrivals) / span.Seconds()
		per := max(1, int(math.Round(x/rate)))
		im.set("workload.arrival_rate", strconv.FormatFloat(rate, 'g', 6, 64)+"/s", "%s over %.2fs: sessions turn over, so an open workload", arrFrom, span.Seconds())
		im.set("workload.duration", durText(span.Round(time.Second)), "the window's length")
		im.set(perKey, strconv.Itoa(per), "transactions per second / sessions per second = %.2f / %.3f (%s)%s", x, rate, xFrom, perNote)
		if pb != nil && pb.RateLimited {
			im.caveat("pgbench ran with a rate limit (-R): its clients are an open stream of transactions")
		}
	} else {
		im.set("workload.clients", strconv.Itoa(n), "%s; they stayed connected (a closed workload)", nFrom)
		per := minTxnsPerSession
		why := fmt.Sprintf("at least %d, so the model's start (every client at once) weighs little", minTxnsPerSession)
		if x > 0 {
			w := xSpan(src)
			ran := x * w.Seconds() / float64(n)
			if int(math.Round(ran)) > per {
				per = int(math.Round(ran))
				why = fmt.Sprintf("each client ran transactions/s × window / clients = %.2f × %.2fs / %d = %.1f in the window", x, w.Seconds(), n, ran)
			} else {
				why = fmt.Sprintf("each client ran %.1f in the window (transactions/s × window / clients); %s", ran, why)
			}
		}
		if per*n > maxTxns {
			per = max(1, maxTxns/n)
			why += fmt.Sprintf("; capped at %d so the model runs %d transactions at most", per, maxTxns)
		}
		im.set(perKey, strconv.Itoa(per), "%s%s", why, perNote)
		if pb != nil && pb.RateLimited {
			im.caveat("pgbench ran with a rate limit (-R), an open stream of transactions, but the clients stayed connected: imported as closed clients")
		}
	}
	im.set("workload.stmts_per_txn", strconv.Itoa(qn), "%s", qFrom)
	im.set("workload.query", queryText, "%s", queryFrom)
	if requests {
		im.set("workload.app", durText(g.t), "%s", g.tFrom)
		im.set("workload.think", durText(g.z), "%s: the client's time between transactions", g.zFrom)
		return
	}
	im.set("workload.think", durText(g.t), "%s", g.tFrom)
}

// xSpan is the window the transaction rate was measured over.
func xSpan(src Sources) time.Duration {
	switch {
	case src.Console != nil:
		return src.Console.Window.Span()
	case src.Pgbench != nil:
		return src.Pgbench.Window.Span()
	case src.Log != nil:
		return src.Log.Window.Span()
	}
	return src.PG.Window.Span()
}

// gapTimes are the client's time between the statements of a transaction
// (t) and between its transactions (z, -1 when no source shows it).
type gapTimes struct {
	t, z         time.Duration
	tFrom, zFrom string
}

// gaps works out the client's time between its statements (inside a
// transaction) and between its transactions, where the sources show it.
func (im *Import) gaps(src Sources, n int, x float64, qn int, query time.Duration, open, pooled bool) gapTimes {
	c, lg, pb := src.Console, src.Log, src.Pgbench
	g := gapTimes{z: -1}
	if c != nil && !open {
		cycle := time.Duration(float64(n) / x * 1e9)
		inPool := c.XactTime / time.Duration(c.Xacts)
		g.z = cycle - inPool
		g.zFrom = fmt.Sprintf("pgbouncer: a closed client's cycle, clients / transactions per second = %d / %.2f = %s, less PgBouncer's transaction time with its wait, %s",
			n, x, short(cycle), short(inPool))
	} else if lg != nil && !pooled && len(lg.BetweenGaps) > 0 {
		g.z = meanDur(lg.BetweenGaps)
		g.zFrom = fmt.Sprintf("csvlog: mean of %d gaps between a session's transactions (millisecond log times: the mean only)", len(lg.BetweenGaps))
	}
	switch {
	case c != nil && qn > 1:
		hold := c.HoldPerXact()
		g.t = (hold - time.Duration(qn)*query) / time.Duration(qn-1)
		g.tFrom = fmt.Sprintf("pgbouncer: a transaction held its server (Δtotal_xact_time − Δtotal_wait_time) / Δtotal_xact_count = %s; less %d × workload.query's mean %s, over the %d gaps between its round trips: the client's time between statements (hops and pooler included), so the model holds a server as long as PgBouncer measured",
			short(hold), qn, short(query), qn-1)
		if lg != nil && len(lg.InTxnGaps) > 0 {
			im.caveat("the log's gaps inside transactions average %s (server side, %d gaps, ±1 ms each) against %s from PgBouncer's transaction time",
				short(meanDur(lg.InTxnGaps)), len(lg.InTxnGaps), short(g.t))
		}
		im.linkedTime(c, x, hold)
	case g.z >= 0 && qn == 1:
		// One statement a transaction: the only gap is between transactions.
		g.t, g.tFrom = g.z, g.zFrom+": one statement per transaction, so this is the time between them"
		g.z = -1
	case lg != nil && qn > 1 && len(lg.InTxnGaps) > 0:
		g.t = meanDur(lg.InTxnGaps)
		g.tFrom = fmt.Sprintf("csvlog: mean of %d gaps between the round trips of a transaction (next start − previous end; log times have millisecond resolution, so each gap is ±1 ms and only the mean is used)", len(lg.InTxnGaps))
	case pb != nil && len(pb.Gaps) > 0 && qn == 1:
		g.t = meanDur(pb.Gaps)
		g.tFrom = fmt.Sprintf("pgbench log: mean of %d gaps between a client's transactions", len(pb.Gaps))
	default:
		g.tFrom = "no source shows the clients' time between statements: 0"
		im.caveat("the clients' think time is unknown and set to 0: the model's clients send their next statement at once")
	}
	if g.t < 0 {
		im.caveat("the time between statements came out negative (%s): the server time per round trip (workload.query) is longer than PgBouncer's measured hold allows; set to 0", short(g.t))
		g.t = 0
	}
	if g.z < 0 && g.zFrom != "" {
		im.caveat("the time between transactions came out negative (%s): set to 0", short(g.z))
		g.z = 0
	}
	return g
}

// linkedTime checks PgBouncer's hold per transaction against Little's law
// on its linked servers (mean sv_active = transactions per second × time
// linked): at a full pool with clients waiting, a server PgBouncer shows
// idle is one being handed from a client to the next, which the model
// does at once.
func (im *Import) linkedTime(c *ConsoleFacts, x float64, hold time.Duration) {
	if c.Window.Samples < 3 || hold <= 0 {
		return
	}
	pool := float64(c.PoolSize)
	if c.ClWaiting >= 0.5 && c.SvActive < pool-0.05 {
		im.drop("with %.2f clients waiting on average, PgBouncer showed %.2f of the pool's %d servers linked (mean sv_active over %d samples): %.0f%% of the pool's time went to handing a released server to the next client, which the model does at once, so at a full pool it is about that much fast",
			c.ClWaiting, c.SvActive, c.PoolSize, c.Window.Samples, 100*(1-c.SvActive/pool))
		return
	}
	linked := time.Duration(c.SvActive / x * 1e9)
	if d := (linked - hold).Abs(); d > hold*3/100 && d > 500*time.Microsecond {
		im.caveat("by Little's law on the linked servers a transaction held one %s (mean sv_active / transactions per second = %.2f / %.2f), against %s from PgBouncer's times, which the model uses; the samples of sv_active are %d",
			short(linked), c.SvActive, x, short(hold), c.Window.Samples)
	}
}

// pooler writes the pooler: block from PgBouncer's settings, or direct
// connections without a console.
func (im *Import) pooler(src Sources) {
	c := src.Console
	if c == nil {
		im.set("pooler.mode", "direct", "no --pgbouncer: the clients connect to PostgreSQL directly (poolsim advise, or --set pooler.mode=transaction, asks what a pooler would do)")
		return
	}
	im.set("pooler.mode", c.Mode.String(), "pgbouncer SHOW POOLS pool_mode of database %s", c.Database)
	im.set("pooler.default_pool_size", strconv.Itoa(c.PoolSize), "pgbouncer SHOW DATABASES pool_size of database %s (default_pool_size %d)", c.Database, c.Settings.DefaultPoolSize)
	im.set("pooler.max_client_conn", strconv.Itoa(c.Settings.MaxClientConn), "pgbouncer SHOW CONFIG max_client_conn")
	if c.MaxDBConnections > 0 {
		im.set("pooler.max_db_connections", strconv.Itoa(c.MaxDBConnections), "pgbouncer SHOW DATABASES max_connections of database %s / SHOW CONFIG max_db_connections", c.Database)
	}
	im.set("pooler.query_wait_timeout", durText(c.Settings.QueryWaitTimeout), "pgbouncer SHOW CONFIG query_wait_timeout (0s: off)")
	if c.HasPrepared {
		im.set("pooler.max_prepared_statements", strconv.Itoa(c.Settings.MaxPreparedStatements), "pgbouncer SHOW CONFIG max_prepared_statements")
	} else {
		im.set("pooler.max_prepared_statements", "0", "%s has no max_prepared_statements (PgBouncer 1.21+): protocol-level prepared statements are not kept across servers", c.Version)
	}
	im.set("pooler.hop", "0s", "not measured: the client<->pooler round trip is inside workload.think")
	if len(c.Users) > 1 {
		im.drop("database %s has one pool per user (%s); the model has one pool (several pools and client classes are issue 12): their clients and traffic are merged into one pool of size %d",
			c.Database, strings.Join(c.Users, ", "), c.PoolSize)
	}
	if len(c.OtherDatabases) > 0 {
		im.drop("databases %s also had transactions in the window; one database is imported (--database chooses; several pools are issue 12)", strings.Join(c.OtherDatabases, ", "))
	}
	if c.MinPoolSize > 0 {
		im.set("pooler.min_pool_size", strconv.Itoa(c.MinPoolSize), "pgbouncer SHOW DATABASES min_pool_size of database %s", c.Database)
	}
	if c.ReservePool > 0 {
		im.drop("reserve_pool %d (after reserve_pool_timeout %v) is not modelled: the pool is default_pool_size only", c.ReservePool, c.Settings.ReservePoolTimeout)
	}
	for _, s := range []struct {
		name string
		v    time.Duration
	}{{"query_timeout", c.Settings.QueryTimeout}, {"idle_transaction_timeout", c.Settings.IdleTransactionTimeout}, {"client_idle_timeout", c.Settings.ClientIdleTimeout}} {
		if s.v > 0 {
			im.drop("%s %v is not modelled", s.name, s.v)
		}
	}
	if c.Mode == poolmode.Session && c.Settings.ServerResetQuery != "" {
		im.caveat("session mode resets a server with %q when its client leaves; its time (pooler.reset_cost) is not measured and left at 0", c.Settings.ServerResetQuery)
	}
}

// server writes the server: block.
func (im *Import) server(src Sources) {
	pg, lg := src.PG, src.Log
	if pg != nil {
		im.set("server.max_connections", strconv.Itoa(max(1, pg.MaxConnections)), "pg_settings max_connections")
		reserved, from := pg.SuperuserReserved, fmt.Sprintf("pg_settings superuser_reserved_connections %d", pg.SuperuserReserved)
		if pg.Reserved > 0 {
			reserved += pg.Reserved
			from += fmt.Sprintf(" + reserved_connections %d (pg_use_reserved_connections)", pg.Reserved)
		}
		im.set("server.superuser_reserved_connections", strconv.Itoa(min(reserved, max(0, pg.MaxConnections-1))), "%s: slots an application role cannot take (%d of max_connections left to it)", from, max(1, pg.UsableSlots()))
	}
	if lg != nil && len(lg.ConnectTimes) > 0 {
		m := meanDur(lg.ConnectTimes)
		who := "clients'"
		if src.Console != nil {
			who = "PgBouncer's"
		}
		im.set("server.connect", durText(m), "csvlog: connection received → authorized, mean of %d %s logins in the log (millisecond resolution)", len(lg.ConnectTimes), who)
	}
}

// observed lists the figures the fidelity report checks.
func (im *Import) observed(src Sources, x float64, xFrom string) {
	c, pb, lg := src.Console, src.Pgbench, src.Log
	if x > 0 {
		im.Observed = append(im.Observed, Figure{Name: "transactions/s", Metric: "tps", Value: x, Unit: "/s", From: xFrom})
	}
	if c != nil {
		// A wait within 5 % of a transaction's time in the pooler is no
		// wait that matters (the model's closed clients all start at once,
		// so its first transactions wait for the pool to open).
		txn := ms2(c.XactTime / time.Duration(c.Xacts))
		im.Observed = append(im.Observed,
			Figure{Name: "wait for a server per transaction", Metric: "wait_per_txn_ms", Value: ms2(c.WaitPerXact()), Unit: "ms", Abs: max(0.5, txn/20),
				From: "pgbouncer SHOW STATS: Δtotal_wait_time / Δtotal_xact_count"},
			Figure{Name: "clients waiting (Little's L)", Metric: "wait_L", Value: c.WaitL(), Abs: 0.5,
				From: "pgbouncer SHOW STATS: Δtotal_wait_time / window, L = λW"},
			Figure{Name: "clients waiting (sampled cl_waiting)", Metric: "wait_L", Value: c.ClWaiting, Abs: 0.5,
				From: fmt.Sprintf("pgbouncer SHOW POOLS: mean cl_waiting over %d samples", c.Window.Samples)},
			Figure{Name: "servers linked (sampled sv_active)", Metric: "sv_active", Value: c.SvActive, Abs: 0.5,
				From: fmt.Sprintf("pgbouncer SHOW POOLS: mean sv_active over %d samples", c.Window.Samples)},
			Figure{Name: "transaction time in the pooler", Metric: "txn_ms", Value: txn, Unit: "ms", Abs: 0.5,
				From: "pgbouncer SHOW STATS: Δtotal_xact_time / Δtotal_xact_count (wait included)"})
	}
	if pb != nil {
		if c != nil || lg != nil {
			im.Observed = append(im.Observed, Figure{Name: "transactions/s (pgbench)", Metric: "tps", Value: pb.TxnsPerSec(), Unit: "/s",
				From: fmt.Sprintf("pgbench log: %d transactions / %.2fs", pb.Txns, pb.Window.Span().Seconds())})
		}
		im.Observed = append(im.Observed, Figure{Name: "pgbench latency", Metric: "pgbench_ms", Value: ms2(pb.Mean), Unit: "ms", Abs: 0.5,
			From: "pgbench log: mean of the transactions' times (the whole script, its \\sleep after the last statement included)"})
	}
}

// mix lists the statements pg_stat_statements saw, most time first.
func (im *Import) mix(pg *PGFacts) {
	span := pg.Window.Span().Seconds()
	for i, s := range pg.Statements {
		if i == 12 {
			im.Mix = append(im.Mix, fmt.Sprintf("... and %d more statements", len(pg.Statements)-i))
			break
		}
		share := 0.0
		if pg.Total > 0 {
			share = 100 * float64(s.Total) / float64(pg.Total)
		}
		im.Mix = append(im.Mix, fmt.Sprintf("%7.1f calls/s  mean %-8s stddev %-8s %5.1f%% of the time  %s",
			float64(s.Calls)/span, short(s.Mean), short(s.Stddev), share, clip(strings.Join(strings.Fields(s.Query), " "), 70)))
	}
	if len(pg.Statements) > 1 {
		im.drop("the statement mix (%d statements, listed above) is one distribution of server time per round trip: the model has no per-statement kinds", len(pg.Statements))
	}
	if pg.Evicted > 0 {
		im.caveat("pg_stat_statements evicted %d entries during the window (pg_stat_statements.max %s): some calls are missing", pg.Evicted, pg.Setting["pg_stat_statements.max"])
	}
	if pg.Hidden > 0 {
		im.caveat("%d calls' texts were hidden (<insufficient privilege>): grant pg_read_all_stats to see them", pg.Hidden)
	}
	if pg.UtilityHidden {
		im.caveat("pg_stat_statements.track_utility is off: BEGIN and COMMIT are not counted")
	}
}

// groupMeans sorts xs and returns the means of k nearly equal-count
// groups (all of xs when there are k or fewer).
func groupMeans(xs []time.Duration, k int) []time.Duration {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) <= k {
		return s
	}
	out := make([]time.Duration, k)
	for g := range k {
		lo, hi := g*len(s)/k, (g+1)*len(s)/k
		var sum float64
		for _, v := range s[lo:hi] {
			sum += float64(v)
		}
		out[g] = time.Duration(sum / float64(hi-lo))
	}
	return out
}

// samplesText writes an empirical distribution of samples in
// milliseconds.
func samplesText(xs []time.Duration) string {
	var b strings.Builder
	b.WriteString("{dist: empirical, unit: ms, samples: [")
	for i, v := range xs {
		if i > 0 {
			b.WriteString(", ")
			if i%10 == 0 {
				b.WriteString("\n      ")
			}
		}
		b.WriteString(strconv.FormatFloat(float64(v.Round(time.Microsecond))/1e6, 'f', -1, 64))
	}
	b.WriteString("]}")
	return b.String()
}

// pct is the nearest-rank percentile of sorted xs.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[max(0, min(len(sorted)-1, k-1))]
}

// durText writes a duration for the scenario, to the microsecond.
func durText(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Microsecond {
		d = time.Microsecond
	}
	return d.Round(time.Microsecond).String()
}

// short writes a duration with three significant digits, for comments.
func short(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	v, unit := float64(d), "ns"
	switch {
	case d >= time.Second:
		v, unit = v/1e9, "s"
	case d >= time.Millisecond:
		v, unit = v/1e6, "ms"
	case d >= time.Microsecond:
		v, unit = v/1e3, "µs"
	}
	switch {
	case v >= 99.95:
		return neg + strconv.FormatFloat(v, 'f', 0, 64) + unit
	case v >= 9.995:
		return neg + strconv.FormatFloat(v, 'f', 1, 64) + unit
	}
	return neg + strconv.FormatFloat(v, 'f', 2, 64) + unit
}

// ms2 is a duration in milliseconds.
func ms2(d time.Duration) float64 { return float64(d) / 1e6 }
