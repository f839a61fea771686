package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/plot"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "merge", short: "join 'sweep --shard' outputs into the unsharded output", run: runMerge})
}

const mergeHelp = `Usage: poolsim merge SHARD-FILE... [--plot out.png|out.svg]

Joins the outputs of 'poolsim sweep ... --shard i/n' (all n of them, in any
order) and prints exactly the bytes the same sweep prints without --shard,
in the shards' format: JSON shards give the JSON report, CSV shards the CSV.
The shards must come from the same sweep (scenario, seed, --set and --vary
values: each shard carries a fingerprint of its sweep), each shard once.
--plot draws the merged sweep as 'poolsim sweep --plot' does (the x axis is
logarithmic when the values look log-spaced).

Examples:
  for i in 1 2 3 4; do
    poolsim sweep pgbouncer-modes --vary workload.clients=1..250 --shard $i/4 > part$i.json
  done
  poolsim merge part*.json > sweep.json
  poolsim merge part*.csv --plot sweep.png > sweep.csv

Exit status: 0 success, 1 failure (a file cannot be read), 2 usage error
(not a shard file, shards of different sweeps, a shard missing or given twice).
`

func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("merge", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	plotPath := fs.String("plot", "", "also draw the merged sweep into this .png or .svg file")
	fs.Usage = func() { fmt.Fprint(stderr, mergeHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := plot.CheckPath(*plotPath); err != nil {
			return usage(err)
		}
	}
	if fs.NArg() == 0 {
		return usagef("want the shard files to merge, e.g. poolsim merge part*.json; see 'poolsim merge --help'")
	}
	var shards []*shardFile
	for _, name := range fs.Args() {
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		s, err := readShard(name, data)
		if err != nil {
			return err
		}
		shards = append(shards, s)
	}
	if err := checkShards(shards); err != nil {
		return err
	}
	first := shards[0]
	var rows []shardRow
	for _, s := range shards {
		rows = append(rows, s.rows...)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].point < rows[j].point })
	if first.format == "csv" {
		if err := mergeCSV(stdout, shards, rows); err != nil {
			return err
		}
	} else {
		out := make([]scenarios.Row, len(rows))
		for i, r := range rows {
			out[i] = r.row
		}
		if err := writeReport(stdout, "json", report{Scenario: first.meta.Scenario, Seed: first.meta.Seed, Rows: out}); err != nil {
			return err
		}
	}
	if *plotPath == "" {
		return nil
	}
	out := make([]scenarios.Row, len(rows))
	for i, r := range rows {
		out[i] = r.row
		if first.format == "csv" {
			row, err := csvRow(shardHeader(shards), r.rec)
			if err != nil {
				return fmt.Errorf("--plot: point %d: %v", r.point, err)
			}
			out[i] = row
		}
	}
	in := plot.Input{Title: fmt.Sprintf("%s (seed %d)", first.meta.Scenario, first.meta.Seed), Rows: out}
	if err := plot.Write(*plotPath, in); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// shardHeader is the CSV header of the shards (empty shards have none).
func shardHeader(shards []*shardFile) []string {
	for _, s := range shards {
		if s.header != nil {
			return s.header
		}
	}
	return nil
}

// csvRow reads a CSV record of run's columns back into a row's params and
// metrics (for plotting merged CSV shards).
func csvRow(header, rec []string) (scenarios.Row, error) {
	var row scenarios.Row
	names, _ := metricFields(&system.Metrics{})
	nParams := len(header) - len(names) - len(compat.Features)
	if nParams < 0 || len(rec) != len(header) {
		return row, fmt.Errorf("unexpected CSV columns")
	}
	for i := range nParams {
		row.Params = append(row.Params, scenarios.Param{Key: header[i], Value: rec[i]})
	}
	v := reflect.ValueOf(&row.Metrics).Elem()
	byName := map[string]int{}
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		byName[name] = i
	}
	for k, name := range header[nParams : nParams+len(names)] {
		i, ok := byName[name]
		if !ok {
			return row, fmt.Errorf("unknown column %q", name)
		}
		text := rec[nParams+k]
		switch f := v.Field(i); f.Kind() {
		case reflect.Float64:
			x, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return row, fmt.Errorf("%s: %v", name, err)
			}
			f.SetFloat(x)
		case reflect.Int, reflect.Int64, reflect.Int32:
			x, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return row, fmt.Errorf("%s: %v", name, err)
			}
			f.SetInt(x)
		}
	}
	return row, nil
}

// shardFile is one parsed shard.
type shardFile struct {
	name   string
	format string // json or csv
	meta   shardMeta
	rows   []shardRow
	header []string // csv: the header without the point column
}

type shardRow struct {
	point int
	row   scenarios.Row // json shards
	rec   []string      // csv shards: the record without the point column
}

