package web

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/web/api"
)

// nodeCall makes one API call to the committed wasm under Node, through
// Go's lib/wasm/wasm_exec_node.js.
func nodeCall(t *testing.T, op string, req any) []byte {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed; CI needs it to check the wasm")
		}
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	raw, err := Wasm()
	if err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(dir, "poolsim.wasm")
	if err := os.WriteFile(wasm, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	reqFile := filepath.Join(dir, "req.json")
	if err := os.WriteFile(reqFile, body, 0o644); err != nil {
		t.Fatal(err)
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	execNode := filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec_node.js")
	script, err := filepath.Abs(filepath.Join("testdata", "call.js"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, execNode, wasm, op, reqFile)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("node %s: %v: %s", op, err, ee.Stderr)
		}
		t.Fatalf("node %s: %v", op, err)
	}
	return out
}

// TestWasmSameNumbers holds the wasm's run answers byte-identical to the
// same call made natively: api.Run is the command line's code path
// (cmd/poolsim's TestPageRunIsCommandLine holds the two equal), so the
// page prints what `poolsim run --format json` prints.
func TestWasmSameNumbers(t *testing.T) {
	seed := uint64(7)
	req := api.RunRequest{
		Scenario: "erlang-c", Seed: &seed, Replications: 3,
		Sets: []string{"workload.duration=20s", "pooler.default_pool_size=9"},
	}
	// One Node call, several runs: a sweep over a key of the request.
	req.Vary = []string{"workload.arrival_rate=60/s,70/s"}
	got := nodeCall(t, "run", req)
	want := api.Call(context.Background(), "run", mustJSON(t, req))
	if string(got) != string(want) {
		t.Fatalf("the wasm's answer differs from the native one:\nwasm:   %.400s\nnative: %.400s", got, want)
	}
	var ans struct {
		OK    api.RunAnswer
		Error string
	}
	if err := json.Unmarshal(got, &ans); err != nil || ans.Error != "" || len(ans.OK.Explanation.Rows) != 2 {
		t.Fatalf("answer: %v %q, %d rows explained; want 2", err, ans.Error, len(ans.OK.Explanation.Rows))
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
