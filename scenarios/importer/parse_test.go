package importer

import (
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSplitKinds(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want []stmtKind
	}{
		{"SELECT 1", []stmtKind{kOther}},
		{"BEGIN ; SELECT pg_sleep(0.005);", []stmtKind{kBegin, kOther}},
		{"SELECT pg_sleep(0.005) ; END;", []stmtKind{kOther, kEnd}},
		{"begin isolation level serializable; commit", []stmtKind{kBegin, kEnd}},
		{"START TRANSACTION READ ONLY", []stmtKind{kBegin}},
		{"start", []stmtKind{kOther}},
		{"ROLLBACK TO SAVEPOINT a; ROLLBACK", []stmtKind{kOther, kEnd}},
		{"COMMIT PREPARED 'x'", []stmtKind{kPrepared}},
		{"ROLLBACK PREPARED 'x'", []stmtKind{kPrepared}},
		{"COMMIT AND CHAIN", []stmtKind{kOther}},
		{"abort", []stmtKind{kEnd}},
		{"SELECT 'a;b'; SELECT \"c;\"", []stmtKind{kOther, kOther}},
		{"SELECT $$ ; COMMIT; $$; COMMIT", []stmtKind{kOther, kEnd}},
		{"SELECT $tag$ ; $x$ ; $tag$", []stmtKind{kOther}},
		{"SELECT $1; COMMIT", []stmtKind{kOther, kEnd}},
		{"-- BEGIN;\nSELECT 1", []stmtKind{kOther}},
		{"/* BEGIN; /* nested */ */ COMMIT", []stmtKind{kEnd}},
		{"  ;;  ; ", nil},
		{"SELECT 'unterminated; COMMIT", []stmtKind{kOther}},
		{"(SELECT 1)", []stmtKind{kOther}},
	} {
		got := splitKinds(tc.sql)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("splitKinds(%q) = %v, want %v", tc.sql, got, tc.want)
		}
	}
}

func TestParseLogTime(t *testing.T) {
	utc := time.Date(2026, 11, 30, 19, 33, 19, 582e6, time.UTC)
	for _, tc := range []struct {
		in    string
		want  time.Time
		known bool
		bad   bool
	}{
		{"2026-11-30 19:33:19.582 UTC", utc, true, false},
		{"2026-11-30 19:33:19.582 GMT", utc, true, false},
		{"2026-11-30 22:33:19.582 +03", utc, true, false},
		{"2026-11-30 14:03:19.582 -0530", utc, true, false},
		{"2026-11-30 19:33:19.582 CET", utc, false, false},
		{"2026-11-30 19:33:19 UTC", utc.Truncate(time.Second), true, false},
		{"2026-11-30T19:33:19Z", time.Time{}, false, true},
		{"yesterday", time.Time{}, false, true},
		{"2026-11-30 19:33:19.582 +3x", time.Time{}, false, true},
	} {
		got, known, err := parseLogTime(tc.in)
		if (err != nil) != tc.bad || !got.Equal(tc.want) || known != tc.known {
			t.Errorf("parseLogTime(%q) = %v, %v, %v; want %v, %v, error %v", tc.in, got, known, err, tc.want, tc.known, tc.bad)
		}
	}
}

// logLine is a csvlog record built for a test.
type logLine struct {
	at       time.Time
	session  string
	db       string
	severity string
	message  string
}

