package scenarios

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// Empirical distributions, in YAML:
//
//	{dist: empirical, samples: [1.2ms, 0.8ms, 3ms]}
//	{dist: empirical, samples: [1.2, 0.8, 3], unit: ms}
//	{dist: empirical, buckets: [[1ms, 50], [2ms, 30], [10ms, 20]]}
//	{dist: empirical, buckets: [[1, 50], [2, 80], [10, 100], [+Inf, 100]], unit: ms, cumulative: true}
//	{dist: empirical, file: times.csv, unit: ms}
//
// samples are recorded durations, drawn each with equal probability.
// buckets are [upper bound, count] pairs: count values in (previous bound,
// bound], spread uniformly; the first bucket starts at min (default 0).
// With cumulative: true the counts are running totals (Prometheus'
// le-buckets); otherwise each is the bucket's own (pg_stat_monitor's
// resp_calls). A last bucket without an upper bound (+Inf) must hold no
// values. file is a text file, one value a line (samples) or "bound,count"
// a line (buckets; comma, tab, semicolon or spaces between), with an
// optional header line and # comments; a relative path is relative to the
// scenario file (to the working directory for --set), and a built-in
// scenario cannot name one. unit gives the unit of bare numbers: ns, us,
// ms or s.

// maxDataFile bounds a file an empirical distribution reads.
const maxDataFile = 512 << 20

// empiricalValue reads the empirical forms above from a distribution's keys.
func empiricalValue(vals map[string]*yaml.Node) (*sim.EmpiricalTable, error) {
	src, err := oneSource(vals, "samples", "buckets", "file")
	if err != nil {
		return nil, err
	}
	unit := sim.Time(0)
	if u, ok := vals["unit"]; ok {
		if unit, err = unitValue(u); err != nil {
			return nil, err
		}
	}
	lower := sim.Time(0)
	cumulative := false
	if v, ok := vals["min"]; ok {
		if lower, err = pointValue(v.Value, unit, false); err != nil || v.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("min: %v", errOr(err, "want a duration"))
		}
	}
	if v, ok := vals["cumulative"]; ok {
		s, _ := scalar(v)
		if cumulative, err = strconv.ParseBool(s); err != nil {
			return nil, fmt.Errorf("cumulative: want true or false, got %q", s)
		}
	}
	var rows [][]string
	var where []string // where each row came from, for errors
	switch src {
	case "samples", "buckets":
		entries, err := listValue(vals[src], src)
		if err != nil {
			return nil, err
		}
		for i, e := range entries {
			var row []string
			switch {
			case src == "samples" && e.Kind == yaml.ScalarNode:
				row = []string{e.Value}
			case src == "buckets" && e.Kind == yaml.SequenceNode && len(e.Content) == 2 &&
				e.Content[0].Kind == yaml.ScalarNode && e.Content[1].Kind == yaml.ScalarNode:
				row = []string{e.Content[0].Value, e.Content[1].Value}
			case src == "samples":
				return nil, fmt.Errorf("line %d: samples: entry %d is a %s; want a duration such as 2.5ms", e.Line, i+1, kindName(e))
			default:
				return nil, fmt.Errorf("line %d: buckets: entry %d: want a pair [upper bound, count] such as [5ms, 120]", e.Line, i+1)
			}
			rows = append(rows, row)
			where = append(where, fmt.Sprintf("line %d: %s entry %d", e.Line, src, i+1))
		}
	case "file":
		path, err := scalar(vals["file"])
		if err != nil {
			return nil, fmt.Errorf("file: %w", err)
		}
		if rows, where, err = readColumns(path); err != nil {
			return nil, err
		}
		if len(rows[0]) == 1 {
			src = "samples"
		} else {
			src = "buckets"
		}
	}
	if src == "samples" {
		if _, ok := vals["cumulative"]; ok {
			return nil, fmt.Errorf("cumulative applies to buckets (two columns), not to samples")
		}
		if _, ok := vals["min"]; ok {
			return nil, fmt.Errorf("min applies to buckets (two columns), not to samples")
		}
		samples := make([]sim.Time, len(rows))
		for i, r := range rows {
			if samples[i], err = pointValue(r[0], unit, false); err != nil {
				return nil, fmt.Errorf("%s: %v", where[i], err)
			}
		}
		return sim.NewEmpiricalSamples(samples)
	}
	buckets := make([]sim.Bucket, 0, len(rows))
	var prev float64
	for i, r := range rows {
		if len(r) != 2 {
			return nil, fmt.Errorf("%s: want two columns, upper bound and count", where[i])
		}
		up, err := pointValue(r[0], unit, true)
		if err != nil {
			return nil, fmt.Errorf("%s: bound: %v", where[i], err)
		}
		c, err := strconv.ParseFloat(strings.ReplaceAll(r[1], "_", ""), 64)
		if err != nil || c < 0 || c != math.Trunc(c) || c > 1e15 {
			return nil, fmt.Errorf("%s: count: want a whole number of values at or above 0, got %q", where[i], r[1])
		}
		if cumulative {
			if c < prev {
				return nil, fmt.Errorf("%s: cumulative count %v is below the previous bucket's %v (with cumulative: true each count includes the buckets before it)", where[i], c, prev)
			}
			c, prev = c-prev, c
		}
		if up == infBound {
			if i != len(rows)-1 {
				return nil, fmt.Errorf("%s: only the last bucket may be unbounded (+Inf)", where[i])
			}
			if c > 0 {
				return nil, fmt.Errorf("%s: the last bucket has no upper bound (+Inf) and holds %v values, which cannot be drawn; give it an upper bound, e.g. the largest value seen", where[i], c)
			}
			break
		}
		buckets = append(buckets, sim.Bucket{Upper: up, Count: int64(c)})
	}
	t, err := sim.NewEmpiricalHistogram(lower, buckets)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// listValue is the entries of the non-empty list key k.
