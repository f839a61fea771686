package web

import (
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

//go:embed static
var staticFS embed.FS

// modTime is the zero time: the embedded files carry none.
var modTime time.Time

// wasmGz is the compressed wasm's name in static/; the page asks for
// wasmName.
const (
	wasmName = "poolsim.wasm"
	wasmGz   = "poolsim.wasm.gz"
)

// Files is the page's files (static/, without the directory).
func Files() fs.FS {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // static is embedded: cannot fail
	}
	return sub
}

// Handler serves the page. /poolsim.wasm is sent as stored, gzip-
// compressed with Content-Encoding: gzip, to a client that accepts gzip,
// and decompressed to one that does not.
func Handler() http.Handler {
	files := http.FileServerFS(Files())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.URL.Path != "/"+wasmName {
			files.ServeHTTP(w, r)
			return
		}
		gz, err := fs.ReadFile(Files(), wasmGz)
		if err != nil {
			http.Error(w, "serve: the page's wasm is missing: run go generate ./web", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/wasm")
		w.Header().Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			w.Header().Set("Content-Encoding", "gzip")
			http.ServeContent(w, r, "", modTime, bytes.NewReader(gz))
			return
		}
		raw, err := Wasm()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		http.ServeContent(w, r, "", modTime, bytes.NewReader(raw))
	})
}

// acceptsGzip reports whether the request's Accept-Encoding lists gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

var (
	wasmOnce sync.Once
	wasmRaw  []byte
	wasmErr  error
)

// Wasm is the page's WebAssembly, decompressed.
func Wasm() ([]byte, error) {
	wasmOnce.Do(func() {
		gz, err := fs.ReadFile(Files(), wasmGz)
		if err != nil {
			wasmErr = fmt.Errorf("wasm: %w (run go generate ./web)", err)
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			wasmErr = fmt.Errorf("wasm: %w", err)
			return
		}
		wasmRaw, wasmErr = io.ReadAll(zr)
		if wasmErr != nil {
			wasmErr = fmt.Errorf("wasm: %w", wasmErr)
		}
	})
	return wasmRaw, wasmErr
}

// Export writes the page into dir (created if missing) as a static
// folder: every file of static/, and poolsim.wasm both as stored
// (poolsim.wasm.gz, for servers that send precompressed files such as
// nginx's gzip_static) and decompressed (poolsim.wasm, for hosts that
// serve files as they are, e.g. GitHub Pages, which compress on their
// own). It returns the files written, in order.
func Export(dir string) ([]string, error) {
	var written []string
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := fs.ReadFile(Files(), p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
		written = append(written, p)
		return nil
	})
	if err != nil {
		return written, fmt.Errorf("export: %w", err)
	}
	raw, err := Wasm()
	if err != nil {
		return written, fmt.Errorf("export: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, wasmName), raw, 0o644); err != nil {
		return written, fmt.Errorf("export: %w", err)
	}
	return append(written, path.Clean(wasmName)), nil
}
