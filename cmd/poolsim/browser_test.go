package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// browserLessons are the lessons the browser test loads: a query string
// of its own, the slider it moves (a CSS selector; "" for none), how many
// steps right it moves it (several at once: each new run replaces the
// last), and what the command of the final run must then contain.
var browserLessons = []struct {
	id, query, slider string
	presses           int
	want              string
}{
	{"little", "", "#lesson-c", 1, "pooler.default_pool_size=11"},
	{"erlang-c", "", "#lesson-lambda", 1, "workload.arrival_rate=90/s"},
	{"closed", "", "#lesson-c", 3, "pooler.default_pool_size=7"},
	{"modes", "", "#lesson-n", 1, "workload.clients=150"},
	{"usl", "&set=server.contention=0.02", "#lesson-kappa", 1, "server.coherency=0.005"},
	{"your-scenario", "&scenario=pgbouncer-modes&seed=7&set=workload.clients=100", "", 0, ""},
}

// chromium is the browser to drive: skipped when none is installed,
// except under CI, which must run this test.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium: CI must run the browser test (apt-get install -y chromium)")
	}
	t.Skip("no chromium installed (apt-get install -y chromium)")
	return ""
}

// pageLast is what the page records of its last run (lesson.js).
type pageLast struct {
	Lesson  string  `json:"lesson"`
	Command string  `json:"command"`
	Raw     string  `json:"raw"`
	MS      float64 `json:"ms"`
	Txns    float64 `json:"txns"`
}

