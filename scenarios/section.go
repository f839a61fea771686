package scenarios

import (
	"fmt"
	"strings"

	"github.com/poolsim/poolsim/sim"
	"go.yaml.in/yaml/v3"
)

// SectionValidate is the name of the scenario's top-level block that
// poolsim validate reads: how to run the workload live and the test
// machine's model (lab/validate decodes it). A model run ignores it.
const SectionValidate = "validate"

// Section is a top-level block of a scenario that another package owns
// (validate:): its YAML as written, line numbers included, and the --set
// overrides of its keys in order. This package does not read its keys:
// their owner decodes them, as strictly as this package decodes its own
// (an unknown key names itself and its line; every value is checked,
// with the readers below).
type Section struct {
	Name string
	// Node is the block's mapping as written; nil when the scenario has
	// none.
	Node *yaml.Node
	// Sets are the --set NAME.KEY=VALUE overrides of its keys, in the
	// order given: they apply after the block.
	Sets []Override
}

// Override is one --set of a section's key.
type Override struct {
	Key   string     // the key, after the section's name and its dot
	Value *yaml.Node // the value, as YAML
	Flag  string     // as given, for errors: --set validate.KEY=VALUE
}

// setSection records --set key=value for the section it names, if it
// names one, and reports whether it did.
func (s *Scenario) setSection(key, value string) (bool, error) {
	k, ok := strings.CutPrefix(key, SectionValidate+".")
	if !ok {
		return false, nil
	}
	where := fmt.Sprintf("--set %s=%s", key, value)
	if k == "" || strings.Contains(k, ".") {
		return true, fmt.Errorf("%w: %s: want a key of the %s: section such as %s.statement", ErrInvalid, where, SectionValidate, SectionValidate)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &doc); err != nil || len(doc.Content) != 1 {
		return true, fmt.Errorf("%w: %s: the value is not valid YAML", ErrInvalid, where)
	}
	s.Validate.Sets = append(s.Validate.Sets, Override{Key: k, Value: doc.Content[0], Flag: where})
	return true, nil
}

// The readers of a key's value, for a section's owner: each reads a
// YAML node as this package reads its own keys, and its error says what
// is expected.

// ReadScalar reads a single value.
func ReadScalar(n *yaml.Node) (string, error) { return scalar(n) }

// ReadInt reads a whole number from lo to hi.
func ReadInt(n *yaml.Node, lo, hi int64) (int64, error) { return intValue(n, lo, hi) }

// ReadFloat reads a number from lo to hi; want says what is expected.
func ReadFloat(n *yaml.Node, lo, hi float64, want string) (float64, error) {
	var v float64
	err := floatInto(&v, n, lo, hi, want)
	return v, err
}

// ReadBool reads true or false.
func ReadBool(n *yaml.Node) (bool, error) {
	var v bool
	err := boolInto(&v, n)
	return v, err
}

// ReadDuration reads a duration, 0 to a week.
func ReadDuration(n *yaml.Node) (sim.Time, error) { return durationValue(n) }

// ReadDist reads a duration or a distribution (DistHelp).
func ReadDist(n *yaml.Node) (sim.Dist, error) {
	var d sim.Dist
	err := distInto(&d, n)
	return d, err
}

// ReadList reads a non-empty list; what names it in the error.
func ReadList(n *yaml.Node, what string) ([]*yaml.Node, error) { return listValue(n, what) }

// ReadChoice reads one of names and returns its index; any other value
// is an error that lists them.
func ReadChoice(n *yaml.Node, names []string) (int, error) {
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	var i int
	err := choiceInto(&i, n, names, idx)
	return i, err
}

// KindName is how an error names a node's kind: a mapping, a list, a
// value.
func KindName(n *yaml.Node) string { return kindName(n) }

// DidYouMean is "; did you mean `x`?" for the candidate closest to word,
// or "" when none is close.
func DidYouMean(word string, candidates []string) string { return didYouMean(word, candidates) }

// Invalid is an error about a scenario's content at line (0: none) of
// source, wrapping ErrInvalid.
func Invalid(source string, line int, format string, args ...any) error {
	return invalid(source, line, format, args...)
}