// writeCSVLog writes lines as a PostgreSQL 15 csvlog (26 fields).
func writeCSVLog(t *testing.T, lines []logLine) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "postgresql.csv")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	for i, l := range lines {
		rec := make([]string, 26)
		rec[csvTime] = l.at.UTC().Format("2006-01-02 15:04:05.000") + " UTC"
		rec[csvUser], rec[csvDB], rec[csvSession], rec[csvMessage] = "app", l.db, l.session, l.message
		rec[3], rec[6] = "4711", fmt.Sprint(i+1)
		rec[csvSeverity] = l.severity
		if rec[csvSeverity] == "" {
			rec[csvSeverity] = "LOG"
		}
		rec[csvBackend] = "client backend"
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func at(msec float64) time.Time { return t0.Add(time.Duration(msec * 1e6)) }

// directSessions is a log of short direct sessions: each connects, runs
// one transaction of BEGIN; two statements of 5 ms with 2 ms between them;
// COMMIT, and disconnects; a new one every 20 ms.
func directSessions(n int) []logLine {
	var out []logLine
	for i := range n {
		s := fmt.Sprintf("s%d", i)
		b := float64(20 * i)
		out = append(out,
			logLine{at(b), s, "", "", "connection received: host=127.0.0.1 port=5000"},
			logLine{at(b + 2), s, "app", "", "connection authorized: user=app database=app"},
			logLine{at(b + 3), s, "app", "", "duration: 0.050 ms  statement: BEGIN"},
			logLine{at(b + 8), s, "app", "", "duration: 5.000 ms  statement: UPDATE t SET x = x + 1 WHERE id = 1"},
			logLine{at(b + 15), s, "app", "", "duration: 5.000 ms  parse <unnamed>: SELECT x FROM t WHERE id = $1"},
			logLine{at(b + 15), s, "app", "", "duration: 0.000 ms  bind <unnamed>: SELECT x FROM t WHERE id = $1"},
			logLine{at(b + 15), s, "app", "", "duration: 0.000 ms  execute <unnamed>: SELECT x FROM t WHERE id = $1"},
			logLine{at(b + 16), s, "app", "", "duration: 0.100 ms  statement: COMMIT"},
			logLine{at(b + 17), s, "app", "", "disconnection: session time: 0:00:00.017 user=app database=app host=127.0.0.1 port=5000"},
		)
	}
	return out
}

func TestLogTransactionsAndSessions(t *testing.T) {
	p := writeCSVLog(t, directSessions(100))
	lg, err := AnalyzeLogs([]string{p}, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lg.Txns != 100 || lg.TxnTrips != 400 || !lg.Extended {
		t.Errorf("%d transactions of %d round trips (extended %v), want 100 of 4 each, extended", lg.Txns, lg.TxnTrips, lg.Extended)
	}
	// BEGIN ends at 3 ms, UPDATE runs 3..8, the extended SELECT 10..15,
	// COMMIT 15.9..16: gaps 0, 2 and 0.9 ms.
	within(t, "mean gap (ms)", msf(meanDur(lg.InTxnGaps)), 2.9/3-1e-6, 2.9/3+1e-6)
	if lg.Arrivals != 100 || lg.Departures != 100 || len(lg.SessionTxns) != 100 || lg.SessionTxns[0] != 1 {
		t.Errorf("arrivals %d, departures %d, sessions %v", lg.Arrivals, lg.Departures, lg.SessionTxns[:min(3, len(lg.SessionTxns))])
	}
	if m := meanDur(lg.ConnectTimes); m != 2*time.Millisecond {
		t.Errorf("connect %v, want 2ms", m)
	}
	// Each session is open 15 of every 20 ms (authorized at 2, gone at 17).
	within(t, "open sessions", lg.OpenMean, 0.74, 0.76)
	im, err := Derive(Sources{Log: lg}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Sessions come and go: an open workload of one transaction each.
	if im.Value("workload.arrival_rate") == "" || im.Value("workload.txns_per_session") != "1" || im.Value("workload.stmts_per_txn") != "4" {
		t.Errorf("arrival_rate %q, txns_per_session %q, stmts_per_txn %q; want an open workload, 1, 4",
			im.Value("workload.arrival_rate"), im.Value("workload.txns_per_session"), im.Value("workload.stmts_per_txn"))
	}
	if im.Value("server.connect") != "2ms" || im.Value("pooler.mode") != "direct" {
		t.Errorf("connect %q, mode %q", im.Value("server.connect"), im.Value("pooler.mode"))
	}
}

// TestLogDurationWithoutText: log_duration writes "duration: X ms" alone;
// log_statement = 'all' writes the text before it.
func TestLogDurationWithoutText(t *testing.T) {
	p := writeCSVLog(t, []logLine{
		{at(0), "a", "app", "", "statement: BEGIN"},
		{at(1), "a", "app", "", "duration: 1.000 ms"},
		{at(2), "a", "app", "", "statement: SELECT 1"},
		{at(4), "a", "app", "", "duration: 2.000 ms"},
		{at(5), "a", "app", "", "statement: COMMIT"},
		{at(6), "a", "app", "", "duration: 1.000 ms"},
		{at(7), "a", "app", "", "duration: 1.000 ms"},
	})
	lg, err := AnalyzeLogs([]string{p}, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lg.Txns != 2 || lg.TxnTrips != 4 || lg.Textless != 1 {
		t.Errorf("%d transactions, %d trips, %d without text; want 2 (BEGIN..COMMIT, and the textless one alone), 4, 1", lg.Txns, lg.TxnTrips, lg.Textless)
	}
}

func TestLogErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	noDurations := writeCSVLog(t, []logLine{{at(0), "a", "app", "", "connection authorized: user=app database=app"}})
	csvOne := writeCSVLog(t, directSessions(2))
	jsonOne := write("one.json", `{"timestamp":"2026-11-30 12:00:00.000 UTC","session_id":"a","dbname":"app","error_severity":"LOG","message":"duration: 1.000 ms  statement: SELECT 1"}`+"\n")
	for _, tc := range []struct {
		name  string
		files []string
		is    error
		want  string
	}{
		{"stderr log", []string{write("pg.log", "2026-11-30 19:33:06.488 UTC [14022] LOG:  database system is ready\n")}, ErrFormat, "log_destination = 'csvlog'"},
		{"pgbench log", []string{write("pgbench_log.1", "0 1 94917 0 1796067199 653581\n")}, ErrFormat, "--pgbench-log"},
		{"other", []string{write("x.txt", "hello, world\n")}, ErrFormat, "not a PostgreSQL csvlog or jsonlog"},
		{"empty", []string{write("empty.csv", "")}, ErrNoData, "empty"},
		{"no durations", []string{noDurations}, ErrNoData, "log_min_duration_statement = 0"},
		{"short record", []string{write("short.csv", "2026-11-30 12:00:00.000 UTC,a,b\n")}, ErrFormat, "line 1 has 3 fields"},
		{"bad quote", []string{write("q.csv", "2026-11-30 12:00:00.000 UTC,\"a\"b\n")}, ErrFormat, "line 1"},
		{"bad json", []string{write("bad.json", "{\"timestamp\":\"2026-11-30 12:00:00.000 UTC\"}\n{not json\n")}, ErrFormat, "line 2 is not a jsonlog line"},
		{"json without time", []string{write("nt.json", "{\"message\":\"x\"}\n")}, ErrFormat, "no timestamp"},
		{"mixed", []string{csvOne, jsonOne}, ErrFormat, "give files of one format"},
		{"missing", []string{filepath.Join(dir, "nope.csv")}, os.ErrNotExist, "nope.csv"},
		{"other database", []string{csvOne}, ErrNoData, "databases with round trips: app"},
	} {
		opt := LogOptions{}
		if tc.name == "other database" {
			opt.Database = "shop"
		}
		_, err := AnalyzeLogs(tc.files, opt)
		if !errors.Is(err, tc.is) || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%s: %v; want %v naming %q", tc.name, err, tc.is, tc.want)
		}
	}
}

func TestPgbenchLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFile(t, dir, name, text) }
	// Two clients, per transaction; one failure; the last line unfinished
	// (pgbench still writing it).
	per := write("per", "0 1 10000 0 1796067199 10000\n1 1 20000 0 1796067199 20000\n0 2 10000 0 1796067199 30000\n1 2 failed 0 1796067199 40000\n0 3 4000")
	f, err := AnalyzePgbench([]string{per}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "mean (ms)", msf(f.Mean), 40.0/3-1e-6, 40.0/3+1e-6)
	if f.Clients != 2 || f.Txns != 3 || f.Failed != 1 || f.Min != 10*time.Millisecond || f.Max != 20*time.Millisecond {
		t.Errorf("%+v", f)
	}
	// Client 0: first ends at 0.010, the second starts at 0.020: a 10 ms gap.
	if len(f.Gaps) != 1 || f.Gaps[0] != 10*time.Millisecond {
		t.Errorf("gaps %v, want [10ms]", f.Gaps)
	}
	// Aggregated: 5 s intervals.
	agg := write("agg", "1796067195 100 1000000 20000000 5000 30000 0 0 0\n1796067200 200 3000000 60000000 5000 40000 0 0 0\n")
	f, err = AnalyzePgbench([]string{agg}, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	within(t, "aggregated mean (ms)", msf(f.Mean), 4e3/300-1e-6, 4e3/300+1e-6)
	if !f.Aggregated || f.Txns != 300 || f.Window.Span() != 10*time.Second || f.TxnsPerSec() != 30 {
		t.Errorf("aggregated: %+v (span %v)", f, f.Window.Span())
	}
	for _, tc := range []struct{ name, text, want string }{
		{"few fields", "0 1 2\n", "3 fields"},
		{"words", "a b c d e f\n", "not a whole number"},
		{"mixed", "0 1 10000 0 1796067199 10000\n1796067195 100 1000000 20000000 5000 30000\n", "mixed"},
		{"bad latency", "0 1 x 0 1796067199 10000\n", "not a latency"},
		{"bad usec", "0 1 10 0 1796067199 1000000\n", "not below 1000000"},
		{"negative", "0 1 10 0 -5 1\n", "negative"},
	} {
		_, err := AnalyzePgbench([]string{write(tc.name, tc.text)}, time.Time{}, time.Time{})
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrFormat naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := AnalyzePgbench([]string{write("empty", "")}, time.Time{}, time.Time{}); !errors.Is(err, ErrNoData) {
		t.Errorf("empty log: %v, want ErrNoData", err)
	}
}

func TestConsoleErrors(t *testing.T) {
	good := loadJSON[ConsoleRecord](t, "console.json")
	mutate := func(f func(r *ConsoleRecord)) *ConsoleRecord {
		b := *good
		b.Samples = append([]ConsoleSample(nil), good.Samples...)
		f(&b)
		return &b
	}
	setStat := func(s *ConsoleSample, col, v string) {
		t2 := Table{Columns: s.Stats.Columns}
		i := t2.col(col)
		for _, r := range s.Stats.Rows {
			r2 := append([]string(nil), r...)
			if r2[0] == "poolsim" {
				r2[i] = v
			}
			t2.Rows = append(t2.Rows, r2)
		}
		s.Stats = t2
	}
	for _, tc := range []struct {
		name string
		rec  *ConsoleRecord
		db   string
		is   error
		want string
	}{
		{"one sample", mutate(func(r *ConsoleRecord) { r.Samples = r.Samples[:1] }), "", ErrNoData, "two console samples"},
		{"no database", good, "shop", ErrNoData, `no database "shop"`},
		{"backwards", mutate(func(r *ConsoleRecord) { setStat(&r.Samples[0], "total_xact_time", "999999999999") }), "", ErrFormat, "went down"},
		{"not a number", mutate(func(r *ConsoleRecord) { setStat(&r.Samples[len(r.Samples)-1], "total_wait_time", "lots") }), "", ErrFormat, "not a whole number"},
		{"idle", mutate(func(r *ConsoleRecord) { r.Samples[len(r.Samples)-1] = r.Samples[0] }), "", ErrNoData, "no database completed a transaction"},
		{"missing column", mutate(func(r *ConsoleRecord) { r.Samples[1].Stats = Table{Columns: []string{"database"}} }), "", ErrNotConsole, "no column total_xact_count"},
	} {
		_, err := AnalyzeConsole(tc.rec, tc.db)
		if !errors.Is(err, tc.is) || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%s: %v; want %v naming %q", tc.name, err, tc.is, tc.want)
		}
	}
}

func TestPGErrors(t *testing.T) {
	good := loadJSON[PGRecord](t, "pg.json")
	same := *good
	same.Snapshots = []PGSnapshot{good.Snapshots[0], good.Snapshots[0]}
	same.Snapshots[1].At = same.Snapshots[0].At.Add(time.Second)
	if _, err := AnalyzePG(&same); !errors.Is(err, ErrNoData) || !strings.Contains(err.Error(), "no statement ran") {
		t.Errorf("idle window: %v", err)
	}
	one := *good
	one.Snapshots = good.Snapshots[:1]
	if _, err := AnalyzePG(&one); !errors.Is(err, ErrNoData) {
		t.Errorf("one snapshot: %v", err)
	}
	// A reset between the snapshots counts the entry from zero, never
	// negative.
	reset := *good
	reset.Snapshots = []PGSnapshot{good.Snapshots[1], good.Snapshots[1]}
	reset.Snapshots[0].At = good.Snapshots[0].At
	f, err := AnalyzePG(&reset)
	if err == nil && f.Calls < 0 {
		t.Errorf("negative calls after a reset: %d", f.Calls)
	}
	noMax := *good
	noMax.Settings = Table{Columns: []string{"name", "setting", "unit"}}
	if _, err := AnalyzePG(&noMax); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "max_connections") {
		t.Errorf("no max_connections: %v", err)
	}
}

// writeFile writes text to dir/name and returns the path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTableProject(t *testing.T) {
	tb := Table{Columns: []string{"a", "b", "c"}, Rows: [][]string{{"1", "2", "3"}, {"4"}}}
	got := tb.project("c", "x", "a")
	if fmt.Sprint(got.Columns) != "[c a]" || fmt.Sprint(got.Rows) != "[[3 1] [ 4]]" {
		t.Errorf("project = %v %v", got.Columns, got.Rows)
	}
}
