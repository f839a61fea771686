package scenarios

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// DistHelp describes the distribution forms a duration key accepts, for
// help texts.
const DistHelp = `Distributions (workload.query, cpu, parse, think, server.connect):
  3ms                                          a constant
  {dist: exp, mean: 2ms}                       exponential
  {dist: uniform, min: 1ms, max: 3ms}          uniform
  {dist: lognormal, p50: 2ms, p99: 25ms}       lognormal: mean or p50, with p99 or sigma
  {dist: empirical, samples: [1ms, 2.5ms]}     each recorded value equally likely
  {dist: empirical, buckets: [[1ms, 50], [5ms, 20]]}
                                               a histogram: [upper bound, count], uniform
                                               inside a bucket (min: lower bound of the
                                               first, default 0; cumulative: true for
                                               running totals such as Prometheus' le)
  {dist: empirical, file: times.csv, unit: ms} a file: one value a line, or bound,count;
                                               a path relative to the scenario file
`

// distKeys are the keys a duration distribution mapping may hold.
const distKeys = "dist, mean, p50, p99, sigma, min, max, samples, buckets, file, unit or cumulative"

var distKeySet = map[string]bool{"dist": true, "mean": true, "p50": true, "p99": true, "sigma": true, "min": true,
	"max": true, "samples": true, "buckets": true, "file": true, "unit": true, "cumulative": true}

// distInto reads a duration (a constant) or a distribution mapping:
//
//	{dist: const, mean: 1ms}
//	{dist: exp, mean: 300us}
//	{dist: uniform, min: 100us, max: 500us}
//	{dist: lognormal, mean: 1ms, p99: 5ms}    (mean or p50, with p99 or sigma)
//	{dist: lognormal, p50: 2ms, p99: 25ms}
//	{dist: empirical, samples: [1.2ms, 0.8ms, 3ms]}
//	{dist: empirical, buckets: [[1ms, 50], [2ms, 30], [10ms, 20]]}
//	{dist: empirical, file: times.csv, unit: ms}
//
// See empiricalInto for the empirical forms.
func distInto(dst *sim.Dist, n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		d, err := durationValue(n)
		if err == nil {
			*dst = sim.ConstDist(d)
		}
		return err
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a duration or a mapping such as {dist: exp, mean: 300us}, got a %s", kindName(n))
	}
	m, err := readDistMap(n, distKeySet, "a distribution", distKeys, "const, exp, uniform, lognormal or empirical")
	if err != nil {
		return err
	}
	vals, ks, need := m.vals, m.kind, m.only
	kind, err := sim.ParseDistKind(ks)
	if err != nil {
		return suggestOn(err, ks, []string{"const", "exp", "uniform", "lognormal", "empirical"})
	}
	dur := func(k string) (sim.Time, error) {
		v, ok := vals[k]
		if !ok {
			return 0, fmt.Errorf("dist %s needs %s", ks, k)
		}
		d, err := durationValue(v)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		return d, nil
	}
	switch kind {
	case sim.Const, sim.Exp:
		if err := need("mean"); err != nil {
			return err
		}
		mean, err := dur("mean")
		if err != nil {
			return err
		}
		*dst = sim.Dist{Kind: kind, Mean: mean}
	case sim.Uniform:
		if err := need("min", "max"); err != nil {
			return err
		}
		lo, err := dur("min")
		if err != nil {
			return err
		}
		hi, err := dur("max")
		if err != nil {
			return err
		}
		if hi < lo {
			return fmt.Errorf("uniform: max (%v) is below min (%v)", hi, lo)
		}
		*dst = sim.UniformDist(lo, hi)
	case sim.Lognormal:
		return lognormalInto(dst, vals, need, dur)
	case sim.Empirical:
		if err := need("samples", "buckets", "file", "unit", "min", "cumulative"); err != nil {
			return err
		}
		t, err := empiricalValue(vals)
		if err != nil {
			return err
		}
		*dst = sim.EmpiricalDist(t)
	}
	return nil
}

// lognormalInto reads a lognormal given by one location, mean or p50, and
// one spread, p99 or sigma.
func lognormalInto(dst *sim.Dist, vals map[string]*yaml.Node, need func(...string) error, dur func(string) (sim.Time, error)) error {
	_, hasMean := vals["mean"]
	_, hasP50 := vals["p50"]
	_, hasP99 := vals["p99"]
	_, hasSigma := vals["sigma"]
	if hasMean == hasP50 || hasP99 == hasSigma {
		return fmt.Errorf("dist lognormal needs one of mean or p50 and one of p99 or sigma, e.g. {dist: lognormal, p50: 2ms, p99: 25ms}")
	}
	loc, spread := "mean", "p99"
	if hasP50 {
		loc = "p50"
	}
	if hasSigma {
		spread = "sigma"
	}
	if err := need(loc, spread); err != nil {
		return err
	}
	at, err := dur(loc)
	if err != nil {
		return err
	}
	if at <= 0 {
		return fmt.Errorf("lognormal: %s must be above 0", loc)
	}
	if hasP99 {
		p99, err := dur("p99")
		if err != nil {
			return err
		}
		var d sim.Dist
		if hasP50 {
			if p99 <= at {
				return fmt.Errorf("lognormal: p99 (%v) must be above p50 (%v): a lognormal's p99 is always above its median", p99, at)
			}
			d, err = sim.LognormalMedianP99(at, p99)
		} else {
			d, err = sim.LognormalP99(at, p99)
		}
		if err != nil {
			return err
		}
		*dst = d
		return nil
	}
	s, err := scalar(vals["sigma"])
	if err != nil {
		return fmt.Errorf("sigma: %w", err)
	}
	sigma, err := strconv.ParseFloat(s, 64)
	if err != nil || !(sigma >= 0 && sigma <= 5) {
		return fmt.Errorf("sigma: want a number from 0 to 5, got %q", s)
	}
	if hasP50 {
		*dst = sim.LognormalMedianSigma(at, sigma)
		if dst.Mean > sim.FromDuration(maxDuration) {
			return fmt.Errorf("lognormal: the mean (%v) of p50 %v and sigma %v is above %v", dst.Mean, at, sigma, maxDuration)
		}
		return nil
	}
	*dst = sim.LognormalDist(at, sigma)
	return nil
}

