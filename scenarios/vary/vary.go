// Package vary parses the values of a sweep axis as written on the command
// line (poolsim sweep --vary key=values, poolsim advise --pool-sizes):
//
//	1,2,5,10                 a list (YAML flow items, so {dist: exp, mean: 1ms} works too)
//	1..150                   every whole number from 1 to 150
//	10..100/10               from 10 to 100 in steps of 10 (also 1ms..10ms/1ms, 0.1..1/0.1)
//	1..150/log               log-spaced: 10 points per decade, both ends included,
//	                         rounded to whole numbers and deduplicated for whole-number ends
//	1..150/log20             log-spaced: 20 points in all before deduplication
//	10ms..100ms/log          durations, rounded to 3 significant figures
//	10/s..1000/s/log         rates (also /min, /h), as for numbers
//
// Values are plain text, exactly as they will appear in the scenario's
// sweep; the scenario's own validation decides whether they suit the key.
package vary

import (
	"errors"
	"fmt"
	"github.com/poolsim/poolsim/scenarios"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxValues bounds one axis, so a typo such as 1..1e9 fails at once.
const MaxValues = 100_000

// PerDecade is how many log-spaced points /log puts in each factor of ten.
const PerDecade = 10

// Axis is one parsed --vary: a key and its values in order.
type Axis struct {
	Key    string
	Values []*yaml.Node
	// Log is set when the values came from a /log range (plots then use a
	// log axis).
	Log bool
}

// Texts are the values as text.
func (a Axis) Texts() []string {
	out := make([]string, len(a.Values))
	for i, v := range a.Values {
		out[i] = scenarios.ValueText(v)
	}
	return out
}

// ErrSyntax wraps every parse error.
var ErrSyntax = errors.New("bad --vary")

// Parse reads "key=values".
func Parse(spec string) (Axis, error) {
	key, vals, ok := strings.Cut(spec, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return Axis{}, fmt.Errorf("%w %q: want key=values, e.g. --vary workload.clients=10..400/log or --vary pooler.mode=session,transaction", ErrSyntax, spec)
	}
	nodes, log, err := Values(vals)
	if err != nil {
		return Axis{}, fmt.Errorf("%w %s: %v", ErrSyntax, spec, err)
	}
	return Axis{Key: key, Values: nodes, Log: log}, nil
}

// Values reads a list or a range; log reports a /log range.
func Values(s string) (nodes []*yaml.Node, log bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, false, errors.New("no values: want a list such as 1,2,5 or a range such as 1..150 or 1..150/log")
	}
	if !strings.HasPrefix(s, "{") && !strings.HasPrefix(s, "[") && strings.Contains(s, "..") && !strings.Contains(s, ",") {
		texts, log, err := Range(s)
		if err != nil {
			return nil, false, err
		}
		for _, t := range texts {
			nodes = append(nodes, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t})
		}
		return nodes, log, nil
	}
	flow := s
	if !strings.HasPrefix(s, "[") {
		flow = "[" + s + "]"
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(flow), &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode {
		return nil, false, fmt.Errorf("%q is not a list of values such as 1,2,5 or session,transaction", s)
	}
	for _, n := range doc.Content[0].Content {
		if n.Kind == yaml.ScalarNode && n.Value == "" {
			return nil, false, fmt.Errorf("%q has an empty value", s)
		}
		nodes = append(nodes, n)
	}
	if len(nodes) == 0 {
		return nil, false, errors.New("no values")
	}
	if len(nodes) > MaxValues {
		return nil, false, fmt.Errorf("%d values, more than %d", len(nodes), MaxValues)
	}
	return nodes, false, nil
}

// kind is what a range's ends are.
type kind int

const (
	kInt kind = iota
	kFloat
	kDuration
	kRate
)

// quantity is a parsed range end: its value in base units (a count, a
// number, nanoseconds, or events per unit) and how to print values.
type quantity struct {
	k    kind
	v    float64
	unit string // rate unit: "s", "min", "h", "ms"
}

func parseQuantity(s string) (quantity, error) {
	s = strings.TrimSpace(s)
	if num, unit, ok := strings.Cut(s, "/"); ok {
		switch unit {
		case "s", "ms", "min", "h":
		default:
			return quantity{}, fmt.Errorf("%q: a rate is a number per s, ms, min or h, e.g. 80/s", s)
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return quantity{}, fmt.Errorf("%q is not a rate such as 80/s", s)
		}
		return quantity{k: kRate, v: v, unit: unit}, nil
	}
	if v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64); err == nil {
		return quantity{k: kInt, v: float64(v)}, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
		return quantity{k: kFloat, v: v}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return quantity{k: kDuration, v: float64(d)}, nil
	}
	return quantity{}, fmt.Errorf("%q is not a number, a duration (10ms) or a rate (80/s)", s)
}

