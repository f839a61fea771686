package scenarios

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/system"
	"go.yaml.in/yaml/v3"
)

// Scenario is a loaded scenario: a base system, and the sweep that varies it.
type Scenario struct {
	Name        string
	Description string
	Source      string // the file it came from, or "builtin:NAME"
	Base        system.Config
	Sweep       []Axis
	Variants    []Variant // named sets of overrides, swept with the key "variant"
	Study       Study     // replications: and precision:, for every point
	// Validate is the validate: block, poolsim validate's (how to run the
	// workload live, and the test machine's model): kept as written for
	// lab/validate to decode; a model run ignores it.
	Validate Section
}

// Variant is a named set of overrides (the variants: block), such as a
// light and a heavy query, that the sweep key "variant" selects.
type Variant struct {
	Name string
	Keys []string
	Vals []*yaml.Node
}

// VariantKey is the sweep key that selects a variant by name.
const VariantKey = "variant"

// setter returns how to set key: a field, or the variant key.
func (s *Scenario) setter(key string) (func(*system.Config, *yaml.Node) error, bool) {
	if key == VariantKey && len(s.Variants) > 0 {
		return s.applyVariant, true
	}
	return setterFor(key)
}

func (s *Scenario) applyVariant(c *system.Config, n *yaml.Node) error {
	name, err := scalar(n)
	if err != nil {
		return err
	}
	var names []string
	for _, v := range s.Variants {
		if v.Name == name {
			for i, k := range v.Keys {
				set, _ := setterFor(k)
				if err := set(c, v.Vals[i]); err != nil {
					return fmt.Errorf("variant %s: %s: %v", name, k, err)
				}
			}
			return nil
		}
		names = append(names, v.Name)
	}
	return fmt.Errorf("unknown variant %q: want one of %s", name, strings.Join(names, ", "))
}

// Axis is one swept key with its values, in the order written.
type Axis struct {
	Key    string
	Values []*yaml.Node
}

// ErrInvalid wraps every error about a scenario's content or an override,
// so callers can tell a bad scenario (a usage error) from other failures.
var ErrInvalid = errors.New("invalid scenario")

// ErrNotFound is returned when a name is neither a file nor a built-in.
var ErrNotFound = errors.New("no such scenario")

func invalid(source string, line int, format string, args ...any) error {
	where := source
	if line > 0 {
		where = fmt.Sprintf("%s:%d", source, line)
	}
	return fmt.Errorf("%w: %s: %s", ErrInvalid, where, fmt.Sprintf(format, args...))
}

//go:embed builtin/*.yaml
var builtinFS embed.FS

// Info names a built-in scenario.
type Info struct{ Name, Description string }

// Builtins lists the built-in scenarios, sorted by name.
func Builtins() []Info {
	entries, _ := fs.ReadDir(builtinFS, "builtin")
	var out []Info
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".yaml")
		s, err := Builtin(name)
		if err != nil {
			panic(fmt.Sprintf("scenarios: built-in %s does not load: %v", name, err))
		}
		out = append(out, Info{s.Name, s.Description})
	}
	return out
}

// Builtin loads the built-in scenario name.
func Builtin(name string) (*Scenario, error) {
	data, err := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	return Parse(data, "builtin:"+name)
}

// BuiltinYAML is the text of the built-in scenario name.
func BuiltinYAML(name string) ([]byte, error) {
	data, err := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q", ErrNotFound, name)
	}
	return data, nil
}

