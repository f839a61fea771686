package plot

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
)

func rows(xkey string, xs []string, lineKey string, lines []string) []scenarios.Row {
	var out []scenarios.Row
	for i, x := range xs {
		for j, l := range lines {
			out = append(out, scenarios.Row{
				Params: []scenarios.Param{{Key: xkey, Value: x}, {Key: lineKey, Value: l}},
				Result: system.Result{Metrics: system.Metrics{TPS: float64(100 * (i + j + 1)), P50Ms: 1, P99Ms: float64(i + 2), WaitP99Ms: float64(i)}},
			})
		}
	}
	return out
}

func TestDrawSVG(t *testing.T) {
	in := Input{Title: "test sweep", Rows: rows("workload.query", []string{"1ms", "2ms", "5ms"}, "pooler.mode", []string{"session", "transaction"})}
	c, err := Draw(in, true)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"test sweep", "transactions per second", "p99 acquire wait (ms)", "workload.query (ms)", "session", "transaction"} {
		if !strings.Contains(svg, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
}

func TestCategoricalX(t *testing.T) {
	// Only non-numeric keys: modes on the x axis.
	in := Input{Rows: rows("pooler.mode", []string{"session", "transaction"}, "pooler.hop", []string{"a", "b"})}
	if _, err := Draw(in, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Draw(Input{}, false); err == nil {
		t.Error("drew an empty sweep")
	}
}

func TestLooksLog(t *testing.T) {
	if !looksLog([]float64{1, 2, 5, 10, 20, 50, 100}) || looksLog([]float64{1, 2, 3, 4}) || looksLog([]float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 500, 1000}[:10]) {
		t.Error("looksLog misjudges")
	}
	if v, u, ok := number("2.5ms"); !ok || v != 2.5 || u != "ms" {
		t.Errorf("number(2.5ms) = %v %q %v", v, u, ok)
	}
	if v, u, ok := number("120/min"); !ok || v != 2 || u != "per second" {
		t.Errorf("number(120/min) = %v %q %v", v, u, ok)
	}
	if err := CheckPath("x.PNG"); err != nil {
		t.Error(err)
	}
	if err := CheckPath("x.pdf"); err == nil {
		t.Error("accepted .pdf")
	}
}

// A pool-size axis is labelled even over a short range.
func TestSizeTicksLabelled(t *testing.T) {
	for _, r := range [][2]float64{{1, 8}, {1, 177}, {3, 40}} {
		var labels []string
		for _, tk := range (sizeTicks{}).Ticks(r[0], r[1]) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 3 || labels[0] != strconv.FormatFloat(r[0], 'g', -1, 64) || labels[len(labels)-1] != strconv.FormatFloat(r[1], 'g', -1, 64) {
			t.Errorf("%v..%v: labels %v, want both ends and more", r[0], r[1], labels)
		}
	}
}
