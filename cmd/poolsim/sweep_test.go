package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios/report"
)

// sweepArgs is a 120-point grid, quick enough for many runs.
var sweepArgs = []string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1..30", "--vary", "pooler.mode=direct,session,transaction,statement"}

func TestSweepMatchesRun(t *testing.T) {
	// Varying the scenario's own first axis with its own values keeps the
	// mode axis inside: the same rows as run.
	for _, format := range report.Formats {
		_, want, _ := runCmd("run", "pgbouncer-modes", "--format", format)
		code, got, errOut := runCmd("sweep", "pgbouncer-modes", "--vary", "workload.clients=40,200", "--format", format)
		if code != 0 || got != want {
			t.Errorf("sweep --vary workload.clients=40,200 --format %s: exit %d (%s), output differs from run:\n%s", format, code, errOut, got)
		}
	}
}

func TestSweepParallelIsSequential(t *testing.T) {
	for _, format := range report.Formats {
		_, one, _ := runCmd(append(sweepArgs, "--format", format, "--workers", "1")...)
		_, two, _ := runCmd(append(sweepArgs, "--format", format, "--workers", "2")...)
		_, all, _ := runCmd(append(sweepArgs, "--format", format)...)
		if one == "" || one != two || one != all {
			t.Errorf("--format %s: workers 1, 2 and default print different bytes", format)
		}
	}
	_, out, _ := runCmd(append(sweepArgs, "--format", "csv")...)
	if n := strings.Count(out, "\n"); n != 121 {
		t.Errorf("csv has %d lines, want a header and 120 rows", n)
	}
}

func TestSweepGridOrder(t *testing.T) {
	_, out, _ := runCmd("sweep", "pgbouncer-modes", "--vary", "pooler.mode=session,transaction", "--vary", "pooler.default_pool_size=5,10", "--drop-sweep", "--format", "csv")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Split(l, ",")
		got = append(got, f[0]+"/"+f[1])
	}
	want := "session/5 session/10 transaction/5 transaction/10"
	if strings.Join(got, " ") != want {
		t.Errorf("rows %v, want first --vary outermost: %s", got, want)
	}
	// Without --drop-sweep the scenario's other axis (pooler.mode) stays,
	// inside the --vary axis.
	_, out, _ = runCmd("sweep", "pgbouncer-modes", "--vary", "pooler.default_pool_size=5,10", "--format", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "pooler.default_pool_size,workload.clients,pooler.mode,") || len(lines) != 1+2*2*4 {
		t.Errorf("kept sweep: header %q, %d rows", lines[0], len(lines)-1)
	}
}

