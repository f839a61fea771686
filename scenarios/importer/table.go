package importer

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Table is one result as a server sent it: column names and rows of text
// values (NULL as the empty string). Console and catalog results are kept
// this way, as sent, so a recording replays exactly and the parsing that
// turns text into numbers is one tested, fuzzed step.
type Table struct {
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// col is the index of column name, or -1.
func (t *Table) col(name string) int {
	for i, c := range t.Columns {
		if c == name {
			return i
		}
	}
	return -1
}

// Has reports whether the table has column name.
func (t *Table) Has(name string) bool { return t.col(name) >= 0 }

// project keeps the named columns that the table has, in that order.
func (t *Table) project(names ...string) Table {
	var idx []int
	out := Table{}
	for _, n := range names {
		if i := t.col(n); i >= 0 {
			idx = append(idx, i)
			out.Columns = append(out.Columns, n)
		}
	}
	out.Rows = make([][]string, len(t.Rows))
	for r, vals := range t.Rows {
		out.Rows[r] = make([]string, len(idx))
		for k, i := range idx {
			if i < len(vals) {
				out.Rows[r][k] = vals[i]
			}
		}
	}
	return out
}

// row is one row of a table, read by column name.
type row struct {
	t *Table
	r []string
}

// find returns the first row whose column key holds value.
func (t *Table) find(key, value string) (row, bool) {
	i := t.col(key)
	if i < 0 {
		return row{}, false
	}
	for _, r := range t.Rows {
		if i < len(r) && r[i] == value {
			return row{t, r}, true
		}
	}
	return row{}, false
}

// each calls f for every row whose column key holds value.
func (t *Table) each(key, value string, f func(row) error) error {
	i := t.col(key)
	if i < 0 {
		return fmt.Errorf("no column %q (columns: %s)", key, strings.Join(t.Columns, ", "))
	}
	for _, r := range t.Rows {
		if i < len(r) && r[i] == value {
			if err := f(row{t, r}); err != nil {
				return err
			}
		}
	}
	return nil
}

// str is the text of column name ("" when absent).
func (r row) str(name string) string {
	i := r.t.col(name)
	if i < 0 || i >= len(r.r) {
		return ""
	}
	return r.r[i]
}

// has reports whether the row's table has column name.
func (r row) has(name string) bool { return r.t.col(name) >= 0 }

// int reads column name as a whole number. A missing column or a value
// that is not a whole number is an error naming both.
func (r row) int(name string) (int64, error) {
	i := r.t.col(name)
	if i < 0 || i >= len(r.r) {
		return 0, fmt.Errorf("no column %q", name)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(r.r[i]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("column %s: %q is not a whole number", name, r.r[i])
	}
	return v, nil
}

// float reads column name as a finite number.
func (r row) float(name string) (float64, error) {
	i := r.t.col(name)
	if i < 0 || i >= len(r.r) {
		return 0, fmt.Errorf("no column %q", name)
	}
	return parseFinite(name, r.r[i])
}

// parseFinite reads a finite float; name says what it is in the error.
func parseFinite(name, s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v != v || v > 1e300 || v < -1e300 {
		return 0, fmt.Errorf("%s: %q is not a finite number", name, s)
	}
	return v, nil
}

// Window is the span of time a source observed.
type Window struct {
	From, To time.Time
	Samples  int // looks taken (console samples, snapshots), or records read from a file
}

// Span is the window's length.
func (w Window) Span() time.Duration { return w.To.Sub(w.From) }

func (w Window) String() string {
	if w.From.IsZero() {
		return "no window"
	}
	return fmt.Sprintf("%s from %s", roundDur(w.Span()), w.From.UTC().Format("2006-01-02 15:04:05Z"))
}

// roundDur prints a duration with about four significant digits.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(10 * time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(10 * time.Nanosecond)
	}
	return d
}
