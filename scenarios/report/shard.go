package report

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// Shards. A sweep too big for one machine runs as n shards (sweep --shard
// i/n), each a self-describing file; Merge joins all n into exactly the
// bytes the unsharded sweep prints in that format.

// ShardFormat is the version tag of shard files. v3: JSON shards carry
// every replication's distributions (a study's percentiles are read from
// them) and each row's study notes.
const ShardFormat = "poolsim-shard-v3"

// ErrShard wraps every error about shard files' content: not a shard,
// shards of different sweeps, one missing or given twice.
var ErrShard = errors.New("bad shards")

// ShardMeta describes a shard; the sweep fingerprint tells shards of
// different sweeps (scenario, seed, study, --set, --vary) apart.
type ShardMeta struct {
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	Index    int    `json:"index"`
	Count    int    `json:"count"`
	Points   int    `json:"points"`
	Sweep    string `json:"sweep"`
}

// Fingerprint hashes everything that makes a sweep's output: its name,
// seed, study and every point's parameters and full configuration.
func Fingerprint(sc *scenarios.Scenario, study scenarios.Study, points []scenarios.Point) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%q\x00%d\x00%+v\x00", ShardFormat, sc.Name, sc.Base.Seed, study)
	for _, p := range points {
		for _, kv := range p.Params {
			fmt.Fprintf(h, "%q=%q\x00", kv.Key, kv.Value)
		}
		if b, err := json.Marshal(p.Config); err == nil {
			h.Write(b)
		} else {
			fmt.Fprintf(h, "%+v", p.Config)
		}
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// shardJSON is a JSON shard: the header, then the rows with their point
// index and every replication's metrics.
type shardJSON struct {
	Format      string         `json:"format"`
	Shard       ShardMeta      `json:"shard"`
	Study       studyJSON      `json:"study"`
	Assumptions []string       `json:"assumptions"`
	Rows        []shardJSONRow `json:"rows"`
}

type studyJSON struct {
	Replications    int     `json:"replications"`
	Precision       float64 `json:"precision"`
	MaxReplications int     `json:"max_replications"`
}

type shardJSONRow struct {
	Point         int               `json:"point"`
	Params        []scenarios.Param `json:"params"`
	Deterministic bool              `json:"deterministic"`
	Reps          []system.Metrics  `json:"reps"`
	Dists         []system.Dists    `json:"dists,omitempty"` // each replication's (Metrics.Dists), when it has them
	Classes       []shardJSONClass  `json:"classes,omitempty"`
	Compat        json.RawMessage   `json:"compat"`
	Notes         []string          `json:"notes,omitempty"`
}

type shardJSONClass struct {
	Name  string           `json:"name"`
	Reps  []system.Metrics `json:"reps"`
	Dists []system.Dists   `json:"dists,omitempty"`
}

// distsOf is every replication's distributions, nil when none has any.
func distsOf(reps system.Replicated) []system.Dists {
	var out []system.Dists
	for i := range reps {
		if !reps[i].Dists.Empty() {
			out = make([]system.Dists, len(reps))
			for k := range reps {
				out[k] = reps[k].Dists
			}
			return out
		}
	}
	return nil
}

// withDists is reps with their distributions put back (ds nil: none, or
// one per replication).
func withDists(reps []system.Metrics, ds []system.Dists) (system.Replicated, bool) {
	if ds == nil {
		return reps, true
	}
	if len(ds) != len(reps) {
		return nil, false
	}
	for i := range reps {
		reps[i].Dists = ds[i]
	}
	return reps, true
}

// WriteShard writes the shard of r's rows whose points are index: JSON
// (shardJSON) or CSV (a "# poolsim-shard-v3 {meta}" line, then the CSV
// report with a leading point column).
func WriteShard(w io.Writer, format string, meta ShardMeta, index []int, r Report) error {
	if format == "csv" {
		m, _ := json.Marshal(meta)
		if _, err := fmt.Fprintf(w, "# %s %s\n", ShardFormat, m); err != nil {
			return err
		}
		cw := csv.NewWriter(w)
		if len(r.Rows) > 0 {
			if err := cw.Write(append([]string{"point"}, CSVHeader(r)...)); err != nil {
				return err
			}
		}
		for i := range r.Rows {
			for _, rec := range CSVRecords(r, i) {
				if err := cw.Write(append([]string{strconv.Itoa(index[i])}, rec...)); err != nil {
					return err
				}
			}
		}
		cw.Flush()
		return cw.Error()
	}
	st := studyJSON{r.Study.Replications, r.Study.Precision, r.Study.MaxReplications}
	out := shardJSON{Format: ShardFormat, Shard: meta, Study: st, Assumptions: r.assumptions(), Rows: make([]shardJSONRow, len(r.Rows))}
	for i := range r.Rows {
		x := &r.Rows[i]
		c, err := json.Marshal(x.Compat)
		if err != nil {
			return err
		}
		out.Rows[i] = shardJSONRow{Point: index[i], Params: x.Params, Deterministic: x.Deterministic, Reps: x.Reps, Dists: distsOf(x.Reps), Compat: c, Notes: x.Notes}
		for _, cl := range x.Classes {
			out.Rows[i].Classes = append(out.Rows[i].Classes, shardJSONClass{Name: cl.Name, Reps: cl.Reps, Dists: distsOf(cl.Reps)})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// Shard is one parsed shard file.
type Shard struct {
	Name   string
	Format string // json or csv
	Meta   ShardMeta
	study  scenarios.Study
	notes  []string
	rows   []shardRow
	header []string // csv: the header without the point column
}

type shardRow struct {
	point int
	row   scenarios.Row // json shards
	recs  [][]string    // csv shards: the point's records without the point column (one per class with classes)
}

func shardErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrShard, fmt.Sprintf(format, args...))
}

// ReadShard parses a shard file's content; name is for errors.
func ReadShard(name string, data []byte) (*Shard, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	notShard := shardErr("%s: not a shard file of this poolsim version (make one with 'poolsim sweep ... --shard i/n --format json|csv')", name)
	switch {
	case bytes.HasPrefix(trimmed, []byte("{")):
		var sj shardJSON
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sj); err != nil || sj.Format != ShardFormat {
			return nil, notShard
		}
		s := &Shard{Name: name, Format: "json", Meta: sj.Shard, notes: sj.Assumptions,
			study: scenarios.Study{Replications: sj.Study.Replications, Precision: sj.Study.Precision, MaxReplications: sj.Study.MaxReplications}}
		if s.notes == nil {
			s.notes = []string{}
		}
		for _, r := range sj.Rows {
			if len(r.Reps) == 0 {
				return nil, shardErr("%s: point %d has no replication", name, r.Point)
			}
			reps, ok := withDists(r.Reps, r.Dists)
			if !ok {
				return nil, shardErr("%s: point %d has %d replications and %d distributions", name, r.Point, len(r.Reps), len(r.Dists))
			}
			row := scenarios.Row{Params: r.Params, Deterministic: r.Deterministic, Reps: reps, Notes: r.Notes}
			row.Metrics = row.Reps.Mean()
			for _, cl := range r.Classes {
				if len(cl.Reps) == 0 {
					return nil, shardErr("%s: point %d class %s has no replication", name, r.Point, cl.Name)
				}
				creps, ok := withDists(cl.Reps, cl.Dists)
				if !ok {
					return nil, shardErr("%s: point %d class %s has %d replications and %d distributions", name, r.Point, cl.Name, len(cl.Reps), len(cl.Dists))
				}
				row.Classes = append(row.Classes, scenarios.ClassRow{Name: cl.Name, Reps: creps, Metrics: creps.Mean()})
			}
			m, err := decodeCompat(r.Compat)
			if err != nil {
				return nil, shardErr("%s: point %d: compat: %v", name, r.Point, err)
			}
			row.Compat = m
			s.rows = append(s.rows, shardRow{point: r.Point, row: row})
		}
		return s, nil
	case bytes.HasPrefix(trimmed, []byte("# "+ShardFormat+" ")):
		line, rest, _ := bytes.Cut(trimmed, []byte("\n"))
		s := &Shard{Name: name, Format: "csv"}
		if err := json.Unmarshal(bytes.TrimPrefix(line, []byte("# "+ShardFormat+" ")), &s.Meta); err != nil {
			return nil, notShard
		}
		recs, err := csv.NewReader(bufio.NewReader(bytes.NewReader(rest))).ReadAll()
		if err != nil {
			return nil, shardErr("%s: %v", name, err)
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
				return nil, shardErr("%s: line %d: point %q is not a number", name, i+2, r[0])
			}
			if n := len(s.rows); n > 0 && s.rows[n-1].point == p && slices.Contains(s.header, "class") {
				s.rows[n-1].recs = append(s.rows[n-1].recs, r[1:]) // the point's next class
				continue
			}
			s.rows = append(s.rows, shardRow{point: p, recs: [][]string{r[1:]}})
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

// CheckShards verifies that the files are the n shards of one sweep, each
// once, each complete.
func CheckShards(shards []*Shard) error {
	if len(shards) == 0 {
		return shardErr("no shard to merge")
	}
	first := shards[0]
	byIndex := map[int]string{}
	for _, s := range shards {
		m := s.Meta
		if s.Format != first.Format {
			return shardErr("%s is a %s shard and %s a %s shard: merge shards of one format", first.Name, first.Format, s.Name, s.Format)
		}
		if m.Scenario != first.Meta.Scenario || m.Seed != first.Meta.Seed || m.Sweep != first.Meta.Sweep || m.Points != first.Meta.Points {
			return shardErr("%s and %s come from different sweeps (%s seed %d, %d points, sweep %s vs %s seed %d, %d points, sweep %s)",
				first.Name, s.Name, first.Meta.Scenario, first.Meta.Seed, first.Meta.Points, first.Meta.Sweep, m.Scenario, m.Seed, m.Points, m.Sweep)
		}
		if m.Count != first.Meta.Count {
			return shardErr("%s is shard %d/%d but %s is shard %d/%d: all shards must split the sweep the same way", first.Name, first.Meta.Index, first.Meta.Count, s.Name, m.Index, m.Count)
		}
		if m.Count < 1 || m.Index < 1 || m.Index > m.Count {
			return shardErr("%s: shard %d/%d is not a shard", s.Name, m.Index, m.Count)
		}
		if prev, dup := byIndex[m.Index]; dup {
			return shardErr("shard %d/%d given twice: %s and %s", m.Index, m.Count, prev, s.Name)
		}
		byIndex[m.Index] = s.Name
		want := 0
		for p := m.Index - 1; p < m.Points; p += m.Count {
			want++
		}
		seen := map[int]bool{}
		for _, r := range s.rows {
			if r.point < 0 || r.point >= m.Points || r.point%m.Count != m.Index-1 || seen[r.point] {
				return shardErr("%s: point %d does not belong in shard %d/%d (or appears twice)", s.Name, r.point, m.Index, m.Count)
			}
			seen[r.point] = true
		}
		if len(s.rows) != want {
			return shardErr("%s: shard %d/%d has %d of its %d points: the file is truncated", s.Name, m.Index, m.Count, len(s.rows), want)
		}
		if s.Format == "csv" && first.header != nil && s.header != nil && !equalStrings(s.header, first.header) {
			return shardErr("%s and %s have different CSV columns", first.Name, s.Name)
		}
	}
	var missing []string
	for i := 1; i <= first.Meta.Count; i++ {
		if _, ok := byIndex[i]; !ok {
			missing = append(missing, fmt.Sprintf("%d/%d", i, first.Meta.Count))
		}
	}
	if len(missing) > 0 {
		return shardErr("missing shard %s of sweep %s (%s): merge needs all %d", strings.Join(missing, ", "), first.Meta.Sweep, first.Meta.Scenario, first.Meta.Count)
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

// Merge checks the shards (CheckShards) and writes the unsharded output in
// their format to w; it returns the merged rows (for a plot: from CSV
// shards they hold the means only).
func Merge(w io.Writer, shards []*Shard) ([]scenarios.Row, error) {
	if err := CheckShards(shards); err != nil {
		return nil, err
	}
	first := shards[0]
	var all []shardRow
	for _, s := range shards {
		all = append(all, s.rows...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].point < all[j].point })
	rows := make([]scenarios.Row, len(all))
	if first.Format == "csv" {
		var header []string
		for _, s := range shards {
			if s.header != nil {
				header = s.header
				break
			}
		}
		cw := csv.NewWriter(w)
		if len(all) > 0 {
			if err := cw.Write(header); err != nil {
				return nil, err
			}
		}
		for i, r := range all {
			if err := cw.WriteAll(r.recs); err != nil {
				return nil, err
			}
			row, err := RowFromCSV(header, r.recs[0])
			if err != nil {
				return nil, shardErr("point %d: %v", r.point, err)
			}
			rows[i] = row
		}
		cw.Flush()
		return rows, cw.Error()
	}
	for i, r := range all {
		rows[i] = r.row
	}
	rep := Report{Scenario: first.Meta.Scenario, Seed: first.Meta.Seed, Study: first.study, Rows: rows, Notes: first.notes}
	return rows, WriteJSON(w, rep)
}
