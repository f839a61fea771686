// Package wasmstamp says which sources the committed WebAssembly build
// was made from: a SHA-256 over the Go version and, for every package of
// this module the wasm command imports (as GOOS=js GOARCH=wasm builds it),
// each Go and embedded file's path and bytes, and the path and version of
// every other module it imports from (the standard library's comes with
// the Go version). go generate ./web writes it beside the wasm; a test
// recomputes it and fails when they differ, i.e. when the wasm is stale.
package wasmstamp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Command is the package the wasm is built from.
const Command = "./web/wasm"

// Compute is the stamp of the sources under root (the module's root) with
// the go command at goBin.
func Compute(goBin, root string) (string, error) {
	ver, err := run(goBin, root, "env", "GOVERSION")
	if err != nil {
		return "", fmt.Errorf("wasmstamp: %w", err)
	}
	out, err := run(goBin, root, "list", "-deps", "-json=Dir,ImportPath,Module,GoFiles,EmbedFiles", Command)
	if err != nil {
		return "", fmt.Errorf("wasmstamp: %w", err)
	}
	var files []string
	mods := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir    string
			Module *struct {
				Main          bool
				Path, Version string
			}
			GoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			return "", fmt.Errorf("wasmstamp: go list: %w", err)
		}
		if p.Module == nil {
			continue // the standard library
		}
		if !p.Module.Main {
			mods[p.Module.Path+"@"+p.Module.Version] = true
			continue
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			rel, err := filepath.Rel(root, filepath.Join(p.Dir, f))
			if err != nil {
				return "", fmt.Errorf("wasmstamp: %w", err)
			}
			files = append(files, filepath.ToSlash(rel))
		}
	}
	sort.Strings(files)
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", strings.TrimSpace(string(ver)))
	var deps []string
	for m := range mods {
		deps = append(deps, m)
	}
	sort.Strings(deps)
	for _, m := range deps {
		fmt.Fprintf(h, "module %s\n", m)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", fmt.Errorf("wasmstamp: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func run(goBin, root string, args ...string) ([]byte, error) {
	cmd := exec.Command(goBin, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Write is Compute's result written to w with a line saying what it is.
func Write(w io.Writer, stamp string) error {
	_, err := fmt.Fprintf(w, "%s  sources of web/static/poolsim.wasm.gz (go generate ./web)\n", stamp)
	return err
}

// Read is the stamp in a file Write wrote.
func Read(data []byte) string {
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
