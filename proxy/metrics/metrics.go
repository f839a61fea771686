package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// Source is what the collector reads: a running pooler.Proxy.
type Source interface {
	Stats() []pooler.PoolStats
	Show(view string) (columns []string, rows [][]any, err error)
}

const ns = "poolsim_proxy"

// column is a numeric console column exported as a gauge.
type column struct{ col, name, help string }

// view maps one console view to gauges: labels are the console columns
// that identify a row, by the label name each becomes.
type view struct {
	name   string
	labels [][2]string // console column, label
	gauges []column
}

var views = []view{
	{name: "POOLS", labels: [][2]string{{"database", "database"}, {"user", "user"}, {"pool_mode", "pool_mode"}},
		gauges: []column{
			{"cl_active", "pool_client_active_connections", "Clients linked to a server or idle, not waiting (SHOW POOLS cl_active)."},
			{"cl_waiting", "pool_client_waiting_connections", "Clients waiting for a server (SHOW POOLS cl_waiting)."},
			{"sv_active", "pool_server_active_connections", "Servers linked to a client (SHOW POOLS sv_active)."},
			{"sv_idle", "pool_server_idle_connections", "Servers idle and ready (SHOW POOLS sv_idle)."},
			{"sv_used", "pool_server_used_connections", "Servers idle and to be checked before use (SHOW POOLS sv_used)."},
			{"sv_tested", "pool_server_tested_connections", "Servers running server_reset_query (SHOW POOLS sv_tested)."},
			{"sv_login", "pool_server_login_connections", "Servers logging in (SHOW POOLS sv_login)."},
		}},
	{name: "DATABASES", labels: [][2]string{{"name", "database"}},
		gauges: []column{
			{"pool_size", "database_pool_size", "Server connections per pool of the database (SHOW DATABASES pool_size)."},
			{"reserve_pool", "database_reserve_pool", "Extra servers allowed per pool (SHOW DATABASES reserve_pool)."},
			{"max_connections", "database_max_connections", "max_db_connections of the database, 0 = unlimited (SHOW DATABASES max_connections)."},
			{"current_connections", "database_current_connections", "Server connections of the database (SHOW DATABASES current_connections)."},
			{"paused", "database_paused", "1 if the database is paused (SHOW DATABASES paused)."},
			{"disabled", "database_disabled", "1 if the database is disabled (SHOW DATABASES disabled)."},
		}},
}

// collector reads a Source at each scrape. It is unchecked: the series
// depend on the pools that exist at the time.
type collector struct {
	src Source
}

// NewCollector returns a prometheus.Collector for src.
func NewCollector(src Source) prometheus.Collector { return &collector{src: src} }

func (c *collector) Describe(chan<- *prometheus.Desc) {}

var (
	poolLabels = []string{"database", "user"}
	maxWait    = prometheus.NewDesc(ns+"_pool_client_maxwait_seconds",
		"How long the oldest waiting client has waited (SHOW POOLS maxwait, maxwait_us).", []string{"database", "user", "pool_mode"}, nil)
	listItems = prometheus.NewDesc(ns+"_list_items", "Items per list (SHOW LISTS).", []string{"list"}, nil)
	counts    = []struct {
		desc *prometheus.Desc
		get  func(c *pooler.Counters) float64
	}{
		{counter("transactions_total", "Transactions completed (SHOW STATS total_xact_count, per pool)."), func(c *pooler.Counters) float64 { return float64(c.Xacts) }},
		{counter("queries_total", "Requests answered: each Query, Sync or FunctionCall (SHOW STATS total_query_count, per pool)."), func(c *pooler.Counters) float64 { return float64(c.Queries) }},
		{counter("received_bytes_total", "Bytes clients sent to servers (SHOW STATS total_received)."), func(c *pooler.Counters) float64 { return float64(c.Received) }},
		{counter("sent_bytes_total", "Bytes servers sent to clients (SHOW STATS total_sent)."), func(c *pooler.Counters) float64 { return float64(c.Sent) }},
		{counter("transaction_seconds_total", "Time spent in transactions (SHOW STATS total_xact_time)."), func(c *pooler.Counters) float64 { return c.XactTime.Seconds() }},
		{counter("query_seconds_total", "Time spent in requests (SHOW STATS total_query_time)."), func(c *pooler.Counters) float64 { return c.QueryTime.Seconds() }},
		{counter("client_wait_seconds_total", "Time clients waited for a server (SHOW STATS total_wait_time)."), func(c *pooler.Counters) float64 { return c.WaitTime.Seconds() }},
		{counter("server_assignments_total", "Times a client was linked to a server."), func(c *pooler.Counters) float64 { return float64(c.ServerAssignments) }},
		{counter("client_logins_total", "Client logins."), func(c *pooler.Counters) float64 { return float64(c.Logins) }},
		{counter("client_parses_total", "Named Parse messages from clients, while prepared statements are tracked (PgBouncer 1.21's total_client_parse_count)."), func(c *pooler.Counters) float64 { return float64(c.ClientParses) }},
		{counter("server_parses_total", "Parse messages sent to servers for named statements (PgBouncer 1.21's total_server_parse_count)."), func(c *pooler.Counters) float64 { return float64(c.ServerParses) }},
		{counter("binds_total", "Bind messages of named statements (PgBouncer 1.21's total_bind_count)."), func(c *pooler.Counters) float64 { return float64(c.Binds) }},
	}
	hists = []struct {
		desc *prometheus.Desc
		get  func(s *pooler.PoolStats) *pooler.Histogram
	}{
		{prometheus.NewDesc(ns+"_client_wait_seconds", "Client waits for a server, from the request reaching the proxy to a server linked; one per assignment (0 when a server was idle).", poolLabels, nil),
			func(s *pooler.PoolStats) *pooler.Histogram { return &s.Wait }},
		{prometheus.NewDesc(ns+"_transaction_seconds", "Transaction times, from the first message to the ReadyForQuery that ends the transaction.", poolLabels, nil),
			func(s *pooler.PoolStats) *pooler.Histogram { return &s.Xact }},
		{prometheus.NewDesc(ns+"_query_seconds", "Request times, from the request to its ReadyForQuery.", poolLabels, nil),
			func(s *pooler.PoolStats) *pooler.Histogram { return &s.Query }},
	}
	bounds = func() []float64 {
		out := make([]float64, len(pooler.HistogramBounds))
		for i, d := range pooler.HistogramBounds {
			out[i] = d.Seconds()
		}
		return out
	}()
	viewDescs = func() map[string]*prometheus.Desc {
		out := map[string]*prometheus.Desc{}
		for _, v := range views {
			var labels []string
			for _, l := range v.labels {
				labels = append(labels, l[1])
			}
			for _, g := range v.gauges {
				out[v.name+"."+g.col] = prometheus.NewDesc(ns+"_"+g.name, g.help, labels, nil)
			}
		}
		return out
	}()
	scrapeErrors = prometheus.NewDesc(ns+"_scrape_errors", "Console views that could not be read at this scrape.", nil, nil)
)