// intDistKeys are the keys an integer distribution mapping may hold.
const intDistKeys = "dist, value, min, max, samples, values, weights or file"

var intDistKeySet = map[string]bool{"dist": true, "value": true, "min": true, "max": true, "samples": true,
	"values": true, "weights": true, "file": true}

// intDistInto reads a whole number (a constant) or an integer distribution
// whose every value lies in lo..hi:
//
//	{dist: const, value: 2}
//	{dist: uniform, min: 1, max: 3}           (each of 1, 2, 3 equally likely)
//	{dist: empirical, samples: [1, 1, 2, 3]}  (each recorded count equally likely)
//	{dist: empirical, values: [1, 2, 3], weights: [60, 30, 10]}
//	{dist: empirical, file: txns.csv}         (one column: samples; two: value, weight)
func intDistInto(dst *sim.IntDist, n *yaml.Node, lo, hi int64) error {
	if n.Kind == yaml.ScalarNode {
		v, err := intValue(n, lo, hi)
		if err == nil {
			*dst = sim.ConstInt(int(v))
		}
		return err
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("want a whole number or a mapping such as {dist: uniform, min: 1, max: 3}, got a %s", kindName(n))
	}
	m, err := readDistMap(n, intDistKeySet, "an integer distribution", intDistKeys, "const, uniform or empirical")
	if err != nil {
		return err
	}
	vals, ks, only := m.vals, m.kind, m.only
	kind, err := sim.ParseIntKind(ks)
	if err != nil {
		return suggestOn(err, ks, []string{"const", "uniform", "empirical"})
	}
	num := func(k string) (int, error) {
		v, ok := vals[k]
		if !ok {
			return 0, fmt.Errorf("dist %s needs %s", ks, k)
		}
		x, err := intValue(v, lo, hi)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", k, err)
		}
		return int(x), nil
	}
	switch kind {
	case sim.IntConst:
		if err := only("value"); err != nil {
			return err
		}
		v, err := num("value")
		if err != nil {
			return err
		}
		*dst = sim.ConstInt(v)
	case sim.IntUniform:
		if err := only("min", "max"); err != nil {
			return err
		}
		a, err := num("min")
		if err != nil {
			return err
		}
		b, err := num("max")
		if err != nil {
			return err
		}
		d, err := sim.UniformInt(a, b)
		if err != nil {
			return err
		}
		*dst = d
	case sim.IntEmpirical:
		if err := only("samples", "values", "weights", "file"); err != nil {
			return err
		}
		d, err := intEmpiricalValue(vals, lo, hi)
		if err != nil {
			return err
		}
		*dst = d
	}
	return nil
}

// number reads a finite number (a weight or a count).
func number(n *yaml.Node) (float64, error) {
	s, err := scalar(n)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("want a number at or above 0, got %q", s)
	}
	return v, nil
}

// distMap is a distribution mapping's keys, read and checked.
type distMap struct {
	node *yaml.Node
	kind string // the value of dist:
	vals map[string]*yaml.Node
}

// readDistMap reads a distribution mapping whose keys must be in allowed
// (listed as keys in errors) and which must name its dist: (one of kinds).
func readDistMap(n *yaml.Node, allowed map[string]bool, what, keys, kinds string) (*distMap, error) {
	m := &distMap{node: n, vals: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i].Value
		if !allowed[k] {
			var names []string
			for name := range allowed {
				names = append(names, name)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("line %d: unknown key %q in %s: want %s%s", n.Content[i].Line, k, what, keys, didYouMean(k, names))
		}
		if _, dup := m.vals[k]; dup {
			return nil, fmt.Errorf("line %d: key %q repeated", n.Content[i].Line, k)
		}
		m.vals[k] = n.Content[i+1]
	}
	kn, ok := m.vals["dist"]
	if !ok {
		return nil, fmt.Errorf("%s needs dist: %s", what, kinds)
	}
	var err error
	if m.kind, err = scalar(kn); err != nil {
		return nil, fmt.Errorf("dist: %w", err)
	}
	return m, nil
}

// only reports the first key, in the order written, that the distribution
// does not take (besides dist).
func (m *distMap) only(keys ...string) error {
	for i := 0; i+1 < len(m.node.Content); i += 2 {
		k := m.node.Content[i]
		if k.Value != "dist" && !slices.Contains(keys, k.Value) {
			return fmt.Errorf("line %d: %q does not apply to dist %s (it takes %s)", k.Line, k.Value, m.kind, strings.Join(keys, ", "))
		}
	}
	return nil
}
