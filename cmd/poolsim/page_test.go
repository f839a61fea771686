package main

import (
	"context"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/web/api"
)

// TestPageRunIsCommandLine holds the page's run (web/api, which the wasm
// calls: web's TestWasmSameNumbers holds the wasm to it) byte-identical to
// poolsim run and sweep --format json with the same scenario, seed, sets
// and replications.
func TestPageRunIsCommandLine(t *testing.T) {
	seed := uint64(11)
	cases := []struct {
		args []string
		req  api.RunRequest
	}{
		{[]string{"run", "pgbouncer-modes", "--format", "json"}, api.RunRequest{Scenario: "pgbouncer-modes"}},
		{[]string{"run", "erlang-c", "--format", "json", "--seed", "11", "--replications", "4", "--set", "workload.duration=20s", "--set", "pooler.default_pool_size=11"},
			api.RunRequest{Scenario: "erlang-c", Seed: &seed, Replications: 4, Sets: []string{"workload.duration=20s", "pooler.default_pool_size=11"}}},
		{[]string{"sweep", "pgbouncer-modes", "--format", "json", "-q", "--vary", "pooler.default_pool_size=5,10", "--set", "workload.clients=60"},
			api.RunRequest{Scenario: "pgbouncer-modes", Vary: []string{"pooler.default_pool_size=5,10"}, Sets: []string{"workload.clients=60"}}},
	}
	for _, c := range cases {
		code, out, errOut := runCmd(c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		ans, err := api.Run(context.Background(), c.req)
		if err != nil {
			t.Fatalf("%v: page: %v", c.args, err)
		}
		if ans.Report != out {
			t.Errorf("%v: the page's JSON differs from the command line's:\npage: %.300s\ncli:  %.300s", c.args, ans.Report, out)
		}
		if n := len(ans.Explanation.Rows); strings.Count(out, `"params"`) != n || n == 0 || len(ans.Explanation.Rows[0].Paragraphs) == 0 {
			t.Errorf("%v: %d explanations for %d rows", c.args, n, strings.Count(out, `"params"`))
		}
	}
}
