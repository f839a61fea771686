package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// column is one column of the table: its heading, when the table shows it
// (nil: always), and its cell.
type column struct {
	head string
	show func(c *system.Config) bool // shown when it holds for any row
	cell func(r *scenarios.Row) string
}

// metric is a column of one metric with its decimals; with replications
// the cell is "estimate ± half-width" (a mean, or a pooled percentile).
func metric(head, name string, decimals int, show func(c *system.Config) bool) column {
	f, ok := system.FieldByName(name)
	if !ok {
		panic("report: no metric " + name)
	}
	return column{head: head, show: show, cell: func(r *scenarios.Row) string { return Cell(r, f, decimals) }}
}

// Cell is metric f of row r as the table shows it: a count of one run as
// an integer, else the value with decimals places; with replications the
// study's estimate ± the half-width of its 95 % confidence interval (a
// mean, or for a percentile the percentile of the replications' samples
// together: system.Replicated.Stat; a count's mean with one decimal at
// least).
func Cell(r *scenarios.Row, f system.Field, decimals int) string {
	mean, half := r.Stat(f)
	if len(r.Reps) <= 1 {
		if f.Count {
			return strconv.FormatInt(int64(mean), 10)
		}
		return strconv.FormatFloat(mean, 'f', decimals, 64)
	}
	if half == 0 { // every replication gave the same figure
		if f.Count {
			return strconv.FormatInt(int64(mean), 10)
		}
		return strconv.FormatFloat(mean, 'f', decimals, 64)
	}
	if f.Count {
		decimals = max(decimals, 1)
	}
	return strconv.FormatFloat(mean, 'f', decimals, 64) + " ± " + strconv.FormatFloat(half, 'f', decimals, 64)
}

// The show functions look at every class of a configuration.
func anyClass(c *system.Config, f func(w system.Workload, a system.AppPool) bool) bool {
	for _, cl := range c.ClassList() {
		if f(cl.Workload, cl.AppPool) {
			return true
		}
	}
	return false
}
func usesAppPool(c *system.Config) bool {
	return anyClass(c, func(_ system.Workload, a system.AppPool) bool { return a.Mode != system.NoAppPool })
}
func usesNullPool(c *system.Config) bool {
	return anyClass(c, func(_ system.Workload, a system.AppPool) bool { return a.Mode == system.NullPool })
}
func usesCPU(c *system.Config) bool     { return c.Server.Cores > 0 }
func isOpen(c *system.Config) bool      { return c.Open() }
func hasRequests(c *system.Config) bool { return c.RequestLevel() }
func usesFleet(c *system.Config) bool {
	p := c.Pooler
	return p.Processes > 1 || p.CPUPerMsg > 0 || p.Wakeup > 0
}
func usesPrepared(c *system.Config) bool {
	return anyClass(c, func(w system.Workload, _ system.AppPool) bool {
		return w.PrepareThreshold > 0 || w.Statements > 1 || w.Parse.MeanValue() > 0
	})
}

// columns are the table's metric columns, after mode, load and the swept
// keys, in order.
var columns = []column{
	metric("ok_txns", "ok_txns", 0, nil),
	metric("conn_refused", "conn_refused", 0, nil),
	metric("timeouts", "wait_timeouts", 0, nil),
	metric("wall_ms", "wall_ms", 3, nil),
	metric("warmup_ms", "warmup_ms", 1, isOpen),
	metric("tps", "tps", 1, nil),
	metric("tps_steady", "tps_steady", 1, nil),
	metric("p50_ms", "p50_ms", 2, nil),
	metric("p99_ms", "p99_ms", 2, nil),
	metric("req_tps", "req_tps", 1, hasRequests),
	metric("req_p50_ms", "req_p50_ms", 2, hasRequests),
	metric("req_p99_ms", "req_p99_ms", 2, hasRequests),
	metric("wait_p99_ms", "wait_p99_ms", 2, nil),
	metric("hop_ms/txn", "hop_ms_per_txn", 2, nil),
	metric("busy", "server_busy", 2, nil),
	metric("app_timeouts", "app_timeouts", 0, usesAppPool),
	metric("app_wait_p99_ms", "app_wait_p99_ms", 2, usesAppPool),
	metric("conns_opened", "conns_opened", 0, usesNullPool),
	metric("time_wait", "time_wait_end", 0, usesNullPool),
	metric("cpu_util", "cpu_util", 2, usesCPU),
	metric("cpu_queue_p99_ms", "cpu_queue_txn_p99_ms", 2, usesCPU),
	metric("pooler_cpu_max", "pooler_cpu_max", 2, usesFleet),
	metric("imbalance", "proc_imbalance", 2, usesFleet),
	metric("budget_over", "budget_over_max_connections", 0, usesFleet),
	metric("cancels_lost", "cancels_lost", 0, usesFleet),
	metric("prepared_errors", "prepared_error_txns", 0, usesPrepared),
	metric("hit_rate", "prepared_hit_rate", 2, usesPrepared),
	metric("parses/s", "server_parses_per_s", 1, usesPrepared),
}

// fixedKeys are the swept keys the table always shows in its first columns.
var fixedKeys = map[string]bool{"pooler.mode": true, "workload.clients": true, "workload.arrival_rate": true}

