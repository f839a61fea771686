package scenarios

import (
	"fmt"
	"strings"
)

// Override applies what a command line (or the browser page) adds to a
// scenario: seed when seedSet, then each "key=value" of sets in order
// (Set). Every error names the setting at fault; Set's wrap ErrInvalid.
// poolsim run, sweep, advise, validate and the page all call it, so a
// scenario with the same seed and sets is the same scenario everywhere.
func (s *Scenario) Override(seedSet bool, seed uint64, sets []string) error {
	if seedSet {
		if err := s.Set("seed", fmt.Sprint(seed)); err != nil {
			return err
		}
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("--set %q: want key=value, e.g. --set workload.clients=500", kv)
		}
		if err := s.Set(strings.TrimSpace(k), v); err != nil {
			return err
		}
	}
	return nil
}
