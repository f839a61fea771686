package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/proxy/pooler"
)

// cluster is the one throwaway PostgreSQL of the package's tests.
var cluster *pgcluster.Cluster

func TestMain(m *testing.M) {
	code := pgclustertest.RunMain(m, pgcluster.Options{MaxConnections: 30}, &cluster)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testProxy is a proxy in transaction mode in front of the cluster, with
// its metrics served on a loopback port; both stop when the test ends.
type testProxy struct {
	*pooler.Proxy
	dsn, admin, metrics string
}

func startProxy(t *testing.T, poolSize int) *testProxy {
	t.Helper()
	c := pgclustertest.Need(t, cluster)
	cfg := pooler.DefaultConfig()
	cfg.Listen, cfg.Upstream, cfg.PoolMode, cfg.DefaultPoolSize = "127.0.0.1:0", c.UserDSN(), poolmode.Transaction, poolSize
	cfg.ShutdownTimeout = 2 * time.Second
	cfg.AdminUsers = []string{"poolsim"}
	cfg.Logf = t.Logf
	p, err := pooler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served, mserved := make(chan error, 1), make(chan error, 1)
	go func() { served <- p.Serve(ctx, ln) }()
	go func() { mserved <- Serve(ctx, mln, p) }()
	t.Cleanup(func() {
		cancel()
		for _, ch := range []chan error{served, mserved} {
			select {
			case err := <-ch:
				if err != nil {
					t.Error(err)
				}
			case <-time.After(15 * time.Second):
				t.Error("proxy or metrics server still running 15s after the test")
			}
		}
	})
	addr := ln.Addr().String()
	return &testProxy{Proxy: p, dsn: "postgres://poolsim:poolsim@" + addr + "/poolsim?sslmode=disable",
		admin: "postgres://poolsim:poolsim@" + addr + "/pgbouncer?sslmode=disable", metrics: "http://" + mln.Addr().String() + "/metrics"}
}

// scrape fetches url and parses Prometheus' text format.
func scrape(ctx context.Context, t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s, %v\n%s", url, resp.Status, err, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("scrape %s: parse: %v\n%s", url, err, body)
	}
	return fams
}

// series finds the sample of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		return m
	}
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m == nil:
		return math.NaN()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return math.NaN()
}

// bucket is the cumulative count of h at upper bound le.
func bucket(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.Bucket {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return math.MaxUint64
}

// TestEndpoint: on a one-server transaction pool, a client waits while
// another holds the server in a transaction for 300 ms more: the
// endpoint shows the waiting client (SHOW POOLS cl_waiting) while it
// waits; afterwards the counters equal the console's SHOW STATS totals,
// and the histograms hold the long transaction and the long wait above
// 250 ms, with as many wait observations as server assignments.
func TestEndpoint(t *testing.T) {
	tp := startProxy(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pool := map[string]string{"database": "poolsim", "user": "poolsim"}
	holder, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	waiter, err := pgx.Connect(ctx, tp.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, "select 2")
		waited <- err
	}()
	for {
		fams := scrape(ctx, t, tp.metrics)
		if value(series(fams, "poolsim_proxy_pool_client_waiting_connections", pool)) == 1 &&
			value(series(fams, "poolsim_proxy_pool_server_active_connections", pool)) == 1 {
			if mw := value(series(fams, "poolsim_proxy_pool_client_maxwait_seconds", pool)); !(mw >= 0) {
				t.Errorf("maxwait while a client waits: %v", mw)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the endpoint never showed a waiting client and an active server")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waiting := time.Now() // the waiter has been waiting since before this
	for time.Since(waiting) < 300*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	// The waiter's ReadyForQuery has reached it: its counters are in.
	fams := scrape(ctx, t, tp.metrics)
	admin, err := pgx.Connect(ctx, tp.admin)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var xacts, queries, waitUS int64
	res, err := admin.PgConn().Exec(ctx, "SHOW STATS_TOTALS").ReadAll()
	if err != nil || len(res) != 1 {
		t.Fatalf("SHOW STATS_TOTALS: %v", err)
	}
	for _, r := range res[0].Rows {
		if string(r[0]) != "poolsim" {
			continue
		}
		for i, f := range res[0].FieldDescriptions {
			n, _ := strconv.ParseInt(string(r[i]), 10, 64)
			switch f.Name {
			case "xact_count":
				xacts = n
			case "query_count":
				queries = n
			case "wait_time":
				waitUS = n
			}
		}
	}
	if got := value(series(fams, "poolsim_proxy_transactions_total", pool)); got != float64(xacts) || xacts < 2 {
		t.Errorf("transactions_total = %v, console xact_count = %d (want equal, at least 2)", got, xacts)
	}
	if got := value(series(fams, "poolsim_proxy_queries_total", pool)); got != float64(queries) {
		t.Errorf("queries_total = %v, console query_count = %d", got, queries)
	}
	if got := value(series(fams, "poolsim_proxy_client_wait_seconds_total", pool)); math.Abs(got-float64(waitUS)/1e6) > 1e-6 || got < 0.25 {
		t.Errorf("client_wait_seconds_total = %v, console wait_time = %d us (want equal, at least 0.25 s)", got, waitUS)
	}
	wait := series(fams, "poolsim_proxy_client_wait_seconds", pool)
	xact := series(fams, "poolsim_proxy_transaction_seconds", pool)
	query := series(fams, "poolsim_proxy_query_seconds", pool)
	if wait == nil || xact == nil || query == nil || wait.Histogram == nil || xact.Histogram == nil || query.Histogram == nil {
		t.Fatalf("histograms missing: wait %v, transaction %v, query %v", wait, xact, query)
	}
	assignments := value(series(fams, "poolsim_proxy_server_assignments_total", pool))
	if h := wait.Histogram; float64(h.GetSampleCount()) != assignments || bucket(h, 0.25) != h.GetSampleCount()-1 {
		t.Errorf("client wait histogram: %d observations (%d at most 250 ms) for %v assignments; want one per assignment, one above 250 ms",
			h.GetSampleCount(), bucket(h, 0.25), assignments)
	}
	if h := xact.Histogram; float64(h.GetSampleCount()) != float64(xacts) || bucket(h, 0.25) != h.GetSampleCount()-1 || h.GetSampleSum() < 0.3 {
		t.Errorf("transaction histogram: %d observations (%d at most 250 ms), sum %v s; want %d, one above 250 ms, sum at least 0.3 s",
			h.GetSampleCount(), bucket(h, 0.25), h.GetSampleSum(), xacts)
	}
	if h := query.Histogram; float64(h.GetSampleCount()) != float64(queries) {
		t.Errorf("query histogram: %d observations, want %d (queries_total)", h.GetSampleCount(), queries)
	}
	if got := value(series(fams, "poolsim_proxy_database_pool_size", map[string]string{"database": "poolsim"})); got != 1 {
		t.Errorf("database_pool_size = %v, want 1", got)
	}
	if got := value(series(fams, "poolsim_proxy_list_items", map[string]string{"list": "used_clients"})); !(got >= 2) {
		t.Errorf("list_items{list=used_clients} = %v, want at least the 2 clients (and the console)", got)
	}
	if got := value(series(fams, "poolsim_proxy_scrape_errors", nil)); got != 0 {
		t.Errorf("scrape_errors = %v", got)
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Errorf("the Go and process collectors are missing")
	}
}
