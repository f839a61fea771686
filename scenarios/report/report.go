package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/poolmode"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// Formats are the output formats.
var Formats = []string{"table", "json", "csv"}

// CheckFormat accepts table, json or csv.
func CheckFormat(f string) error {
	for _, ok := range Formats {
		if f == ok {
			return nil
		}
	}
	return fmt.Errorf("--format %q: want table, json or csv", f)
}

// Report is a run or sweep to print.
type Report struct {
	Scenario    string
	Description string
	Seed        uint64
	Study       scenarios.Study // what was asked; each row says what it ran
	Rows        []scenarios.Row
	// Missing counts the points an interrupted run did not finish (not in
	// Rows); the output is then marked incomplete.
	Missing int
	// Notes are the assumptions to print (nil: Assumptions(Rows), which
	// needs the rows' configurations; a merge of shards carries them).
	Notes []string
	// Explanation, when set, goes into the JSON report as "explanation"
	// (poolsim run --explain --format json); the table and CSV leave it out.
	Explanation *Explanation
}

// assumptions are the report's assumption sentences.
func (r Report) assumptions() []string {
	if r.Notes != nil {
		return r.Notes
	}
	return Assumptions(r.Rows)
}

// Assumptions are what the rows rest on (system.Assumptions), each
// sentence once, in the order the rows first give them.
func Assumptions(rows []scenarios.Row) []string {
	var out []string
	seen := map[string]bool{}
	for i := range rows {
		for _, a := range system.Assumptions(rows[i].Config) {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// incompleteWords marks an interrupted run's output.
func (r Report) incompleteWords() string {
	return fmt.Sprintf("INCOMPLETE: interrupted; %d of %d points finished", len(r.Rows), len(r.Rows)+r.Missing)
}

// Write writes r in format (table, json or csv).
func Write(w io.Writer, format string, r Report) error {
	switch format {
	case "json":
		return WriteJSON(w, r)
	case "csv":
		return WriteCSV(w, r)
	default:
		return WriteTable(w, r)
	}
}

// replicated reports whether any row has more than one replication: then
// CSV carries the _ci95 columns.
func (r Report) replicated() bool {
	for i := range r.Rows {
		if len(r.Rows[i].Reps) > 1 {
			return true
		}
	}
	return false
}

// hasClasses reports whether any row has client classes: then every
// output has a class column (CSV) or class lines (table, JSON).
func (r Report) hasClasses() bool {
	for i := range r.Rows {
		if len(r.Rows[i].Classes) > 0 {
			return true
		}
	}
	return false
}

// classRow is class k of row x as a row of its own (for the writers'
// cells): its replications and means, the point's configuration and the
// class's pool's feature matrix.
func classRow(x *scenarios.Row, k int) *scenarios.Row {
	c := x.Classes[k]
	r := &scenarios.Row{Params: x.Params, Config: x.Config, Reps: c.Reps, Deterministic: x.Deterministic}
	r.Metrics = c.Metrics
	r.Compat = x.Compat
	if k < len(x.Config.Classes) {
		cl := x.Config.Classes[k]
		r.Config.Workload, r.Config.AppPool = cl.Workload, cl.AppPool
		r.Config.Pooler.PoolMode = classMode(x.Config, cl)
		r.Compat = compat.For(r.Config.Pooler.PoolMode, x.Config.Pooler.MaxPreparedStatements)
	}
	return r
}

// classMode is the pool mode class cl uses.
func classMode(c system.Config, cl system.Class) poolmode.Mode {
	ps := c.PoolList()
	for i, p := range c.Pools {
		if p.Name == cl.Pool {
			return ps[i].Mode
		}
	}
	return ps[0].Mode
}

// value formats a metric for CSV: a count of one run as an integer, every
// other figure in Go's shortest form.
func value(f system.Field, x float64, reps int) string {
	if f.Count && reps <= 1 {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// jsonNumber formats a metric for JSON as encoding/json would.
func jsonNumber(f system.Field, x float64, reps int) []byte {
	if f.Count && reps <= 1 {
		return strconv.AppendInt(nil, int64(x), 10)
	}
	b, err := json.Marshal(x)
	if err != nil { // NaN or Inf: not a JSON number
		return []byte("null")
	}
	return b
}

// New is the report of sc's study st whose run gave rows
// (scenarios.RunStudy): the finished rows, and as Missing those an
// interruption left unfinished. poolsim run and sweep and the browser page
// all build their report here, so the same scenario, seed and study write
// the same bytes everywhere.
func New(sc *scenarios.Scenario, st scenarios.Study, rows []scenarios.Row) Report {
	var done []scenarios.Row
	for _, r := range rows {
		if !r.Incomplete {
			done = append(done, r)
		}
	}
	return Report{Scenario: sc.Name, Description: sc.Description, Seed: sc.Base.Seed, Study: st, Rows: done, Missing: len(rows) - len(done)}
}
