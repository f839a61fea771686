package web

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// budget is the most the whole page may weigh compressed: what a browser
// downloads (each file gzipped, the wasm as served).
const budget = 5 << 20

// TestPageSizeBudget adds up the page as it travels and fails above 5 MB.
func TestPageSizeBudget(t *testing.T) {
	total := 0
	err := fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".stamp") {
			return err
		}
		data, err := fs.ReadFile(Files(), p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".gz") {
			total += len(data)
			return nil
		}
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		total += b.Len()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the page weighs %d bytes compressed (budget %d)", total, budget)
	if total > budget {
		t.Errorf("the page weighs %.2f MB compressed, over the 5 MB budget", float64(total)/(1<<20))
	}
}

func TestHandlerServesWasm(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()
	raw, err := Wasm()
	if err != nil {
		t.Fatal(err)
	}
	for _, gz := range []bool{true, false} {
		req, _ := http.NewRequest("GET", srv.URL+"/poolsim.wasm", nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		} else {
			req.Header.Set("Accept-Encoding", "identity")
		}
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/wasm" {
			t.Errorf("gzip %v: Content-Type %q", gz, ct)
		}
		if enc := resp.Header.Get("Content-Encoding"); (enc == "gzip") != gz {
			t.Errorf("gzip %v: Content-Encoding %q", gz, enc)
		}
		if gz {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(zr)
		}
		if !bytes.Equal(body, raw) {
			t.Errorf("gzip %v: served %d bytes, not the wasm's %d", gz, len(body), len(raw))
		}
	}
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`<script type="module" src="app.js">`)) || bytes.Contains(body, []byte("https://")) {
		t.Errorf("index.html: %.200s", body)
	}
}

// TestNothingFromTheNetwork: no file of the page names another origin
// (no CDN, no font service): it works on a machine with no network.
func TestNothingFromTheNetwork(t *testing.T) {
	fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".js") || strings.HasSuffix(p, ".html") || strings.HasSuffix(p, ".css")) || p == "wasm_exec.js" {
			return err
		}
		data, _ := fs.ReadFile(Files(), p)
		for _, s := range []string{"http://", "https://", "//cdn", "@import"} {
			if i := bytes.Index(data, []byte(s)); i >= 0 && !bytes.Contains(data[max(0, i-20):i], []byte("NS = ")) {
				t.Errorf("%s refers to %q: the page must carry everything it uses", p, data[i:min(len(data), i+60)])
			}
		}
		return nil
	})
}

// TestScriptsParse has Node parse every script of the page (the modules
// as modules), so a syntax error fails here and not only in a browser.
func TestScriptsParse(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is not installed; CI needs it to check the page's scripts")
		}
		t.Skip("node is not installed")
	}
	fs.WalkDir(Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		data, _ := fs.ReadFile(Files(), p)
		args := []string{"--check"}
		if p != "worker.js" && p != "wasm_exec.js" { // classic scripts; the rest are ES modules
			args = []string{"--input-type=module", "--check"}
		}
		cmd := exec.Command(node, args...)
		cmd.Stdin = bytes.NewReader(data)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", p, err, out)
		}
		return nil
	})
}
