package report

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

// KindReplications is the kind of the paragraph that says what a row's
// figures are over its replications (beside system's Kind constants).
const KindReplications = "replications"

// Explanation is the teaching view of a run (poolsim run --explain): for
// each row the laws and analytic results set beside its figures, and the
// assumptions they rest on. The text (WriteExplanation) and the browser
// page are both made from it; it encodes as JSON as it stands.
type Explanation struct {
	Rows        []RowExplanation `json:"rows"`
	Assumptions []string         `json:"assumptions"`
}

// RowExplanation is one row's explanation: its title (the pool mode and
// the swept keys), its swept keys, and its paragraphs in the order the
// text prints them.
type RowExplanation struct {
	Title      string             `json:"title"`
	Params     Params             `json:"params"`
	Paragraphs []system.Paragraph `json:"paragraphs"`
}

// Explain assembles the explanation of rows: system.Explain's paragraphs
// for each, a replications paragraph for a row of several replications,
// and Assumptions(rows).
func Explain(rows []scenarios.Row) Explanation {
	e := Explanation{Rows: make([]RowExplanation, 0, len(rows)), Assumptions: Assumptions(rows)}
	if e.Assumptions == nil {
		e.Assumptions = []string{}
	}
	for i := range rows {
		x := &rows[i]
		title := x.Config.Pooler.PoolMode.String()
		if x.Config.Multi() {
			title = classesTitle(x.Config)
		}
		for _, p := range x.Params {
			if p.Key != "pooler.mode" {
				title += ", " + p.Key + "=" + p.Value
			}
		}
		var cms []system.Metrics
		for _, cr := range x.Classes {
			cms = append(cms, cr.Metrics)
		}
		r := RowExplanation{Title: title, Params: Params(x.Params), Paragraphs: system.Explain(x.Config, x.Metrics, cms)}
		if r.Params == nil {
			r.Params = Params{}
		}
		if len(x.Reps) > 1 {
			r.Paragraphs = append(r.Paragraphs, replications(x))
		}
		e.Rows = append(e.Rows, r)
	}
	return e
}

// classesTitle names a row with classes by what it is: each class and
// the pool it goes through, with the pool's mode and size ("web: pool web
// (transaction, pool_size 40); report: pool report (session, pool_size
// 3)"; direct, no pooler, has no size).
func classesTitle(c system.Config) string {
	pools := c.PoolList()
	var parts []string
	for _, cl := range c.Classes {
		p := pools[0]
		for _, q := range pools {
			if q.Name == cl.Pool {
				p = q
			}
		}
		what := p.Mode.String()
		if p.Mode.Pooled() {
			what += fmt.Sprintf(", pool_size %d", p.Size)
		}
		if p.Name == "" {
			parts = append(parts, fmt.Sprintf("%s: %s", cl.Name, what))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s: pool %s (%s)", cl.Name, p.Name, what))
	}
	return strings.Join(parts, "; ")
}

// replications says what the figures above are over replications, and
// how sure the main ones are.
func replications(x *scenarios.Row) system.Paragraph {
	p := system.Paragraph{Kind: KindReplications, Title: "Replications"}
	var parts []string
	for _, k := range []struct{ name, label, unit string }{
		{"wait_W", "W", "ms"}, {"wait_L", "L", ""}, {"wait_lambda", "λ", "/s"}, {"wait_prob", "P(wait)", ""},
		{"tps_steady", "tps_steady", "/s"}, {"p99_ms", "p99", "ms"},
	} {
		f, _ := system.FieldByName(k.name)
		mean, half := x.Stat(f)
		if k.name == "wait_W" {
			mean, half = mean*1000, half*1000
		}
		parts = append(parts, fmt.Sprintf("%s = %.4g ± %.2g%s", k.label, mean, half, k.unit))
		p.Inputs = append(p.Inputs, system.Value{Name: k.label, Unit: k.unit, Value: mean},
			system.Value{Name: k.label + " ±", Unit: k.unit, Value: half})
	}
	p.Text = fmt.Sprintf("These figures are over %d replications (independent seeds, the warm-up decided once): means, and "+
		"p99 the percentile of all their samples together; with their 95%% confidence intervals (Student t, and for p99 "+
		"a jackknife over the replications): %s.", len(x.Reps), strings.Join(parts, ", "))
	return p.Finite()
}

// WriteExplanation writes e as text: each row's title and its paragraphs
// wrapped at 100 columns, then the assumptions as a list.
func WriteExplanation(w io.Writer, e Explanation) error {
	var b strings.Builder
	for _, r := range e.Rows {
		fmt.Fprintf(&b, "\n== %s ==\n", r.Title)
		for _, p := range r.Paragraphs {
			fmt.Fprintf(&b, "\n%s\n", Wrap(p.Text, 100))
		}
	}
	fmt.Fprintf(&b, "\nAssumptions (the defaults in effect that change numbers, and what the model leaves out):\n")
	for _, a := range e.Assumptions {
		fmt.Fprintf(&b, "  - %s\n", strings.ReplaceAll(Wrap(a+".", 96), "\n", "\n    "))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write explanation: %w", err)
	}
	return nil
}

// Wrap breaks text into lines of at most width columns at spaces (a word
// longer than width gets a line of its own).
func Wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for i, word := range strings.Fields(text) {
		n := utf8.RuneCountInString(word)
		if i > 0 {
			if col+1+n > width {
				b.WriteByte('\n')
				col = 0
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += n
	}
	return b.String()
}