func readShard(name string, data []byte) (*shardFile, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	notShard := usagef("%s: not a shard file (make one with 'poolsim sweep ... --shard i/n --format json|csv')", name)
	switch {
	case bytes.HasPrefix(trimmed, []byte("{")):
		var sj shardJSON
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sj); err != nil || sj.Format != shardFormat {
			return nil, notShard
		}
		s := &shardFile{name: name, format: "json", meta: sj.Shard}
		for _, r := range sj.Rows {
			row := scenarios.Row{Params: r.Params}
			mdec := json.NewDecoder(bytes.NewReader(r.Metrics))
			mdec.DisallowUnknownFields()
			if err := mdec.Decode(&row.Metrics); err != nil {
				return nil, usagef("%s: point %d: metrics: %v (a shard from another poolsim version?)", name, r.Point, err)
			}
			m, err := decodeCompat(r.Compat)
			if err != nil {
				return nil, usagef("%s: point %d: compat: %v", name, r.Point, err)
			}
			row.Compat = m
			s.rows = append(s.rows, shardRow{point: r.Point, row: row})
		}
		return s, nil
	case bytes.HasPrefix(trimmed, []byte("# "+shardFormat+" ")):
		line, rest, _ := bytes.Cut(trimmed, []byte("\n"))
		s := &shardFile{name: name, format: "csv"}
		if err := json.Unmarshal(bytes.TrimPrefix(line, []byte("# "+shardFormat+" ")), &s.meta); err != nil {
			return nil, notShard
		}
		recs, err := csv.NewReader(bufio.NewReader(bytes.NewReader(rest))).ReadAll()
		if err != nil {
			return nil, usagef("%s: %v", name, err)
		}
		for i, r := range recs {
			if i == 0 {
				if len(r) < 2 || r[0] != "point" {
					return nil, notShard
				}
				s.header = r[1:]
				continue
			}
			p, err := strconv.Atoi(r[0])
			if err != nil {
				return nil, usagef("%s: line %d: point %q is not a number", name, i+2, r[0])
			}
			s.rows = append(s.rows, shardRow{point: p, rec: r[1:]})
		}
		return s, nil
	}
	return nil, notShard
}

func decodeCompat(raw json.RawMessage) (compat.Matrix, error) {
	var words map[string]string
	var m compat.Matrix
	if err := json.Unmarshal(raw, &words); err != nil {
		return m, err
	}
	if len(words) != len(compat.Features) {
		return m, fmt.Errorf("want the %d features, got %d", len(compat.Features), len(words))
	}
	for k, v := range words {
		f, err := compat.ParseFeature(k)
		if err != nil {
			return m, err
		}
		switch v {
		case "ok":
			m[f] = true
		case "broken":
		default:
			return m, fmt.Errorf("%s: want ok or broken, got %q", k, v)
		}
	}
	return m, nil
}

// checkShards verifies that the files are the n shards of one sweep, each
// once, each complete.
func checkShards(shards []*shardFile) error {
	first := shards[0]
	byIndex := map[int]string{}
	for _, s := range shards {
		m := s.meta
		if s.format != first.format {
			return usagef("%s is a %s shard and %s a %s shard: merge shards of one format", first.name, first.format, s.name, s.format)
		}
		if m.Scenario != first.meta.Scenario || m.Seed != first.meta.Seed || m.Sweep != first.meta.Sweep || m.Points != first.meta.Points {
			return usagef("%s and %s come from different sweeps (%s seed %d, %d points, sweep %s vs %s seed %d, %d points, sweep %s)",
				first.name, s.name, first.meta.Scenario, first.meta.Seed, first.meta.Points, first.meta.Sweep, m.Scenario, m.Seed, m.Points, m.Sweep)
		}
		if m.Count != first.meta.Count {
			return usagef("%s is shard %d/%d but %s is shard %d/%d: all shards must split the sweep the same way", first.name, first.meta.Index, first.meta.Count, s.name, m.Index, m.Count)
		}
		if m.Count < 1 || m.Index < 1 || m.Index > m.Count {
			return usagef("%s: shard %d/%d is not a shard", s.name, m.Index, m.Count)
		}
		if prev, dup := byIndex[m.Index]; dup {
			return usagef("shard %d/%d given twice: %s and %s", m.Index, m.Count, prev, s.name)
		}
		byIndex[m.Index] = s.name
		want := 0
		for p := m.Index - 1; p < m.Points; p += m.Count {
			want++
		}
		seen := map[int]bool{}
		for _, r := range s.rows {
			if r.point < 0 || r.point >= m.Points || r.point%m.Count != m.Index-1 || seen[r.point] {
				return usagef("%s: point %d does not belong in shard %d/%d (or appears twice)", s.name, r.point, m.Index, m.Count)
			}
			seen[r.point] = true
		}
		if len(s.rows) != want {
			return usagef("%s: shard %d/%d has %d of its %d points: the file is truncated", s.name, m.Index, m.Count, len(s.rows), want)
		}
		if s.format == "csv" && first.header != nil && s.header != nil && !equalStrings(s.header, first.header) {
			return usagef("%s and %s have different CSV columns", first.name, s.name)
		}
	}
	var missing []string
	for i := 1; i <= first.meta.Count; i++ {
		if _, ok := byIndex[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.meta.Count))
		}
	}
	if len(missing) > 0 {
		return usagef("missing shard %s of sweep %s (%s): merge needs all %d", strings.Join(missing, ", "), first.meta.Sweep, first.meta.Scenario, first.meta.Count)
	}
	return nil
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mergeCSV(w io.Writer, shards []*shardFile, rows []shardRow) error {
	cw := csv.NewWriter(w)
	if len(rows) > 0 {
		if err := cw.Write(shardHeader(shards)); err != nil {
			return err
		}
	}
	for _, r := range rows {
		if err := cw.Write(r.rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
