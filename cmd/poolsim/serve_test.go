package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/poolsim/poolsim/web"
)

func TestServeExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	code, out, errOut := runCmd("serve", "--export", dir)
	if code != 0 {
		t.Fatalf("serve --export: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "files to "+dir) {
		t.Errorf("serve --export said %q", out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "poolsim.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := web.Wasm()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want) || !bytes.HasPrefix(raw, []byte("\x00asm")) {
		t.Errorf("exported poolsim.wasm (%d bytes) is not the embedded wasm (%d bytes)", len(raw), len(want))
	}
	for _, f := range []string{"index.html", "poolsim.wasm.gz", "wasm_exec.js", "worker.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("export: %v", err)
		}
	}
}

func TestServeUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra"}, "takes no arguments"},
		{[]string{"serve", "--export", "x", "--listen", ":1"}, "drop --listen"},
		{[]string{"serve", "--listen", "nohost:notaport"}, "--listen nohost:notaport"},
	} {
		code, _, errOut := runCmd(c.args...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestServeStops serves on a free port until the context ends.
func TestServeStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var o, e bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0"}, &o, &e) }()
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve stopped with %d: %s", code, e.String())
	}
}
