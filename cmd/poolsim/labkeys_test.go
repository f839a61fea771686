package main

import (
	"strings"
	"testing"
)

// TestModelHelpHasNoLabKeys: the keys a capacity planner sets are the
// model's; the test machine's and the live run's are poolsim validate's
// (its validate: section) and are listed by its help alone.
func TestModelHelpHasNoLabKeys(t *testing.T) {
	for _, c := range []string{"run", "sweep"} {
		code, out, errOut := runCmd(c, "--help")
		help := out + errOut
		if code != exitOK || !strings.Contains(help, "workload.clients") {
			t.Fatalf("%s --help: exit %d, no key list:\n%s", c, code, help)
		}
		for _, line := range strings.Split(help, "\n") {
			k := strings.Fields(line + " -")[0]
			for _, lab := range []string{"testbed.", "live.", "validate."} {
				if strings.HasPrefix(k, lab) {
					t.Errorf("%s --help lists %s", c, k)
				}
			}
		}
	}
	code, _, errOut := runCmd("validate", "--help")
	for _, k := range []string{"validate.statement", "validate.driver_cpu", "validate.scheduler", "validate.servers_open"} {
		if code != exitOK || !strings.Contains(errOut, "\n  "+k+" ") {
			t.Errorf("validate --help: exit %d, lacks %s", code, k)
		}
	}
}