// Heading is the table's first line: the scenario, its seed and what the
// figures are.
func Heading(r Report) string {
	s := fmt.Sprintf("%s (seed %d", r.Scenario, r.Seed)
	reps, det := 0, 0
	for i := range r.Rows {
		reps = max(reps, len(r.Rows[i].Reps))
		if r.Rows[i].Deterministic {
			det++
		}
	}
	switch {
	case reps > 1 && det > 0:
		s += fmt.Sprintf("; up to %d replications per row, means and pooled percentiles ± 95%% CI; %d deterministic rows ran once, exact", reps, det)
	case reps > 1:
		same := true
		for i := range r.Rows {
			same = same && len(r.Rows[i].Reps) == reps
		}
		switch {
		case r.Study.Precision > 0 && same:
			s += fmt.Sprintf("; %d replications per row to know tps and p99 within %g%%, means and pooled percentiles ± 95%% CI", reps, r.Study.Precision*100)
		case r.Study.Precision > 0:
			s += fmt.Sprintf("; up to %d replications per row to know tps and p99 within %g%%, means and pooled percentiles ± 95%% CI", reps, r.Study.Precision*100)
		default:
			s += fmt.Sprintf("; %d replications per row, means and pooled percentiles ± 95%% CI", reps)
		}
	case det == len(r.Rows) && len(r.Rows) > 0 && (r.Study.Replications > 1 || r.Study.Precision > 0):
		s += "; deterministic: every draw is constant, so one run is exact"
	}
	return s + ")"
}

// WriteTable writes the rows as an aligned table, then the session-feature
// matrix of each mode.
func WriteTable(w io.Writer, r Report) error {
	fmt.Fprintln(w, Heading(r))
	if r.Missing > 0 {
		fmt.Fprintln(w, r.incompleteWords())
	}
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n", r.Description)
	}
	fmt.Fprintln(w)
	var extra []string
	if len(r.Rows) > 0 {
		for _, p := range r.Rows[0].Params {
			if !fixedKeys[p.Key] {
				extra = append(extra, p.Key)
			}
		}
	}
	loadHead := "clients"
	for i := range r.Rows {
		if r.Rows[i].Config.Open() {
			loadHead = "load" // arrivals per second
		}
	}
	var shown []column
	for _, c := range columns {
		if c.show == nil || anyRow(r.Rows, c.show) {
			shown = append(shown, c)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	classes := r.hasClasses()
	head := []string{"mode", loadHead}
	if classes {
		head = []string{"class", "mode", loadHead}
	}
	head = append(head, extra...)
	for _, c := range shown {
		head = append(head, c.head)
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	var modes []system.Config
	seen := map[[2]int]bool{}
	line := func(x, point *scenarios.Row, class string) {
		c := x.Config
		load := strconv.Itoa(c.Workload.Clients)
		if class == "all" {
			load = ""
			n := 0
			for _, cl := range c.Classes {
				n += cl.Workload.Clients
			}
			if n > 0 {
				load = strconv.Itoa(n)
			}
		}
		if c.Workload.Open() && class != "all" {
			load = strconv.FormatFloat(c.Workload.ArrivalRate, 'g', 6, 64) + "/s"
		}
		if class == "all" && c.Open() {
			var sum float64
			for _, cl := range c.ClassList() {
				sum += cl.Workload.ArrivalRate
			}
			load = strconv.FormatFloat(sum, 'g', 6, 64) + "/s"
		}
		mode := c.Pooler.PoolMode.String()
		if class == "all" {
			var ms []string
			for _, m := range c.PoolModes() {
				ms = append(ms, m.String())
			}
			mode = strings.Join(ms, "+")
		}
		cells := []string{mode, load}
		if classes {
			cells = append([]string{class}, cells...)
		}
		for _, k := range extra {
			for _, p := range point.Params {
				if p.Key == k {
					cells = append(cells, p.Value)
				}
			}
		}
		for _, col := range shown {
			cells = append(cells, col.cell(x))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		key := [2]int{int(c.Pooler.PoolMode), min(c.Pooler.MaxPreparedStatements, 1)}
		if class != "all" && !seen[key] {
			seen[key] = true
			modes = append(modes, c)
		}
	}
	for i := range r.Rows {
		x := &r.Rows[i]
		if !classes {
			line(x, x, "")
			continue
		}
		line(x, x, "all")
		for k := range x.Classes {
			line(classRow(x, k), x, x.Classes[k].Name)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if writeNotes(w, r.Rows) {
		fmt.Fprintln(w)
	}
	if len(modes) == 0 {
		return nil
	}
	return writeCompat(w, modes)
}

// writeNotes writes each row's study notes, the row named by its swept
// keys when there are several; it reports whether it wrote any.
func writeNotes(w io.Writer, rows []scenarios.Row) bool {
	wrote := false
	for i := range rows {
		for _, n := range rows[i].Notes {
			var at []string
			if len(rows) > 1 {
				for _, p := range rows[i].Params {
					at = append(at, p.Key+"="+p.Value)
				}
			}
			if len(at) > 0 {
				fmt.Fprintf(w, "note (%s): %s\n", strings.Join(at, " "), n)
			} else {
				fmt.Fprintf(w, "note: %s\n", n)
			}
			wrote = true
		}
	}
	return wrote
}

func anyRow(rows []scenarios.Row, f func(c *system.Config) bool) bool {
	for i := range rows {
		if f(&rows[i].Config) {
			return true
		}
	}
	return false
}

// writeCompat writes the session-feature matrix of each mode shown.
func writeCompat(w io.Writer, modes []system.Config) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"compat"}
	for _, f := range compat.Features {
		head = append(head, f.String())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, c := range modes {
		name := c.Pooler.PoolMode.String()
		if c.Pooler.PoolMode == poolmode.Transaction || c.Pooler.PoolMode == poolmode.Statement {
			name += fmt.Sprintf(" (max_prepared_statements=%d)", c.Pooler.MaxPreparedStatements)
		}
		cells := []string{name}
		x := compat.For(c.Pooler.PoolMode, c.Pooler.MaxPreparedStatements)
		for _, f := range compat.Features {
			cells = append(cells, compat.Word(x[f]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