// TestBrowser serves the page, loads every lesson in headless chromium,
// moves a slider with the keyboard, and holds the page's JSON and the
// numbers it shows to the command line's for the command the page
// prints. With -update it writes the screenshots in docs/lessons/. It
// logs the figures docs/browser.md quotes: time to the first result, and
// a 100,000-transaction run in the page.
func TestBrowser(t *testing.T) {
	skipUnderRace(t)
	chrome := chromium(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(sctx, ln, io.Discard) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	base := "http://" + ln.Addr().String() + "/"
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			msg := e.ExceptionDetails.Text
			if x := e.ExceptionDetails.Exception; x != nil && x.Description != "" {
				msg = x.Description
			}
			pageErrors.add(msg)
		}
	}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if errs := pageErrors.take(); len(errs) > 0 {
			t.Errorf("the page threw: %s", strings.Join(errs, "\n"))
		}
	}()

	for _, l := range browserLessons {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"?lesson="+l.id+l.query)); err != nil {
			t.Fatalf("%s: %v", l.id, err)
		}
		last := waitRun(ctx, t, l.id, "")
		stats, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`window.poolsimStats`))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: simulator ready %.0f ms, first result %.0f ms after navigation; run %.0f ms for %.0f transactions",
			l.id, stats["engineMs"], stats["firstResultMs"], last.MS, last.Txns)
		sameAsCommandLine(ctx, t, l.id, last)
		for _, kv := range strings.Split(l.query, "&") { // the URL reproduces the view
			if set, ok := strings.CutPrefix(kv, "set="); ok && !strings.Contains(last.Command, "--set "+set) {
				t.Errorf("%s: the URL sets %s, the page ran %s", l.id, set, last.Command)
			}
		}
		if l.slider != "" {
			err := chromedp.Do(ctx, chromedp.Focus(l.slider), chromedp.KeyEvent(strings.Repeat(kb.ArrowRight, l.presses)))
			if err != nil {
				t.Fatalf("%s: move %s: %v", l.id, l.slider, err)
			}
			moved := waitRun(ctx, t, l.id, l.want)
			sameAsCommandLine(ctx, t, l.id, moved)
			restarts, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`poolsimEngine.restarts`))
			t.Logf("%s: %d step(s) of %s: %s; runs replaced so far: %d", l.id, l.presses, l.slider, l.want, restarts)
		}
		if *update {
			screenshot(ctx, t, filepath.Join("..", "..", "docs", "lessons", l.id+".png"))
		}
	}
	if t.Failed() {
		return
	}
	// A phone: the layout must fit 390 CSS pixels without sideways scrolling.
	err = chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(base+"?lesson=erlang-c"))
	if err != nil {
		t.Fatal(err)
	}
	waitRun(ctx, t, "erlang-c", "")
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || width > 390 {
		t.Errorf("on a phone the page is %d CSS pixels wide (%v), want at most 390", width, err)
	}
	if *update {
		screenshot(ctx, t, filepath.Join("..", "..", "docs", "lessons", "phone-erlang-c.png"))
	}
	// The exported folder on a plain static server (files as they are).
	site := filepath.Join(t.TempDir(), "site")
	if code, _, errOut := runCmd("serve", "--export", site); code != 0 {
		t.Fatalf("serve --export: %s", errOut)
	}
	static := httptest.NewServer(http.FileServer(http.Dir(site)))
	defer static.Close()
	if err := chromedp.Do(ctx, chromedp.Navigate(static.URL+"/?lesson=modes")); err != nil {
		t.Fatal(err)
	}
	sameAsCommandLine(ctx, t, "modes (exported)", waitRun(ctx, t, "modes", ""))
	// 100,000 transactions (100 clients x 1,000) in the page, off its thread.
	big, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](`poolsimEngine.run({scenario: "pgbouncer-modes",
		sets: ["workload.clients=100", "workload.txns_per_session=1000", "workload.stmts_per_txn=1", "pooler.mode=transaction"]})
		.then((a) => ({ms: a.ms, txns: a.report.rows[0].metrics.ok_txns}))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if big["txns"] != 100000 {
		t.Errorf("the big run did %v transactions, want 100000", big["txns"])
	}
	t.Logf("100,000-transaction run in the page: %.0f ms", big["ms"])
}

// pageErrors are the exceptions the page threw and did not catch.
var pageErrors jsErrors

type jsErrors struct {
	mu   sync.Mutex
	list []string
}

func (j *jsErrors) add(s string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.list = append(j.list, s)
}

func (j *jsErrors) take() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := j.list
	j.list = nil
	return out
}

// waitRun waits until lesson id has shown a run whose command contains
// want (the run a moved slider started), and returns it.
func waitRun(ctx context.Context, t *testing.T, id, want string) pageLast {
	t.Helper()
	js := fmt.Sprintf(`(() => { const s = document.querySelector(".sim"); const l = window.poolsimLast;
		if (s && s.dataset.state === "error") return JSON.stringify({lesson: "error: " + document.querySelector(".sim .status").textContent});
		return s && s.dataset.state === "done" && l && l.lesson === %q && l.command.includes(%q) && document.querySelector("[data-metric]") ? JSON.stringify(l) : null })()`, id, want)
	raw, err := chromedp.Run(ctx, chromedp.Poll[string](js, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(60*time.Second)))
	if err != nil {
		t.Fatalf("%s: waiting for a run: %v; the page threw: %q", id, err, pageErrors.take())
	}
	var last pageLast
	if err := json.Unmarshal([]byte(raw), &last); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(last.Lesson, "error") {
		t.Fatalf("%s: the page says %s", id, last.Lesson)
	}
	return last
}

// sameAsCommandLine runs the command the page shows and holds its output
// to the page's JSON, and every number the page shows (data-value of a
// [data-metric]) to a value of that metric in it.
func sameAsCommandLine(ctx context.Context, t *testing.T, id string, last pageLast) {
	t.Helper()
	args, err := shellWords(strings.TrimPrefix(last.Command, "poolsim "))
	if err != nil {
		t.Fatalf("%s: command %q: %v", id, last.Command, err)
	}
	code, out, errOut := runCmd(append(args, "-q")...)
	if code != 0 {
		t.Fatalf("%s: %s: exit %d: %s", id, last.Command, code, errOut)
	}
	if out != last.Raw {
		t.Errorf("%s: the page's JSON differs from %s:\npage: %.300s\ncli:  %.300s", id, last.Command, last.Raw, out)
		return
	}
	var rep struct {
		Rows []struct{ Metrics map[string]float64 }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[][2]string](`[...document.querySelectorAll("[data-metric]")].map((e) => [e.dataset.metric, e.dataset.value])`))
	if err != nil {
		t.Fatal(err)
	}
	if len(shown) == 0 {
		t.Errorf("%s: the page shows no simulated number", id)
	}
	for _, s := range shown {
		v, err := strconv.ParseFloat(s[1], 64)
		found := false
		for _, r := range rep.Rows {
			found = found || (err == nil && r.Metrics[s[0]] == v)
		}
		if !found {
			t.Errorf("%s: the page shows %s = %s, a value no row of %s has", id, s[0], s[1], last.Command)
		}
	}
}

// shellWords splits the page's command line: words, and words in single
// quotes (as ui.js quotes them).
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, started := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\'':
			in = false
		case in:
			cur.WriteByte(c)
		case c == '\'':
			in, started = true, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			started = true
		case c == ' ':
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if in {
		return nil, fmt.Errorf("unclosed quote")
	}
	if started {
		out = append(out, cur.String())
	}
	return out, nil
}

func screenshot(ctx context.Context, t *testing.T, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
