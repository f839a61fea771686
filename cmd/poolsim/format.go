package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// formats are the output formats of run-like commands.
var formats = []string{"table", "json", "csv"}

func checkFormat(f string) error {
	for _, ok := range formats {
		if f == ok {
			return nil
		}
	}
	return usagef("--format %q: want table, json or csv", f)
}

// report is what run prints.
type report struct {
	Scenario    string
	Description string
	Seed        uint64
	Rows        []scenarios.Row
}

func writeReport(w io.Writer, format string, r report) error {
	switch format {
	case "json":
		return writeJSON(w, r)
	case "csv":
		return writeCSV(w, r)
	default:
		return writeTable(w, r)
	}
}

// params is a row's swept keys as a JSON object in sweep order.
type params []scenarios.Param

func (p params) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, kv := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv.Key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(jsonValue(kv.Value))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonValue writes a parameter as a JSON number when it is one, else as a
// string.
func jsonValue(s string) []byte {
	if _, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXpP_") {
		if b, err := json.Marshal(json.Number(s)); err == nil {
			return b
		}
	}
	b, _ := json.Marshal(s)
	return b
}

func writeJSON(w io.Writer, r report) error {
	type row struct {
		Params  params         `json:"params"`
		Metrics system.Metrics `json:"metrics"`
		Compat  compat.Matrix  `json:"compat"`
	}
	out := struct {
		Scenario string `json:"scenario"`
		Seed     uint64 `json:"seed"`
		Rows     []row  `json:"rows"`
	}{Scenario: r.Scenario, Seed: r.Seed, Rows: make([]row, len(r.Rows))}
	for i, x := range r.Rows {
		out.Rows[i] = row{params(x.Params), x.Metrics, x.Compat}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// metricFields are the Metrics fields in declaration order: JSON name and
// value getter.
func metricFields(m *system.Metrics) (names []string, values []string) {
	v := reflect.ValueOf(m).Elem()
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
		switch f := v.Field(i); f.Kind() {
		case reflect.Float64:
			values = append(values, strconv.FormatFloat(f.Float(), 'g', -1, 64))
		default:
			values = append(values, strconv.FormatInt(f.Int(), 10))
		}
	}
	return names, values
}

func writeCSV(w io.Writer, r report) error {
	cw := csv.NewWriter(w)
	for i, x := range r.Rows {
		names, values := metricFields(&x.Metrics)
		if i == 0 {
			var head []string
			for _, p := range x.Params {
				head = append(head, p.Key)
			}
			head = append(head, names...)
			for _, f := range compat.Features {
				head = append(head, "compat_"+f.String())
			}
			if err := cw.Write(head); err != nil {
				return err
			}
		}
		var rec []string
		for _, p := range x.Params {
			rec = append(rec, p.Value)
		}
		rec = append(rec, values...)
		for _, f := range compat.Features {
			rec = append(rec, compat.Word(x.Compat[f]))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func writeTable(w io.Writer, r report) error {
	fmt.Fprintf(w, "%s (seed %d)\n", r.Scenario, r.Seed)
	if r.Description != "" {
		fmt.Fprintf(w, "%s\n", r.Description)
	}
	fmt.Fprintln(w)
	// mode and the load are always shown; other swept keys after them.
	var extra []string
	if len(r.Rows) > 0 {
		for _, p := range r.Rows[0].Params {
			switch p.Key {
			case "pooler.mode", "workload.clients", "workload.arrival_rate":
			default:
				extra = append(extra, p.Key)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	loadHead := "clients"
	for _, x := range r.Rows {
		if x.Config.Workload.Open() {
			loadHead = "load" // arrivals per second
		}
	}
	head := []string{"mode", loadHead}
	for _, k := range extra {
		head = append(head, k)
	}
	head = append(head, "ok_txns", "conn_refused", "timeouts", "wall_ms", "tps", "p50_ms", "p99_ms", "wait_p99_ms", "hop_ms/txn", "util")
	// Columns for the parts of the model a scenario uses.
	var app, null, cpu, fleet, prepared bool
	for _, x := range r.Rows {
		app = app || x.Config.AppPool.Mode != system.NoAppPool
		null = null || x.Config.AppPool.Mode == system.NullPool
		cpu = cpu || x.Config.Server.Cores > 0
		p := x.Config.Pooler
		fleet = fleet || p.Processes > 1 || p.CPUPerMsg > 0 || p.Wakeup > 0
		w := x.Config.Workload
		prepared = prepared || w.PrepareThreshold > 0 || w.Statements > 1 || w.Parse.MeanValue() > 0
	}
	if app {
		head = append(head, "app_timeouts", "app_wait_p99_ms")
	}
	if null {
		head = append(head, "conns_opened", "time_wait")
	}
	if cpu {
		head = append(head, "cpu_util", "cpu_queue_p99_ms")
	}
	if fleet {
		head = append(head, "pooler_cpu_max", "imbalance", "budget_over", "cancels_lost")
	}
	if prepared {
		head = append(head, "prepared_errors", "hit_rate", "parses/s")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	var modes []system.Config
	seen := map[[2]int]bool{}
	for _, x := range r.Rows {
		c := x.Config
		load := strconv.Itoa(c.Workload.Clients)
		if c.Workload.Open() {
			load = strconv.FormatFloat(c.Workload.ArrivalRate, 'g', 6, 64) + "/s"
		}
		cells := []string{c.Pooler.Mode.String(), load}
		for _, k := range extra {
			for _, p := range x.Params {
				if p.Key == k {
					cells = append(cells, p.Value)
				}
			}
		}
		m := x.Metrics
		cells = append(cells,
			strconv.FormatInt(m.OKTxns, 10), strconv.FormatInt(m.ConnRefused, 10), strconv.FormatInt(m.WaitTimeouts, 10),
			f3(m.WallMs), f1(m.TPS), f2(m.P50Ms), f2(m.P99Ms), f2(m.WaitP99Ms), f2(m.HopMsPerTxn), f2(m.ServerUtil))
		if app {
			cells = append(cells, strconv.FormatInt(m.AppTimeouts, 10), f2(m.AppWaitP99Ms))
		}
		if null {
			cells = append(cells, strconv.FormatInt(m.ConnsOpened, 10), strconv.FormatInt(m.TimeWaitEnd, 10))
		}
		if cpu {
			cells = append(cells, f2(m.CPUUtil), f2(m.DecCPUQueueP99Ms))
		}
		if fleet {
			cells = append(cells, f2(m.PoolerCPUMax), f2(m.ProcImbalance), strconv.FormatInt(m.BudgetOver, 10), strconv.FormatInt(m.CancelsLost, 10))
		}
		if prepared {
			cells = append(cells, strconv.FormatInt(m.PreparedErrorTxns, 10), f2(m.PreparedHitRate), f1(m.ServerParsesPerS))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
		key := [2]int{int(c.Pooler.Mode), min(c.Pooler.MaxPreparedStatements, 1)}
		if !seen[key] {
			seen[key] = true
			modes = append(modes, c)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head = []string{"compat"}
	for _, f := range compat.Features {
		head = append(head, f.String())
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, c := range modes {
		name := c.Pooler.Mode.String()
		if c.Pooler.Mode == poolmode.Transaction || c.Pooler.Mode == poolmode.Statement {
			name += fmt.Sprintf(" (max_prepared_statements=%d)", c.Pooler.MaxPreparedStatements)
		}
		cells := []string{name}
		x := compat.For(c.Pooler.Mode, c.Pooler.MaxPreparedStatements)
		for _, f := range compat.Features {
			cells = append(cells, compat.Word(x[f]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