func (q quantity) format(v float64) string {
	switch q.k {
	case kInt:
		return strconv.FormatInt(int64(math.Round(v)), 10)
	case kDuration:
		return time.Duration(math.Round(v)).String()
	case kRate:
		return strconv.FormatFloat(v, 'g', -1, 64) + "/" + q.unit
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// round3 rounds to 3 significant figures (log-spaced durations, rates and
// numbers print short).
func round3(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return r
}

// Range expands "A..B", "A..B/step", "A..B/log" or "A..B/logN" into value
// texts.
func Range(s string) (texts []string, log bool, err error) {
	lo, rest, _ := strings.Cut(s, "..")
	hi, spec := rest, ""
	// The step or /log follows the last slash that is not a rate's unit.
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		tail := rest[i+1:]
		switch tail {
		case "s", "ms", "min", "h":
			// "100/s": a rate end without a step, unless it is "…/s/…"
		default:
			hi, spec = rest[:i], tail
		}
	}
	a, err := parseQuantity(lo)
	if err != nil {
		return nil, false, fmt.Errorf("range %q: %v", s, err)
	}
	b, err := parseQuantity(hi)
	if err != nil {
		return nil, false, fmt.Errorf("range %q: %v", s, err)
	}
	if a.k == kInt && b.k == kFloat || a.k == kFloat && b.k == kInt {
		a.k, b.k = kFloat, kFloat
	}
	if a.k != b.k || a.unit != b.unit {
		return nil, false, fmt.Errorf("range %q: both ends must be the same kind (numbers, durations, or rates with the same unit)", s)
	}
	if b.v < a.v {
		return nil, false, fmt.Errorf("range %q: the end is below the start", s)
	}
	q := a
	var vals []float64
	switch {
	case strings.HasPrefix(spec, "log"):
		log = true
		if a.v <= 0 {
			return nil, false, fmt.Errorf("range %q: a /log range must start above 0", s)
		}
		n := 0
		if c := strings.TrimPrefix(spec, "log"); c != "" {
			n, err = strconv.Atoi(c)
			if err != nil || n < 2 || n > MaxValues {
				return nil, false, fmt.Errorf("range %q: /logN wants a count N from 2 to %d, got %q", s, MaxValues, c)
			}
		} else {
			n = int(math.Ceil(math.Log10(b.v/a.v)*PerDecade)) + 1
		}
		if a.v == b.v {
			n = 1
		}
		for i := range n {
			v := a.v
			if n > 1 {
				v = math.Exp(math.Log(a.v) + (math.Log(b.v)-math.Log(a.v))*float64(i)/float64(n-1))
			}
			switch i {
			case 0:
				v = a.v
			case n - 1:
				v = b.v
			}
			if q.k != kInt && i > 0 && i < n-1 {
				v = round3(v)
			}
			vals = append(vals, v)
		}
	case spec == "":
		if q.k != kInt {
			return nil, false, fmt.Errorf("range %q: a range of durations, rates or fractions needs a step or /log, e.g. 10ms..100ms/10ms or 10ms..100ms/log", s)
		}
		if b.v-a.v+1 > MaxValues {
			return nil, false, fmt.Errorf("range %q: %d values, more than %d", s, int64(b.v-a.v+1), MaxValues)
		}
		for v := a.v; v <= b.v; v++ {
			vals = append(vals, v)
		}
	default:
		step, err := parseQuantity(spec)
		if err != nil {
			return nil, false, fmt.Errorf("range %q: the part after / is a step (10, 10ms) or log, log20: %v", s, err)
		}
		if step.k == kInt && q.k == kFloat {
			step.k = kFloat
		}
		if step.k != q.k && !(q.k == kRate && (step.k == kInt || step.k == kFloat)) {
			return nil, false, fmt.Errorf("range %q: the step must be the same kind as the ends", s)
		}
		if step.v <= 0 {
			return nil, false, fmt.Errorf("range %q: the step must be above 0", s)
		}
		if q.k == kInt && step.k != kInt {
			return nil, false, fmt.Errorf("range %q: a range of whole numbers needs a whole step", s)
		}
		count := math.Floor((b.v-a.v)/step.v*(1+1e-12)) + 1
		if count > MaxValues {
			return nil, false, fmt.Errorf("range %q: %.0f values, more than %d", s, count, MaxValues)
		}
		for i := range int(count) {
			v := a.v + float64(i)*step.v
			if q.k == kFloat || q.k == kRate {
				v = math.Round(v*1e9) / 1e9 // 0.1+0.2 prints 0.3
			}
			vals = append(vals, v)
		}
	}
	seen := map[string]bool{}
	for _, v := range vals {
		t := q.format(v)
		if !seen[t] {
			seen[t] = true
			texts = append(texts, t)
		}
	}
	if len(texts) > MaxValues {
		return nil, false, fmt.Errorf("range %q: %d values, more than %d", s, len(texts), MaxValues)
	}
	return texts, log, nil
}

// Ints reads a list or range of whole numbers (advise --pool-sizes).
func Ints(s string) ([]int, bool, error) {
	nodes, log, err := Values(s)
	if err != nil {
		return nil, false, err
	}
	out := make([]int, 0, len(nodes))
	for _, n := range nodes {
		v, err := strconv.Atoi(scenarios.ValueText(n))
		if err != nil {
			return nil, false, fmt.Errorf("%q is not a whole number", scenarios.ValueText(n))
		}
		out = append(out, v)
	}
	return out, log, nil
}
