//go:build ignore

// gen builds the page's WebAssembly from the module's sources: run it with
// `go generate ./web` (from anywhere in the module). It writes
// static/poolsim.wasm.gz (go build -trimpath -ldflags=-s -w for js/wasm,
// gzip level 9 with no name or time in the header: the same sources and Go
// version give the same bytes), static/wasm_exec.js (the Go release's
// loader) and static/poolsim.wasm.stamp (wasmstamp: what the build was
// made from, checked by TestWasmNotStale).
package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/poolsim/poolsim/web/internal/wasmstamp"
)

func main() {
	if err := gen(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func gen() error {
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if os.Getenv("GOROOT") == "" {
		goBin = "go"
	}
	rootOut, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(rootOut)))
	static := filepath.Join(root, "web", "static")
	tmp, err := os.MkdirTemp("", "poolsim-wasm")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "poolsim.wasm")
	build := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", raw, wasmstamp.Command)
	build.Dir = root
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", wasmstamp.Command, err)
	}
	data, err := os.ReadFile(raw)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(static, "poolsim.wasm.gz"), gz.Bytes(), 0o644); err != nil {
		return err
	}
	gorootOut, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	loader, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(gorootOut)), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(static, "wasm_exec.js"), loader, 0o644); err != nil {
		return err
	}
	stamp, err := wasmstamp.Compute(goBin, root)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := wasmstamp.Write(&b, stamp); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gen: poolsim.wasm %d bytes, %d gzipped\n", len(data), gz.Len())
	return os.WriteFile(filepath.Join(static, "poolsim.wasm.stamp"), b.Bytes(), 0o644)
}