// A stochastic study's shards carry every replication's distributions and
// the rows' notes, so merged JSON shards print the pooled percentiles, the
// intervals and the notes of the unsharded sweep.
func TestStochasticShardsMergeToUnsharded(t *testing.T) {
	skipUnderRace(t)
	dir := t.TempDir()
	// 30 s runs cannot give 2 %: notes say so.
	args := []string{"sweep", "erlang-c", "--set", "workload.duration=30s", "--precision", "2%", "--max-replications", "15",
		"--vary", "pooler.default_pool_size=9,12", "--quiet", "--format", "json"}
	var files []string
	for i := 1; i <= 2; i++ {
		code, out, errOut := runCmd(append(args, "--shard", fmt.Sprintf("%d/2", i))...)
		if code != 0 {
			t.Fatalf("shard %d/2: exit %d: %s", i, code, errOut)
		}
		p := filepath.Join(dir, fmt.Sprintf("s%d.json", i))
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	code, want, errOut := runCmd(args...)
	if code != 0 {
		t.Fatalf("unsharded: exit %d: %s", code, errOut)
	}
	code, got, errOut := runCmd(append([]string{"merge"}, files...)...)
	if code != 0 || got != want {
		t.Errorf("merge of 2 stochastic json shards: exit %d (%s), differs from the unsharded sweep:\n%s\nwant\n%s", code, errOut, got, want)
	}
	if !strings.Contains(want, "wait_p99_ms_ci95") || !strings.Contains(want, "precision not reached") {
		t.Errorf("the study printed no intervals or no notes:\n%s", want)
	}
}

// TestShardsMergeToUnsharded proves that merged shards are byte for byte
// the unsharded sweep, for json and csv, whatever the number of shards
// (including more shards than points) and the order of the files.
func TestShardsMergeToUnsharded(t *testing.T) {
	skipUnderRace(t)
	dir := t.TempDir()
	for _, format := range []string{"json", "csv"} {
		code, want, errOut := runCmd(append(sweepArgs, "--format", format)...)
		if code != 0 {
			t.Fatalf("unsharded: exit %d: %s", code, errOut)
		}
		for _, n := range []int{1, 3, 7, 200} {
			var files []string
			for i := n; i >= 1; i-- { // reverse order: merge must not care
				code, out, errOut := runCmd(append(sweepArgs, "--format", format, "--shard", fmt.Sprintf("%d/%d", i, n))...)
				if code != 0 {
					t.Fatalf("shard %d/%d: exit %d: %s", i, n, code, errOut)
				}
				p := filepath.Join(dir, fmt.Sprintf("%s-%d-%d", format, n, i))
				if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				files = append(files, p)
			}
			args := append([]string{"merge"}, files...)
			png := filepath.Join(dir, fmt.Sprintf("%s-%d.png", format, n))
			if n == 3 {
				args = append(args, "--plot", png)
			}
			code, got, errOut := runCmd(args...)
			if code != 0 {
				t.Fatalf("merge of %d %s shards: exit %d: %s", n, format, code, errOut)
			}
			if n == 3 {
				if st, err := os.Stat(png); err != nil || st.Size() < 10_000 {
					t.Errorf("merge --plot of %s shards: %v", format, err)
				}
			}
			if got != want {
				t.Errorf("merge of %d %s shards differs from the unsharded sweep (%d vs %d bytes)", n, format, len(got), len(want))
			}
		}
	}
}

func TestMergeErrors(t *testing.T) {
	dir := t.TempDir()
	shard := func(name string, extra ...string) string {
		code, out, errOut := runCmd(append(append([]string(nil), sweepArgs...), extra...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, errOut)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	s1 := shard("s1.json", "--shard", "1/3")
	s2 := shard("s2.json", "--shard", "2/3")
	s3 := shard("s3.json", "--shard", "3/3")
	c3 := shard("s3.csv", "--shard", "3/3", "--format", "csv")
	other := shard("o3.json", "--shard", "3/3", "--set", "pooler.hop=50us")
	other4 := shard("q4.json", "--shard", "3/4")
	plain := shard("plain.json", "--format", "json")
	trunc := filepath.Join(dir, "trunc.csv")
	data, _ := os.ReadFile(c3)
	lines := strings.SplitAfter(string(data), "\n")
	os.WriteFile(trunc, []byte(strings.Join(lines[:len(lines)-3], "")), 0o644)
	tests := []struct {
		name  string
		files []string
		want  string
	}{
		{"missing", []string{s1, s3}, "missing shard 2/3"},
		{"twice", []string{s1, s2, s2, s3}, "shard 2/3 given twice"},
		{"mixed sweeps", []string{s1, s2, other}, "come from different sweeps"},
		{"mixed counts", []string{s1, s2, other4}, "split the sweep the same way"},
		{"mixed formats", []string{s1, s2, c3}, "merge shards of one format"},
		{"not a shard", []string{plain}, "not a shard file"},
		{"truncated", []string{trunc}, "the file is truncated"},
		{"no files", nil, "want the shard files"},
	}
	for _, tt := range tests {
		code, out, errOut := runCmd(append([]string{"merge"}, tt.files...)...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want exit 2 and one line containing %q", tt.name, code, len(out), errOut, tt.want)
		}
	}
	if code, _, errOut := runCmd("merge", filepath.Join(dir, "nope.json")); code != exitFail {
		t.Errorf("unreadable file: exit %d (%s), want 1", code, errOut)
	}
}

func TestSweepUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "pgbouncer-modes"}, "want at least one --vary"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients"}, "want key=values"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=10..1"}, "end is below the start"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=0..10/log"}, "must start above 0"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clientz=1,2"}, "--vary workload.clientz=1: unknown key `workload.clientz`; did you mean `workload.clients`?"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "pooler.mode=session,pooled"}, `--vary pooler.mode=pooled: unknown pool mode "pooled"`},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=0,5"}, "--vary workload.clients=0: must be from 1"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--vary", "workload.clients=3"}, "given twice"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--set", "workload.clients=3"}, "both --set and --vary"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--shard", "0/3"}, "want i/n with 1 <= i <= n"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--shard", "4/3"}, "want i/n with 1 <= i <= n"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--shard", "1/3", "--format", "table"}, "--shard writes json or csv"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--plot", "out.gif"}, "want a file name ending in .png or .svg"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1,2", "--workers", "-1"}, "--workers -1"},
		{[]string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1..100000", "--vary", "pooler.mode=session,transaction"}, "more than 100000 points"},
	}
	for _, tt := range tests {
		code, out, errOut := runCmd(tt.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", tt.args[2:], code, errOut, tt.want)
		}
	}
}

