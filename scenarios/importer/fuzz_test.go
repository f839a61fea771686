package importer

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/scenarios"
)

// seedFile adds up to n bytes of a fixture to a fuzz corpus.
func seedFile(f *testing.F, name string, n int) {
	b, err := os.ReadFile(fixtureDir + "/" + name)
	if err != nil {
		f.Fatalf("%v (record the fixtures: POOLSIM_RECORD_FIXTURES=1 go test ./scenarios/importer -run TestRecordFixtures)", err)
	}
	f.Add(b[:min(n, len(b))])
}

// open serves data as every file.
func openBytes(data []byte) func(string) (io.ReadCloser, error) {
	return func(string) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
}

// loads checks that a derivation that succeeded gives a scenario that
// loads.
func loads(t *testing.T, src Sources) {
	im, err := Derive(src, Options{})
	if err != nil {
		return
	}
	if _, err := scenarios.Parse(im.YAML("fuzz", ""), "fuzz"); err != nil {
		t.Fatalf("Derive succeeded with a scenario that does not load: %v", err)
	}
}

// FuzzServerLog: any bytes as a csvlog or jsonlog give facts or an error,
// never a panic, and facts that hang together.
func FuzzServerLog(f *testing.F) {
	seedFile(f, "postgresql.csv", 8000)
	seedFile(f, "postgresql.json", 8000)
	for _, s := range []string{
		"2026-11-30 12:00:00.000 UTC,app,app,1,,s,1,,,,,LOG,,\"duration: 1.5 ms  statement: BEGIN; SELECT 1\",,,,,,,,,,client backend,,0\n" +
			"2026-11-30 12:00:00.010 UTC,app,app,1,,s,2,,,,,LOG,,\"duration: 1.5 ms  statement: COMMIT\",,,,,,,,,,client backend,,0\n",
		"{\"timestamp\":\"2026-11-30 12:00:00.000 UTC\",\"session_id\":\"a\",\"dbname\":\"d\",\"message\":\"duration: 0.1 ms  execute S_1: COMMIT\"}\n",
		"2026-11-30 12:00:00.000 CET,,,,,s,,,,,,LOG,,\"duration: 1e9 ms\",,,,,,,,\n",
		"", "{", "\"", "2026-11-30 12:00:00.000 UTC,\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lg, err := analyzeLogs([]string{"fuzz.csv"}, openBytes(data), LogOptions{})
		if err != nil {
			return
		}
		if lg.Txns < 1 || lg.TxnTrips < lg.Txns || len(lg.InTxnGaps) > lg.TxnTrips || len(lg.RoundTrips) == 0 {
			t.Fatalf("facts do not hang together: %d transactions, %d trips, %d gaps, %d round trips", lg.Txns, lg.TxnTrips, len(lg.InTxnGaps), len(lg.RoundTrips))
		}
		loads(t, Sources{Log: lg})
	})
}

// FuzzPgbenchLog: any bytes as a pgbench log.
func FuzzPgbenchLog(f *testing.F) {
	seedFile(f, "pgbench_log.0", 2000)
	for _, s := range []string{
		"1796067195 100 1000000 20000000 5000 30000 0 0 0\n1796067200 200 3000000 60000000 5000 40000 0 0 0\n",
		"0 1 failed 0 1796067199 1\n0 2 skipped 0 1796067199 2\n0 3 1e300 0 1796067199 3\n",
		"9223372036854775807 1 2 3 4 5\n", "0 1 10 0 9223372036854775807 999999\n", "", "\n\n", "0 1",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		pb, err := analyzePgbench([]string{"fuzz"}, openBytes(data), time.Time{}, time.Time{})
		if err != nil {
			return
		}
		if pb.Txns < 1 || pb.Mean < 0 || pb.Min > pb.Max || pb.Window.Span() <= 0 {
			t.Fatalf("facts do not hang together: %+v", pb)
		}
	})
}

// FuzzSplitKinds: any text splits without a panic into at most one kind
// per semicolon-separated part.
func FuzzSplitKinds(f *testing.F) {
	for _, s := range []string{"BEGIN; SELECT 1; COMMIT", "SELECT $a$;$a$; END", "/* /* */ COMMIT", "'", "$", "$1$", "--", "ROLLBACK TO x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if k := splitKinds(s); len(k) > strings.Count(s, ";")+1 {
			t.Fatalf("splitKinds(%q) = %v: more statements than parts", s, k)
		}
		_ = housekeeping(s)
	})
}

// FuzzConsoleRecord: any JSON as a saved console sampling (--from-raw).
func FuzzConsoleRecord(f *testing.F) {
	seedFile(f, "console.json", 1<<20)
	f.Add([]byte(`{"samples":[{"at":"2026-11-30T12:00:00Z","stats":{"columns":["database","total_xact_count","total_query_count","total_xact_time","total_query_time","total_wait_time"],"rows":[["a","1","1","1","1","1"]]}},{"at":"2026-11-30T12:00:01Z","stats":{"columns":["database","total_xact_count","total_query_count","total_xact_time","total_query_time","total_wait_time"],"rows":[["a","2","9","5","9","99"]]},"pools":{"columns":["database","cl_active"],"rows":[["a","x"]]}}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec ConsoleRecord
		if json.Unmarshal(data, &rec) != nil {
			return
		}
		c, err := AnalyzeConsole(&rec, "")
		if err != nil {
			return
		}
		loads(t, Sources{Console: c})
	})
}

// FuzzPGRecord: any JSON as a saved pg_stat_statements sampling.
func FuzzPGRecord(f *testing.F) {
	seedFile(f, "pg.json", 1<<20)
	f.Add([]byte(`{"settings":{"columns":["name","setting"],"rows":[["max_connections","5"]]},"snapshots":[{"at":"2026-11-30T12:00:00Z","statements":{"columns":["calls","total_ms","stddev_ms","query"],"rows":[["1","1","0","COMMIT"]]}},{"at":"2026-11-30T12:00:01Z","statements":{"columns":["calls","total_ms","stddev_ms","query"],"rows":[["9","1e308","1e308","COMMIT"]]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var rec PGRecord
		if json.Unmarshal(data, &rec) != nil {
			return
		}
		pg, err := AnalyzePG(&rec)
		if err != nil {
			return
		}
		if pg.Calls < 1 || pg.Mean < 0 || pg.Stddev < 0 {
			t.Fatalf("facts do not hang together: calls %d, mean %v, stddev %v", pg.Calls, pg.Mean, pg.Stddev)
		}
		loads(t, Sources{PG: pg})
	})
}