func listValue(seq *yaml.Node, k string) ([]*yaml.Node, error) {
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return nil, fmt.Errorf("line %d: %s must be a non-empty list", seq.Line, k)
	}
	if len(seq.Content) > sim.MaxEmpirical {
		return nil, fmt.Errorf("%s: %d entries, at most %d", k, len(seq.Content), sim.MaxEmpirical)
	}
	return seq.Content, nil
}

// oneSource returns which one of keys is present, and an error unless
// exactly one is.
func oneSource(vals map[string]*yaml.Node, keys ...string) (string, error) {
	var found []string
	for _, k := range keys {
		if _, ok := vals[k]; ok {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("dist empirical needs exactly one of %s (got %d)", strings.Join(keys, ", "), len(found))
	}
	return found[0], nil
}

// infBound marks an unbounded (+Inf) histogram bound.
const infBound = sim.Time(math.MaxInt64)

var units = map[string]sim.Time{"ns": sim.Nanosecond, "us": sim.Microsecond, "µs": sim.Microsecond, "ms": sim.Millisecond, "s": sim.Second}

func unitValue(n *yaml.Node) (sim.Time, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, fmt.Errorf("unit: %w", err)
	}
	u, ok := units[s]
	if !ok {
		return 0, fmt.Errorf("unit: want ns, us, ms or s, got %q", s)
	}
	return u, nil
}

// pointValue reads one value of an empirical table: a duration such as
// 2.5ms, or a bare number in unit; inf allows +Inf (a bucket bound).
func pointValue(s string, unit sim.Time, inf bool) (sim.Time, error) {
	s = strings.TrimSpace(s)
	switch strings.ToLower(s) {
	case "+inf", "inf", "infinity", "+infinity":
		if inf {
			return infBound, nil
		}
		return 0, fmt.Errorf("%q is not a finite duration", s)
	case "0":
		return 0, nil
	}
	var d sim.Time
	if gd, err := time.ParseDuration(s); err == nil {
		d = sim.FromDuration(gd)
	} else {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("want a duration such as 2.5ms, got %q", s)
		}
		if unit == 0 {
			return 0, fmt.Errorf("%q has no unit: write it as %sms (or %sus, %ss), or give the distribution unit: ms", s, s, s, s)
		}
		d = sim.FromSeconds(v * unit.Seconds())
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	if d > sim.FromDuration(maxDuration) {
		return 0, fmt.Errorf("must be at most %s, got %s", maxDuration, s)
	}
	return d, nil
}

// readColumns reads a data file: one or two columns a line (comma, tab,
// semicolon or spaces between), # comments and blank lines skipped, and a
// first line whose first field is not a number taken as a header. It
// returns the rows and where each came from.
func readColumns(path string) ([][]string, []string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("file %s: not a regular file", path)
	}
	if st.Size() > maxDataFile {
		return nil, nil, fmt.Errorf("file %s: %d bytes, at most %d", path, st.Size(), maxDataFile)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("file: %w", err)
	}
	defer f.Close()
	return parseColumns(io.LimitReader(f, maxDataFile), path)
}

// errNoData is returned for a data file without a single value.
var errNoData = errors.New("no values (want one value a line, or bound,count a line)")

func parseColumns(r io.Reader, name string) ([][]string, []string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var rows [][]string
	var where []string
	line, cols := 0, 0
	header := true
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.FieldsFunc(text, func(r rune) bool {
			return r == ',' || r == ';' || r == '\t' || r == ' '
		})
		if len(fields) == 0 {
			return nil, nil, fmt.Errorf("file %s: line %d: only separators, no value", name, line)
		}
		if header {
			header = false
			if _, err := strconv.ParseFloat(fields[0], 64); err != nil && !looksLikeValue(fields[0]) {
				continue
			}
		}
		if len(fields) > 2 {
			return nil, nil, fmt.Errorf("file %s: line %d: %d columns; want one value a line, or bound,count a line", name, line, len(fields))
		}
		if cols == 0 {
			cols = len(fields)
		} else if len(fields) != cols {
			return nil, nil, fmt.Errorf("file %s: line %d: %d columns, but the lines before have %d", name, line, len(fields), cols)
		}
		if len(rows) == sim.MaxEmpirical {
			return nil, nil, fmt.Errorf("file %s: more than %d values", name, sim.MaxEmpirical)
		}
		rows = append(rows, fields)
		where = append(where, fmt.Sprintf("file %s: line %d", name, line))
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("file %s: line %d: %w", name, line+1, err)
	}
	if len(rows) == 0 {
		return nil, nil, fmt.Errorf("file %s: %w", name, errNoData)
	}
	return rows, where, nil
}

