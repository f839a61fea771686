package web

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/poolsim/poolsim/web/internal/wasmstamp"
)

// TestWasmNotStale fails when the committed wasm was built from other
// sources (or another Go) than the tree's: its stamp, written by go
// generate ./web, must equal the stamp of the sources now. It costs a
// go list, not a build.
func TestWasmNotStale(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the wasm's sources")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	now, err := wasmstamp.Compute(goBin, root)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join("static", "poolsim.wasm.stamp"))
	if err != nil {
		t.Fatal(err)
	}
	if got := wasmstamp.Read(stored); got != now {
		t.Fatalf("static/poolsim.wasm.gz is stale: built from sources stamped %.12s, the tree's are %.12s; run go generate ./web and commit web/static", got, now)
	}
}