// Load reads a scenario from a YAML file, or, when no such file exists and
// the argument is a plain name, the built-in scenario of that name.
func Load(nameOrPath string) (*Scenario, error) {
	data, err := os.ReadFile(nameOrPath)
	if err == nil {
		return Parse(data, nameOrPath)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	if strings.ContainsAny(nameOrPath, "/.") {
		return nil, fmt.Errorf("%w: %s: file not found", ErrNotFound, nameOrPath)
	}
	s, err := Builtin(nameOrPath)
	if err != nil {
		var names []string
		for _, b := range Builtins() {
			names = append(names, b.Name)
		}
		return nil, fmt.Errorf("%w %q: not a file, and the built-ins are %s", ErrNotFound, nameOrPath, strings.Join(names, ", "))
	}
	return s, nil
}

// Parse reads scenario YAML; source names it in errors.
func Parse(data []byte, source string) (*Scenario, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if l := tabLine(data); l > 0 {
			return nil, invalid(source, l, "tab character at line %d: YAML indents with spaces", l)
		}
		return nil, invalid(source, 0, "not valid YAML: %v", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, invalid(source, extra.Line, "more than one YAML document; a scenario is one")
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, invalid(source, doc.Line, "a scenario is a mapping with name, workload, pooler, server and sweep")
	}
	if err := resolveDataFiles(&doc, source); err != nil {
		return nil, err
	}
	s := &Scenario{Source: source, Base: system.Default(), Validate: Section{Name: SectionValidate}}
	if err := s.parseTop(doc.Content[0]); err != nil {
		return nil, err
	}
	if s.Name == "" {
		return nil, invalid(source, 0, "name is missing")
	}
	// Every point must be valid; checking them all here means a run never
	// starts on a scenario that fails half-way.
	if _, err := s.Points(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Scenario) parseTop(m *yaml.Node) error {
	seen := map[string]int{}
	var sweep *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			return invalid(s.Source, k.Line, "key %q repeated (first on line %d)", k.Value, line)
		}
		seen[k.Value] = k.Line
		switch k.Value {
		case "name", "description":
			str, err := scalar(v)
			if err != nil {
				return invalid(s.Source, v.Line, "%s: %v", k.Value, err)
			}
			if k.Value == "name" {
				s.Name = str
			} else {
				s.Description = str
			}
		case "seed":
			if err := s.setNode("seed", v); err != nil {
				return err
			}
		case "replications":
			n, err := intValue(v, 1, MaxReplications)
			if err != nil {
				return invalid(s.Source, v.Line, "replications: %v", err)
			}
			s.Study.Replications = int(n)
		case "precision":
			str, err := scalar(v)
			if err == nil {
				s.Study.Precision, err = ParsePrecision(str)
			}
			if err != nil {
				return invalid(s.Source, v.Line, "precision: %v", err)
			}
		case "workload", "app_pool", "pooler", "server":
			if err := s.parseSection(k.Value, v); err != nil {
				return err
			}
		case SectionValidate:
			if v.Kind != yaml.MappingNode {
				return invalid(s.Source, v.Line, "%s must be a mapping of poolsim validate's settings (poolsim validate --help lists them)", k.Value)
			}
			s.Validate.Node = v
		case "sweep":
			sweep = v // after variants, wherever it is written
		case "variants":
			if err := s.parseVariants(v); err != nil {
				return err
			}
		case "classes":
			if err := s.parseClasses(v); err != nil {
				return err
			}
		case "pools":
			if err := s.parsePools(v); err != nil {
				return err
			}
		default:
			return invalid(s.Source, k.Line, "unknown key %q: want name, description, seed, replications, precision, workload, app_pool, pooler, server, validate, classes, pools, variants or sweep%s", k.Value, didYouMean(k.Value, topKeys))
		}
	}
	if sweep != nil {
		return s.parseSweep(sweep)
	}
	return nil
}

// topKeys are the keys a scenario's top level accepts.
var topKeys = []string{"name", "description", "seed", "replications", "precision", "workload", "app_pool", "pooler", "server", "validate", "classes", "pools", "variants", "sweep"}

func (s *Scenario) parseVariants(m *yaml.Node) error {
	if m.Kind != yaml.MappingNode || len(m.Content) == 0 {
		return invalid(s.Source, m.Line, "variants must map names to sets of overrides, e.g. heavy: {workload.query: 5ms}")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		for _, o := range s.Variants {
			if o.Name == k.Value {
				return invalid(s.Source, k.Line, "variant %q repeated", k.Value)
			}
		}
		if v.Kind != yaml.MappingNode {
			return invalid(s.Source, v.Line, "variant %s must map dotted keys to values, e.g. {workload.query: 5ms}", k.Value)
		}
		vr := Variant{Name: k.Value}
		for j := 0; j+1 < len(v.Content); j += 2 {
			key, val := v.Content[j], v.Content[j+1]
			set, ok := setterFor(key.Value)
			if !ok && strings.HasPrefix(key.Value, SectionValidate+".") {
				return invalid(s.Source, key.Line, "variant %s: %s is poolsim validate's (the validate: section), which a variant does not vary", k.Value, key.Value)
			}
			if !ok {
				return invalid(s.Source, key.Line, "variant %s: unknown key %q: want a dotted key such as workload.query%s", k.Value, key.Value, didYouMean(key.Value, allKeys()))
			}
			probe := s.Base.Clone()
			if err := set(&probe, val); err != nil {
				return invalid(s.Source, val.Line, "variant %s: %s: %v", k.Value, key.Value, err)
			}
			vr.Keys = append(vr.Keys, key.Value)
			vr.Vals = append(vr.Vals, val)
		}
		s.Variants = append(s.Variants, vr)
	}
	return nil
}