// looksLikeValue reports whether s reads as a duration or an unbounded
// bound (so a first line such as "2.5ms" is data, not a header).
func looksLikeValue(s string) bool {
	if _, err := time.ParseDuration(s); err == nil {
		return true
	}
	switch strings.ToLower(s) {
	case "+inf", "inf", "infinity", "+infinity":
		return true
	}
	return false
}

// intEmpiricalValue reads {dist: empirical, samples: [...]}, {values: [...],
// weights: [...]} or {file: ...} for an integer distribution in lo..hi.
func intEmpiricalValue(vals map[string]*yaml.Node, lo, hi int64) (sim.IntDist, error) {
	src, err := oneSource(vals, "samples", "values", "file")
	if err != nil {
		return sim.IntDist{}, err
	}
	_, hasW := vals["weights"]
	if (src == "values") != hasW {
		return sim.IntDist{}, fmt.Errorf("values and weights go together: {dist: empirical, values: [1, 2, 3], weights: [60, 30, 10]}")
	}
	whole := func(s, where string) (int, error) {
		v, err := strconv.ParseInt(strings.ReplaceAll(strings.TrimSpace(s), "_", ""), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: want a whole number from %d to %d, got %q", where, lo, hi, s)
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("%s: must be from %d to %d, got %d", where, lo, hi, v)
		}
		return int(v), nil
	}
	list := func(k string) ([]*yaml.Node, error) {
		entries, err := listValue(vals[k], k)
		if err != nil {
			return nil, err
		}
		for i, e := range entries {
			if e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: %s: entry %d is a %s; want a number", e.Line, k, i+1, kindName(e))
			}
		}
		return entries, nil
	}
	var values []int
	var weights []float64
	switch src {
	case "samples":
		ns, err := list("samples")
		if err != nil {
			return sim.IntDist{}, err
		}
		for i, e := range ns {
			v, err := whole(e.Value, fmt.Sprintf("line %d: samples entry %d", e.Line, i+1))
			if err != nil {
				return sim.IntDist{}, err
			}
			values, weights = append(values, v), append(weights, 1)
		}
	case "values":
		vs, err := list("values")
		if err != nil {
			return sim.IntDist{}, err
		}
		ws, err := list("weights")
		if err != nil {
			return sim.IntDist{}, err
		}
		if len(vs) != len(ws) {
			return sim.IntDist{}, fmt.Errorf("%d values but %d weights; give one weight per value", len(vs), len(ws))
		}
		for i := range vs {
			v, err := whole(vs[i].Value, fmt.Sprintf("line %d: values entry %d", vs[i].Line, i+1))
			if err != nil {
				return sim.IntDist{}, err
			}
			w, err := number(ws[i])
			if err != nil {
				return sim.IntDist{}, fmt.Errorf("line %d: weights entry %d: %v", ws[i].Line, i+1, err)
			}
			values, weights = append(values, v), append(weights, w)
		}
	case "file":
		path, err := scalar(vals["file"])
		if err != nil {
			return sim.IntDist{}, fmt.Errorf("file: %w", err)
		}
		rows, where, err := readColumns(path)
		if err != nil {
			return sim.IntDist{}, err
		}
		for i, r := range rows {
			v, err := whole(r[0], where[i])
			if err != nil {
				return sim.IntDist{}, err
			}
			w := 1.0
			if len(r) == 2 {
				if w, err = number(&yaml.Node{Kind: yaml.ScalarNode, Value: r[1]}); err != nil {
					return sim.IntDist{}, fmt.Errorf("%s: weight: %v", where[i], err)
				}
			}
			values, weights = append(values, v), append(weights, w)
		}
	}
	return sim.EmpiricalInt(values, weights)
}

// resolveDataFiles rewrites the file: of every empirical distribution in
// the document to a path relative to the scenario file's folder, so the
// scenario reads the same data from any working directory. A built-in
// scenario has no folder: a file: there is an error.
func resolveDataFiles(n *yaml.Node, source string) error {
	if n.Kind == yaml.MappingNode {
		var dist, file *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch n.Content[i].Value {
			case "dist":
				dist = n.Content[i+1]
			case "file":
				file = n.Content[i+1]
			}
		}
		if dist != nil && dist.Value == "empirical" && file != nil && file.Kind == yaml.ScalarNode {
			if strings.HasPrefix(source, "builtin:") {
				return invalid(source, file.Line, "file: a built-in scenario cannot read files; give the data inline with samples: or buckets:")
			}
			if file.Value != "" && !filepath.IsAbs(file.Value) {
				file.Value = filepath.Join(filepath.Dir(source), file.Value)
			}
		}
	}
	for _, c := range n.Content {
		if err := resolveDataFiles(c, source); err != nil {
			return err
		}
	}
	return nil
}
