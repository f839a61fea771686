package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/compat"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// CSVHeader is the CSV header of r: the swept keys, replications, every
// metric (each followed by <metric>_ci95 when any row has replications),
// then compat_<feature>.
func CSVHeader(r Report) []string {
	var head []string
	if len(r.Rows) > 0 {
		for _, p := range r.Rows[0].Params {
			head = append(head, p.Key)
		}
	}
	if r.hasClasses() {
		head = append(head, "class")
	}
	head = append(head, "replications")
	ci := r.replicated()
	for _, f := range system.Fields() {
		head = append(head, f.Name)
		if ci {
			head = append(head, f.Name+"_ci95")
		}
	}
	for _, f := range compat.Features {
		head = append(head, "compat_"+f.String())
	}
	return head
}

// CSVRecords are row i of r in CSVHeader's columns: one record, or with
// classes the whole run's ("all") and then each class's.
func CSVRecords(r Report, i int) [][]string {
	x := &r.Rows[i]
	if !r.hasClasses() {
		return [][]string{csvRecord(r, x, x, "")}
	}
	out := [][]string{csvRecord(r, x, x, "all")}
	for k := range x.Classes {
		out = append(out, csvRecord(r, x, classRow(x, k), x.Classes[k].Name))
	}
	return out
}

// csvRecord is one record: the point's params, then figures's numbers.
func csvRecord(r Report, point, figures *scenarios.Row, class string) []string {
	var rec []string
	for _, p := range point.Params {
		rec = append(rec, p.Value)
	}
	if r.hasClasses() {
		rec = append(rec, class)
	}
	n := len(figures.Reps)
	rec = append(rec, strconv.Itoa(n))
	ci := r.replicated()
	for _, f := range system.Fields() {
		mean, half := figures.Stat(f)
		rec = append(rec, value(f, mean, n))
		if ci {
			rec = append(rec, strconv.FormatFloat(half, 'g', -1, 64))
		}
	}
	for _, f := range compat.Features {
		rec = append(rec, compat.Word(figures.Compat[f]))
	}
	return rec
}

// WriteCSV writes a header and one record per row.
func WriteCSV(w io.Writer, r Report) error {
	cw := csv.NewWriter(w)
	if len(r.Rows) > 0 {
		if err := cw.Write(CSVHeader(r)); err != nil {
			return err
		}
	}
	for i := range r.Rows {
		if err := cw.WriteAll(CSVRecords(r, i)); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	if r.Missing > 0 { // a CSV reader that stops here learns the file is partial
		_, err := fmt.Fprintf(w, "# %s\n", r.incompleteWords())
		return err
	}
	return nil
}

// RowFromCSV reads a CSV record back into a row's params and metrics (the
// means), for plotting merged CSV: the columns before "replications" are
// the swept keys; _ci95 and compat columns are skipped.
func RowFromCSV(header, rec []string) (scenarios.Row, error) {
	var row scenarios.Row
	if len(rec) != len(header) {
		return row, fmt.Errorf("%d fields where the header has %d", len(rec), len(header))
	}
	k := 0
	for k < len(header) && header[k] != "replications" && header[k] != "class" {
		row.Params = append(row.Params, scenarios.Param{Key: header[k], Value: rec[k]})
		k++
	}
	if k == len(header) {
		return row, fmt.Errorf("no replications column: a CSV from another poolsim version?")
	}
	for i := k + 1; i < len(header); i++ {
		name := header[i]
		if strings.HasSuffix(name, "_ci95") || strings.HasPrefix(name, "compat_") || name == "replications" || name == "class" {
			continue
		}
		f, ok := system.FieldByName(name)
		if !ok {
			return row, fmt.Errorf("unknown column %q", name)
		}
		x, err := strconv.ParseFloat(rec[i], 64)
		if err != nil {
			return row, fmt.Errorf("%s: %v", name, err)
		}
		f.Set(&row.Metrics, x)
	}
	row.Reps = system.Replicated{row.Metrics}
	return row, nil
}
