package main

import (
	"encoding/json"
	"strings"
	"testing"
)

type poolsAdviceDoc struct {
	Answer         string `json:"answer"`
	Budget         int    `json:"server_conns_budget"`
	MaxConnections int    `json:"max_connections"`
	Pools          []struct {
		Name    string   `json:"name"`
		Mode    string   `json:"mode"`
		Size    int      `json:"size"`
		Kept    bool     `json:"kept"`
		Classes []string `json:"classes"`
		Lead    string   `json:"decided_by"`
		Advice  struct {
			Latency string `json:"slo_applies_to"`
			Modes   []struct {
				Mode    string `json:"mode"`
				Allowed bool   `json:"allowed"`
			} `json:"modes"`
		} `json:"advice"`
	} `json:"pools"`
	Classes []struct {
		Name    string   `json:"name"`
		Latency string   `json:"slo_applies_to"`
		Meets   bool     `json:"meets"`
		Fails   []string `json:"fails"`
	} `json:"classes"`
}

// The Django case: a transaction pool for the web (its SLO on the request
// p99), a pool that keeps WITH HOLD cursors for the report job, one budget.
func TestAdvisePerPool(t *testing.T) {
	code, out, errOut := runCmd("advise", "web-and-report", "--slo-p99", "web=150ms", "--features", "report=with_hold",
		"--replications", "2", "--pool-sizes", "20,30,40,60", "--format", "json", "--quiet")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var a poolsAdviceDoc
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(a.Pools) != 2 || a.Pools[0].Name != "web" || a.Pools[1].Name != "report" {
		t.Fatalf("pools %+v: want web and report", a.Pools)
	}
	web, rep := a.Pools[0], a.Pools[1]
	if web.Mode != "transaction" || web.Kept || web.Advice.Latency != "req_p99_ms" || web.Lead != "web" {
		t.Errorf("web pool: %s %d (kept %v), SLO on %q, decided by %s; want transaction, the request p99, web", web.Mode, web.Size, web.Kept, web.Advice.Latency, web.Lead)
	}
	for _, m := range rep.Advice.Modes {
		if (m.Mode == "transaction" || m.Mode == "statement") && m.Allowed {
			t.Errorf("report pool: %s allowed though it breaks WITH HOLD cursors", m.Mode)
		}
	}
	if rep.Mode != "session" && rep.Mode != "direct" {
		t.Errorf("report pool: %s, want session or direct (WITH HOLD cursors)", rep.Mode)
	}
	if a.Budget > a.MaxConnections || a.Budget < web.Size {
		t.Errorf("budget %d of %d with web at %d", a.Budget, a.MaxConnections, web.Size)
	}
	for _, c := range a.Classes {
		if !c.Meets {
			t.Errorf("class %s misses at the answer: %v", c.Name, c.Fails)
		}
	}
	if !strings.HasPrefix(a.Answer, "web: transaction, ") || !strings.Contains(a.Answer, " of 200 server connections") {
		t.Errorf("answer %q: want the split and the budget", a.Answer)
	}
}

// A class name that does not exist, a class flag on a scenario without
// classes, and a throughput floor with classes are usage errors.
func TestAdvisePerPoolUsage(t *testing.T) {
	for _, args := range [][]string{
		{"web-and-report", "--slo-p99", "nosuch=1s"},
		{"web-and-report", "--features", "nosuch=with_hold"},
		{"web-and-report", "--min-tps", "100"},
		{"pgbouncer-modes", "--slo-p99", "web=1s"},
		{"web-and-report", "--slo-p99", "web=fast"},
	} {
		code, _, errOut := runCmd(append([]string{"advise"}, args...)...)
		if code != 2 || errOut == "" {
			t.Errorf("advise %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
}
