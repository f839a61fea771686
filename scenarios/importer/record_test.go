package importer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/importtest"
	"github.com/poolsim/poolsim/lab/pgcluster"
)

// The fixtures in testdata/lab are recorded from a real run by
//
//	POOLSIM_RECORD_FIXTURES=1 go test ./scenarios/importer -run TestRecordFixtures -v
//
// (see testdata/lab/README.md); the unit tests read them.
const fixtureDir = "testdata/lab"

// The recorded run: 6 pgbench clients through PgBouncer 1.18 in
// transaction mode with a pool of 2, three round trips of 20 ms with 20 ms
// between them, sampled for 5 s.
const (
	fixClients = 6
	fixPool    = 2
	fixStmts   = 3
	fixQuery   = 20 * time.Millisecond
	fixThink   = 20 * time.Millisecond
	fixWindow  = 5 * time.Second
)

func TestRecordFixtures(t *testing.T) {
	if os.Getenv("POOLSIM_RECORD_FIXTURES") != "1" {
		t.Skip("records testdata/lab from a live run: POOLSIM_RECORD_FIXTURES=1")
	}
	lab := importtest.Start(t)
	pb := lab.PgBouncer(t, fixPool)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	bench := lab.StartPgbench(t, pb.DSN(pgcluster.UserDatabase, pgcluster.UserName), dir,
		importtest.Script(fixStmts, fixQuery, fixThink), fixClients, fixWindow+4*time.Second)
	if err := importtest.WaitClients(ctx, pb.AdminDSN(), pgcluster.UserDatabase, fixClients); err != nil {
		t.Fatal(err)
	}
	if err := importtest.WaitXacts(ctx, pb.AdminDSN(), pgcluster.UserDatabase, fixClients); err != nil {
		t.Fatal(err)
	}
	col, err := Collect(ctx, Request{PgBouncer: pb.AdminDSN(), PG: lab.Cluster.UserDSN(), Interval: time.Second, Duration: fixWindow})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bench.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, "console.json", col.ConsoleRecord)
	writeJSON(t, "pg.json", col.PGRecord)
	from, to := start.Add(-time.Second), end.Add(time.Second)
	copyCSVExcerpt(t, lab.CSVLogs(t), filepath.Join(fixtureDir, "postgresql.csv"), from, to)
	copyJSONExcerpt(t, lab.JSONLogs(t), filepath.Join(fixtureDir, "postgresql.json"), from, to)
	for i, f := range bench.Logs(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := "pgbench_log.0"
		if i > 0 {
			name = "pgbench_log.1"
		}
		if err := os.WriteFile(filepath.Join(fixtureDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recorded %s: PgBouncer %s, PostgreSQL %s, window %s", fixtureDir, col.ConsoleRecord.Version, col.PGRecord.Version, col.Console.Window)
}

func writeJSON(t *testing.T, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyCSVExcerpt copies the csvlog records logged in [from, to], byte for
// byte.
func copyCSVExcerpt(t *testing.T, files []string, dst string, from, to time.Time) {
	t.Helper()
	var out bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := csv.NewReader(bytes.NewReader(data))
		r.FieldsPerRecord = -1
		prev := int64(0)
		for {
			rec, err := r.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			next := r.InputOffset()
			if at, _, err := parseLogTime(rec[0]); err == nil && !at.Before(from) && !at.After(to) {
				out.Write(data[prev:next])
			}
			prev = next
		}
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyJSONExcerpt copies the jsonlog lines logged in [from, to].
func copyJSONExcerpt(t *testing.T, files []string, dst string, from, to time.Time) {
	t.Helper()
	var out bytes.Buffer
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var j jsonLine
			if json.Unmarshal(sc.Bytes(), &j) != nil {
				continue
			}
			if at, _, err := parseLogTime(j.Timestamp); err == nil && !at.Before(from) && !at.After(to) {
				out.Write(sc.Bytes())
				out.WriteByte('\n')
			}
		}
		r.Close()
	}
	if err := os.WriteFile(dst, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
