package vary

import (
	"errors"
	"strings"

	"github.com/poolsim/poolsim/scenarios"
)

// Apply checks every value of axes against sc (so a bad value is named as
// --vary key=value) and makes them sc's sweep, the first axis outermost,
// followed by sc's own sweep axes for other keys unless dropSweep. poolsim
// sweep and the browser page both call it.
func Apply(sc *scenarios.Scenario, axes []Axis, dropSweep bool) error {
	for _, a := range axes {
		for _, t := range a.Texts() {
			probe := *sc
			probe.Sweep = nil
			if err := probe.Set(a.Key, t); err != nil {
				msg := strings.Replace(err.Error(), "--set "+a.Key+"="+t, "--vary "+a.Key+"="+t, 1)
				return errors.New(msg)
			}
		}
	}
	var sweep []scenarios.Axis
	for _, a := range axes {
		sweep = append(sweep, scenarios.Axis{Key: a.Key, Values: a.Values})
	}
	if !dropSweep {
	outer:
		for _, s := range sc.Sweep {
			for _, a := range axes {
				if a.Key == s.Key {
					continue outer
				}
			}
			sweep = append(sweep, s)
		}
	}
	sc.Sweep = sweep
	return nil
}