func counter(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(ns+"_"+name, help, poolLabels, nil)
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	failed := 0
	for _, v := range views {
		if err := c.collectView(ch, v); err != nil {
			failed++
		}
	}
	if cols, rows, err := c.src.Show("LISTS"); err == nil && len(cols) == 2 {
		for _, r := range rows {
			if n, ok := number(r[1]); ok {
				ch <- prometheus.MustNewConstMetric(listItems, prometheus.GaugeValue, n, text(r[0]))
			}
		}
	} else {
		failed++
	}
	for _, s := range c.src.Stats() {
		for _, k := range counts {
			ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, k.get(&s.Counters), s.Database, s.User)
		}
		for _, h := range hists {
			hv := h.get(&s)
			buckets := make(map[float64]uint64, len(bounds))
			for i, b := range bounds {
				buckets[b] = hv.Buckets[i]
			}
			ch <- prometheus.MustNewConstHistogram(h.desc, hv.Count, hv.Sum.Seconds(), buckets, s.Database, s.User)
		}
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrors, prometheus.GaugeValue, float64(failed))
}

// collectView reads one console view and sends its gauges.
func (c *collector) collectView(ch chan<- prometheus.Metric, v view) error {
	cols, rows, err := c.src.Show(v.name)
	if err != nil {
		return err
	}
	idx := map[string]int{}
	for i, n := range cols {
		idx[n] = i
	}
	for _, r := range rows {
		var labels []string
		for _, l := range v.labels {
			labels = append(labels, text(r[idx[l[0]]]))
		}
		for _, g := range v.gauges {
			i, ok := idx[g.col]
			if !ok {
				return fmt.Errorf("SHOW %s: no column %s", v.name, g.col)
			}
			if n, ok := number(r[i]); ok {
				ch <- prometheus.MustNewConstMetric(viewDescs[v.name+"."+g.col], prometheus.GaugeValue, n, labels...)
			}
		}
		if v.name == "POOLS" {
			s, _ := number(r[idx["maxwait"]])
			us, _ := number(r[idx["maxwait_us"]])
			ch <- prometheus.MustNewConstMetric(maxWait, prometheus.GaugeValue, s+us/1e6, labels...)
		}
	}
	return nil
}

// number reads a numeric console cell; false for text and NULL.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// text reads a console cell as a label value ("" for NULL).
func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	case []byte:
		return string(x)
	}
	if n, ok := number(v); ok {
		return strconv.FormatFloat(n, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Handler serves the proxy's metrics, with the Go runtime's and the
// process's, in Prometheus' text format.
func Handler(src Source) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, Timeout: 10 * time.Second})
}

// Serve serves /metrics on ln until ctx is done, then closes the server
// and returns once it has stopped.
func Serve(ctx context.Context, ln net.Listener, src Source) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", Handler(src))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: serve: %w", err)
	}
	return nil
}