func (s *Scenario) parseSection(name string, m *yaml.Node) error {
	if m.Kind != yaml.MappingNode {
		return invalid(s.Source, m.Line, "%s must be a mapping of its settings (%s)", name, strings.Join(keysUnder(name), ", "))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if line, dup := seen[k.Value]; dup {
			return invalid(s.Source, k.Line, "key %s.%s repeated (first on line %d)", name, k.Value, line)
		}
		seen[k.Value] = k.Line
		if _, ok := lookup(name + "." + k.Value); !ok {
			return invalid(s.Source, k.Line, "unknown key %q in %s: want one of %s%s", k.Value, name, strings.Join(keysUnder(name), ", "), didYouMean(k.Value, keysUnder(name)))
		}
	}
	if l, t := seen["txns_per_session"]; t {
		for _, k := range []string{"requests_per_session", "txns_per_request"} {
			if _, r := seen[k]; r {
				return invalid(s.Source, l, "workload has both txns_per_session and %s: a session of requests says how many transactions with txns_per_request", k)
			}
		}
	}
	if l, msg := workersConflict(seen); msg != "" {
		return invalid(s.Source, l, "%s", msg)
	}
	if _, c := seen["clients"]; c {
		if l, a := seen["arrival_rate"]; a {
			return invalid(s.Source, l, "workload has both clients and arrival_rate: a closed workload has clients, an open one arrival_rate and duration")
		}
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if err := s.setNode(name+"."+m.Content[i].Value, m.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scenario) parseSweep(m *yaml.Node) error {
	if m.Kind != yaml.MappingNode {
		return invalid(s.Source, m.Line, "sweep must map keys to lists of values, e.g. pooler.mode: [session, transaction]")
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		set, ok := s.setter(k.Value)
		if !ok && strings.HasPrefix(k.Value, SectionValidate+".") {
			return invalid(s.Source, k.Line, "sweep: %s is poolsim validate's (the validate: section), which a sweep does not vary", k.Value)
		}
		if !ok {
			return invalid(s.Source, k.Line, "sweep: unknown key %q: want a dotted key such as workload.clients or pooler.mode%s", k.Value, didYouMean(k.Value, allKeys()))
		}
		for _, a := range s.Sweep {
			if a.Key == k.Value {
				return invalid(s.Source, k.Line, "sweep: key %q repeated", k.Value)
			}
		}
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return invalid(s.Source, v.Line, "sweep: %s must be a non-empty list of values", k.Value)
		}
		for _, val := range v.Content {
			probe := s.Base.Clone()
			if err := set(&probe, val); err != nil {
				return invalid(s.Source, val.Line, "sweep: %s: %v", k.Value, err)
			}
		}
		s.Sweep = append(s.Sweep, Axis{Key: k.Value, Values: v.Content})
	}
	return nil
}

func (s *Scenario) setNode(key string, v *yaml.Node) error {
	set, ok := setterFor(key)
	if !ok {
		return invalid(s.Source, v.Line, "unknown key %q", key)
	}
	if err := set(&s.Base, v); err != nil {
		return invalid(s.Source, v.Line, "%s: %v", key, err)
	}
	return nil
}

// Set overrides one field by its dotted key with a value written as in
// YAML (a scalar such as 500 or 2ms, or a flow mapping such as
// {dist: exp, mean: 1ms}). Setting a swept key replaces its sweep axis
// with the single value.
//
// A key of the validate: section (validate.KEY) is recorded for its
// owner, poolsim validate, which reads it after the section's own
// (Section.Sets); a model run ignores it.
func (s *Scenario) Set(key, value string) error {
	if ok, err := s.setSection(key, value); ok {
		return err
	}
	where := fmt.Sprintf("--set %s=%s", key, value)
	set, ok := s.setter(key)
	if !ok {
		var all []string
		for _, f := range fields {
			all = append(all, f.key)
		}
		if hint := didYouMean(key, all); hint != "" {
			return fmt.Errorf("%w: %s: unknown key `%s`%s (poolsim run --help lists every key)", ErrInvalid, where, key, hint)
		}
		return fmt.Errorf("%w: %s: unknown key %q: want one of %s", ErrInvalid, where, key, strings.Join(all, ", "))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil || len(doc.Content) != 1 {
		return fmt.Errorf("%w: %s: the value is not valid YAML", ErrInvalid, where)
	}
	base := s.Base.Clone()
	if err := set(&base, doc.Content[0]); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
	}
	s.Base = base
	for i, a := range s.Sweep {
		if a.Key == key {
			s.Sweep = append(s.Sweep[:i], s.Sweep[i+1:]...)
			break
		}
	}
	if _, err := s.Points(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

// ParsePrecision reads a relative precision goal: "2%" or 0.02, above 0
// and below 1.
func ParsePrecision(text string) (float64, error) {
	t := strings.TrimSpace(text)
	scale := 1.0
	if p, ok := strings.CutSuffix(t, "%"); ok {
		t, scale = strings.TrimSpace(p), 0.01
	}
	v, err := strconv.ParseFloat(t, 64)
	v *= scale
	if err != nil || !(v > 0 && v < 1) {
		return 0, fmt.Errorf("want a relative half-width such as 2%% or 0.02 (above 0, below 100%%), got %q", text)
	}
	return v, nil
}

// Param is one swept key's value at a point.
type Param struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Point is one run of the sweep: its parameters and its full system.
type Point struct {
	Params []Param
	Config system.Config
}

// MaxPoints bounds the points of one sweep, so a typo cannot exhaust memory.
const MaxPoints = 100_000

// Points expands the sweep into its runs: the cartesian product of the
// axes, the first key outermost, so rows come in the order written. A
// scenario without a sweep has one point.
func (s *Scenario) Points() ([]Point, error) {
	total := 1
	for _, a := range s.Sweep {
		total *= len(a.Values)
		if total > MaxPoints {
			return nil, fmt.Errorf("%w: %s: the sweep has more than %d points; split it (poolsim sweep --shard) or vary fewer values", ErrInvalid, s.Source, MaxPoints)
		}
	}
	points := []Point{{Config: s.Base.Clone()}}
	for _, a := range s.Sweep {
		set, _ := s.setter(a.Key)
		next := make([]Point, 0, len(points)*len(a.Values))
		for _, p := range points {
			for _, v := range a.Values {
				q := Point{Params: append(append([]Param(nil), p.Params...), Param{a.Key, ValueText(v)}), Config: p.Config.Clone()}
				if err := set(&q.Config, v); err != nil {
					return nil, invalid(s.Source, v.Line, "sweep: %s: %v", a.Key, err)
				}
				next = append(next, q)
			}
		}
		points = next
	}
	for _, p := range points {
		if err := p.Config.Validate(); err != nil {
			where := ""
			for _, pr := range p.Params {
				where += fmt.Sprintf(" %s=%s", pr.Key, pr.Value)
			}
			if where != "" {
				where = " (at" + where + ")"
			}
			return nil, fmt.Errorf("%w: %s%s: %s", ErrInvalid, s.Source, where, strings.TrimPrefix(err.Error(), system.ErrInvalid.Error()+": "))
		}
	}
	return points, nil
}

// ValueText is a value as written: the scalar, or a flow-style mapping.
func ValueText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// workersConflict finds a workload key that does not go with workers
// among the keys of one workload mapping (key -> line): its line and why.
func workersConflict(seen map[string]int) (int, string) {
	if _, w := seen["workers"]; !w {
		return 0, ""
	}
	for _, k := range []struct{ key, why string }{
		{"clients", "the workers are the application's connections; requests come at arrival_rate"},
		{"requests_per_session", "a worker's connection lasts the whole run and takes request after request; say how many transactions a request runs with txns_per_request"},
		{"txns_per_session", "each request runs txns_per_request transactions"},
		{"think", "a worker takes the next request as soon as it is free, and the time between requests is the arrivals'; application time inside a request is app"},
	} {
		if l, ok := seen[k.key]; ok {
			return l, fmt.Sprintf("workload has both workers and %s: %s", k.key, k.why)
		}
	}
	return 0, ""
}