func TestSweepPlot(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range []string{"png", "svg"} {
		p := filepath.Join(dir, "clients."+ext)
		code, out, errOut := runCmd("sweep", "pgbouncer-modes", "--vary", "workload.clients=10..400/log", "--plot", p)
		if code != 0 || !strings.Contains(out, "transaction") {
			t.Fatalf("--plot %s: exit %d: %s", ext, code, errOut)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		magic := map[string][]byte{"png": []byte("\x89PNG"), "svg": []byte("<?xml")}[ext]
		if len(data) < 10_000 || !bytes.HasPrefix(data, magic) {
			t.Errorf("%s: %d bytes, starts %q", p, len(data), data[:min(len(data), 8)])
		}
		if ext == "svg" && !bytes.Contains(data, []byte("transactions per second")) {
			t.Errorf("svg has no throughput axis label")
		}
	}
}

func TestNewCommandsHelp(t *testing.T) {
	for _, c := range []string{"sweep", "merge", "advise"} {
		code, out, errOut := runCmd(c, "--help")
		if code != exitOK || !strings.Contains(out+errOut, "Exit status") || !strings.Contains(out+errOut, "Examples") {
			t.Errorf("%s --help: exit %d, no examples or exit-status section:\n%s%s", c, code, out, errOut)
		}
	}
}

func BenchmarkSweep1000(b *testing.B) {
	args := []string{"sweep", "pgbouncer-modes", "--vary", "workload.clients=1..250", "--vary", "pooler.mode=direct,session,transaction,statement", "--format", "csv"}
	for _, w := range []string{"1", "2"} {
		b.Run("workers="+w, func(b *testing.B) {
			for b.Loop() {
				if code, _, errOut := runCmd(append(args, "--workers", w)...); code != 0 {
					b.Fatal(errOut)
				}
			}
		})
	}
}

// The CSV columns read back into the same metrics as the JSON report.
func TestCSVRowRoundTrip(t *testing.T) {
	_, js, _ := runCmd(append(sweepArgs, "--format", "json")...)
	_, cs, _ := runCmd(append(sweepArgs, "--format", "csv")...)
	var doc struct {
		Rows []struct {
			Metrics system.Metrics `json:"metrics"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(cs)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs[1:] {
		row, err := report.RowFromCSV(recs[0], rec)
		if err != nil {
			t.Fatal(err)
		}
		if row.Metrics != doc.Rows[i].Metrics || len(row.Params) != 2 || row.Params[1].Key != "pooler.mode" {
			t.Fatalf("row %d: csv %+v\njson %+v", i, row, doc.Rows[i].Metrics)
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine("sweep x", 450, 1000, 3*time.Second)
	if got != "sweep x [=============>                ]  45%  450/1000 runs  4s left" {
		t.Errorf("progressLine = %q", got)
	}
	// Buffers and pipes are not terminals: no progress bar, and the rows
	// come from one scenarios.Run call.
	if f, err := os.CreateTemp(t.TempDir(), "x"); err == nil && isTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}

// BenchmarkStochasticSweep is bench/model-speed.sh's study: 1,000 points of
// the stochastic built-in prepared-statements-live (40 pool sizes x 5 client
// counts x its 5 variants) with 10 replications each, on two workers.
func BenchmarkStochasticSweep(b *testing.B) {
	args := []string{"sweep", "prepared-statements-live", "--vary", "pooler.default_pool_size=1..40", "--vary", "workload.clients=10,20,30,40,50",
		"--replications", "10", "--workers", "2", "--format", "csv", "--quiet"}
	for b.Loop() {
		if code, _, errOut := runCmd(args...); code != 0 {
			b.Fatal(errOut)
		}
	}
}
