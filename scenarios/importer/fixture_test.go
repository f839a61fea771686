package importer

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/scenarios"
)

// The tests here read testdata/lab, recorded from a real run (see
// record_test.go): 6 pgbench clients, PgBouncer 1.18 in transaction mode
// with 2 servers, transactions of 3 round trips of pg_sleep(0.02) with a
// 20 ms \sleep after each. The expected figures follow from that set-up,
// not from the recording: pg_sleep and \sleep only ever overshoot, and a
// pool of 2 serving 6 clients that each need it 100 of every 120 ms keeps
// both servers busy and 4 clients waiting.

func fixture(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(fixtureDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%v (record it: POOLSIM_RECORD_FIXTURES=1 go test ./scenarios/importer -run TestRecordFixtures)", err)
	}
	return p
}

func loadJSON[T any](t *testing.T, name string) *T {
	t.Helper()
	b, err := os.ReadFile(fixture(t, name))
	if err != nil {
		t.Fatal(err)
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
	return v
}

func within(t *testing.T, what string, got, lo, hi float64) {
	t.Helper()
	if !(got >= lo && got <= hi) {
		t.Errorf("%s = %v, want %v..%v", what, got, lo, hi)
	}
}

func msf(d time.Duration) float64 { return float64(d) / 1e6 }

func fixtureFacts(t *testing.T) Sources {
	t.Helper()
	c, err := AnalyzeConsole(loadJSON[ConsoleRecord](t, "console.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := AnalyzePG(loadJSON[PGRecord](t, "pg.json"))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := AnalyzeLogs([]string{fixture(t, "postgresql.csv")}, LogOptions{Database: c.Database, From: c.Window.From, To: c.Window.To})
	if err != nil {
		t.Fatal(err)
	}
	pb, err := AnalyzePgbench([]string{fixture(t, "pgbench_log.0"), fixture(t, "pgbench_log.1")}, c.Window.From, c.Window.To)
	if err != nil {
		t.Fatal(err)
	}
	return Sources{Console: c, PG: pg, Log: lg, Pgbench: pb}
}

func TestConsoleFixture(t *testing.T) {
	c := fixtureFacts(t).Console
	if c.Database != "poolsim" || c.Mode != poolmode.Transaction || c.PoolSize != fixPool {
		t.Errorf("database %s, mode %v, pool %d; want poolsim, transaction, %d", c.Database, c.Mode, c.PoolSize, fixPool)
	}
	if !strings.HasPrefix(c.Version, "PgBouncer 1.18") || c.HasPrepared || c.Assignments != -1 {
		t.Errorf("version %q, max_prepared_statements %v, assignments %d: want PgBouncer 1.18's console (no max_prepared_statements, no assignment count)",
			c.Version, c.HasPrepared, c.Assignments)
	}
	within(t, "clients (cl_active + cl_waiting)", c.Clients, fixClients-0.01, fixClients+0.01)
	within(t, "sv_active", c.SvActive, fixPool-0.3, fixPool)
	within(t, "round trips per transaction", c.QueriesPerXact(), fixStmts-0.05, fixStmts+0.05)
	within(t, "server time per query (ms)", msf(c.ServerPerQuery()), 20, 40)
	// A transaction holds its server for 3 queries and the 2 gaps between them.
	within(t, "hold per transaction (ms)", msf(c.HoldPerXact()), 95, 200)
	// Two servers each held hold-long: at most 2/hold transactions a second.
	within(t, "transactions/s against 2 / hold", c.XactsPerSec()*c.HoldPerXact().Seconds()/fixPool, 0.85, 1.01)
	// Little: the wait total over the window is the time-average of waiters,
	// which the samples see too (4 of 6 clients wait most of the time).
	within(t, "waiting clients from the wait total", c.WaitL(), 2.5, 4.5)
	within(t, "sampled cl_waiting / Little's L", c.ClWaiting/c.WaitL(), 0.7, 1.3)
	if c.ClientArrivals != 0 || c.ClientDepartures != 0 {
		t.Errorf("client turnover %d/%d: pgbench's clients stay connected", c.ClientArrivals, c.ClientDepartures)
	}
}

func TestPGFixture(t *testing.T) {
	pg := fixtureFacts(t).PG
	if pg.MaxConnections != 100 || pg.SuperuserReserved != 3 || pg.UsableSlots() != 97 {
		t.Errorf("max_connections %d, reserved %d: want 100 and 3", pg.MaxConnections, pg.SuperuserReserved)
	}
	var sleep *StatementFacts
	for i := range pg.Statements {
		if pg.Statements[i].Query == "SELECT pg_sleep($1)" {
			sleep = &pg.Statements[i]
		}
		if strings.Contains(pg.Statements[i].Query, ownTag) {
			t.Errorf("import's own statement %q is in the mix", pg.Statements[i].Query)
		}
	}
	if sleep == nil {
		t.Fatalf("no SELECT pg_sleep($1) in %+v", pg.Statements)
	}
	within(t, "pg_sleep(0.02) mean (ms)", msf(sleep.Mean), 20, 30)
	within(t, "pg_sleep(0.02) stddev (ms)", msf(sleep.Stddev), 0, 10)
	// BEGIN and COMMIT each once per transaction, three sleeps in between.
	if pg.Begins == 0 || math.Abs(float64(pg.Begins-pg.Ends)) > 2 {
		t.Errorf("begins %d, ends %d: want one of each per transaction", pg.Begins, pg.Ends)
	}
	within(t, "sleeps per COMMIT", float64(sleep.Calls)/float64(pg.Ends), 2.8, 3.2)
	if sleep.Total > pg.Total || pg.Total-sleep.Total > pg.Total/100 {
		t.Errorf("the sleep took %v of %v: it is nearly all the server's time", sleep.Total, pg.Total)
	}
}

func TestLogFixture(t *testing.T) {
	src := fixtureFacts(t)
	lg, c := src.Log, src.Console
	if lg.Format != csvFormat || lg.Database != "poolsim" || !lg.ZoneKnown || !lg.Windowed || !lg.Connections {
		t.Errorf("format %s, database %s, zone known %v, windowed %v, connections %v", lg.Format, lg.Database, lg.ZoneKnown, lg.Windowed, lg.Connections)
	}
	// Every whole transaction is BEGIN+sleep, sleep, sleep+COMMIT.
	if lg.TxnTrips != fixStmts*lg.Txns {
		t.Errorf("%d round trips in %d transactions, want exactly %d each", lg.TxnTrips, lg.Txns, fixStmts)
	}
	within(t, "round trip (ms)", msf(lg.MeanTrip()), 20, 30)
	within(t, "gap inside a transaction (ms)", msf(meanDur(lg.InTxnGaps)), 15, 40)
	if len(lg.InTxnGaps) != (fixStmts-1)*lg.Txns {
		t.Errorf("%d gaps for %d transactions, want %d each", len(lg.InTxnGaps), lg.Txns, fixStmts-1)
	}
	// The log and PgBouncer count the same transactions in the same window
	// (the log's times are whole milliseconds: a few at the edges differ).
	within(t, "log transactions / PgBouncer's", float64(lg.Txns)/float64(c.Xacts), 0.9, 1.1)
	// The server's time per round trip is below PgBouncer's, which holds the
	// pooler<->server round trip too.
	if lg.MeanTrip() > c.ServerPerQuery() {
		t.Errorf("log round trip %v above PgBouncer's server time per query %v", lg.MeanTrip(), c.ServerPerQuery())
	}
	if lg.Textless != 0 || lg.Extended {
		t.Errorf("textless %d, extended %v: pgbench -M simple logs every statement's text", lg.Textless, lg.Extended)
	}
	// PgBouncer's SET application_name on each server, and --pg's own
	// statements, are not the application's.
	if lg.Housekeeping < 2 {
		t.Errorf("housekeeping %d: want PgBouncer's SETs and import's statements left out", lg.Housekeeping)
	}
	// The sessions are PgBouncer's two server connections.
	if lg.Sessions != fixPool {
		t.Errorf("%d sessions in the window, want PgBouncer's %d server connections", lg.Sessions, fixPool)
	}
	// The jsonlog of the same run says the same.
	js, err := AnalyzeLogs([]string{fixture(t, "postgresql.json")}, LogOptions{Database: c.Database, From: c.Window.From, To: c.Window.To})
	if err != nil {
		t.Fatal(err)
	}
	if js.Format != jsonFormat || js.Txns != lg.Txns || len(js.RoundTrips) != len(lg.RoundTrips) || js.MeanTrip() != lg.MeanTrip() ||
		meanDur(js.InTxnGaps) != meanDur(lg.InTxnGaps) || js.Sessions != lg.Sessions {
		t.Errorf("jsonlog: %s %d txns, %d trips, %v, gaps %v, %d sessions; csvlog: %d, %d, %v, %v, %d", js.Format, js.Txns, len(js.RoundTrips),
			js.MeanTrip(), meanDur(js.InTxnGaps), js.Sessions, lg.Txns, len(lg.RoundTrips), lg.MeanTrip(), meanDur(lg.InTxnGaps), lg.Sessions)
	}
}

func TestPgbenchFixture(t *testing.T) {
	src := fixtureFacts(t)
	pb, c := src.Pgbench, src.Console
	if pb.Clients != fixClients || pb.Aggregated || pb.RateLimited || pb.Failed != 0 {
		t.Errorf("clients %d, aggregated %v, rate-limited %v, failed %d", pb.Clients, pb.Aggregated, pb.RateLimited, pb.Failed)
	}
	within(t, "pgbench transactions/s / PgBouncer's", pb.TxnsPerSec()/c.XactsPerSec(), 0.9, 1.1)
	// A closed client's latency is its share of the cycle: clients / rate.
	within(t, "pgbench latency × rate / clients", pb.Mean.Seconds()*pb.TxnsPerSec()/fixClients, 0.9, 1.1)
	// pgbench logs transactions back to back: a client's gap is its own
	// bookkeeping, well under a millisecond on average.
	within(t, "gap between a client's transactions (ms)", msf(meanDur(pb.Gaps)), -1, 1)
	whole, err := AnalyzePgbench([]string{fixture(t, "pgbench_log.0"), fixture(t, "pgbench_log.1")}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if whole.Txns <= pb.Txns || whole.Window.Span() <= pb.Window.Span() {
		t.Errorf("the whole log (%d transactions over %v) should hold more than the window (%d over %v)", whole.Txns, whole.Window.Span(), pb.Txns, pb.Window.Span())
	}
}

func TestDeriveFixture(t *testing.T) {
	src := fixtureFacts(t)
	im, err := Derive(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"workload.clients": "6", "workload.stmts_per_txn": "3", "pooler.mode": "transaction",
		"pooler.default_pool_size": "2", "pooler.max_prepared_statements": "0", "server.max_connections": "100", "server.superuser_reserved_connections": "3",
		"pooler.query_wait_timeout": "2m0s", "pooler.hop": "0s",
	} {
		if got := im.Value(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	for _, s := range im.Settings {
		if strings.TrimSpace(s.From) == "" {
			t.Errorf("%s has no provenance", s.Key)
		}
	}
	if im.Value("workload.arrival_rate") != "" {
		t.Errorf("pgbench's clients stay connected: want a closed workload, got arrival_rate %s", im.Value("workload.arrival_rate"))
	}
	text := im.YAML("poolsim import (test)", "")
	sc, err := scenarios.Parse(text, "imported.yaml")
	if err != nil {
		t.Fatalf("the imported scenario does not load: %v\n%s", err, text)
	}
	w := sc.Base.Workload
	// The model holds a server as long as PgBouncer measured: query and
	// app together make PgBouncer's hold per transaction.
	hold := 3*w.Query.MeanValue().Duration() + 2*w.AppPause().MeanValue().Duration()
	within(t, "model hold / PgBouncer's", float64(hold)/float64(src.Console.HoldPerXact()), 0.99, 1.01)
	// Both gaps are known, so the request level sets them apart: app
	// inside a transaction, think between transactions; a closed client's
	// cycle is then the observed one, clients / transactions per second.
	if !w.RequestLevel() || w.RequestsPerSession < 200 || !w.AppSet || im.Value("workload.txns_per_session") != "" {
		t.Errorf("want requests_per_session with app and think, got %+v", im.Settings)
	}
	cycle := src.Console.XactTime/time.Duration(src.Console.Xacts) + w.Think.MeanValue().Duration()
	within(t, "model cycle / clients per transaction rate", cycle.Seconds()*src.Console.XactsPerSec()/fixClients, 0.99, 1.01)
	if bytesOf(im.YAML("x", "")) != bytesOf(mustDerive(t, src).YAML("x", "")) {
		t.Error("two derivations of the same facts differ")
	}
	fd, err := Check(context.Background(), sc, im.Observed, 5)
	if err != nil {
		t.Fatal(err)
	}
	if !fd.Fits {
		t.Errorf("the imported scenario does not fit the run it came from:\n%s", fd.Text())
	}
	if len(fd.Rows) != len(im.Observed) || len(fd.Rows) < 7 {
		t.Errorf("%d figures compared, want every observed one (%d, at least 7)", len(fd.Rows), len(im.Observed))
	}
}

func mustDerive(t *testing.T, src Sources) *Import {
	im, err := Derive(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return im
}

func bytesOf(b []byte) string { return string(b) }

// TestDeriveEachSource: every source alone, or the logs without the
// console, still gives a scenario that loads, with what it can know.
func TestDeriveEachSource(t *testing.T) {
	all := fixtureFacts(t)
	for _, tc := range []struct {
		name string
		src  Sources
		want map[string]string
	}{
		{"console", Sources{Console: all.Console}, map[string]string{"workload.clients": "6", "workload.stmts_per_txn": "3", "pooler.default_pool_size": "2"}},
		{"pg", Sources{PG: all.PG, Pgbench: all.Pgbench}, map[string]string{"workload.clients": "6", "pooler.mode": "direct", "server.max_connections": "100", "server.superuser_reserved_connections": "3"}},
		{"csvlog", Sources{Log: all.Log}, map[string]string{"workload.stmts_per_txn": "3", "pooler.mode": "direct"}},
		{"csvlog+pgbench", Sources{Log: all.Log, Pgbench: all.Pgbench}, map[string]string{"workload.clients": "6", "workload.stmts_per_txn": "3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, err := Derive(tc.src, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := im.Value(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if _, err := scenarios.Parse(im.YAML("", ""), tc.name); err != nil {
				t.Fatalf("does not load: %v\n%s", err, im.YAML("", ""))
			}
		})
	}
	if _, err := Derive(Sources{Pgbench: all.Pgbench}, Options{}); err == nil || !strings.Contains(err.Error(), "add --pgbouncer, --pg or --csvlog") {
		t.Errorf("a pgbench log alone: %v, want an error naming the sources to add", err)
	}
}
