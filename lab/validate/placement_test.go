package validate

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/lab/pgcluster"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
)

func TestParseLastCore(t *testing.T) {
	// A command name with a space and a parenthesis; field 39 is 1.
	line := "4242 (pg (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 1 0 77 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	if c, ok := parseLastCore(line); !ok || c != 1 {
		t.Errorf("parseLastCore = %d, %v; want 1, true", c, ok)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2 3"} {
		if _, ok := parseLastCore(bad); ok {
			t.Errorf("parseLastCore(%q) is ok", bad)
		}
	}
	// Through an open file, twice: the second read is a fresh one from
	// the start; a process that is not there reads nothing.
	var s statFiles
	defer s.close()
	for range 2 {
		if c, ok := s.lastCore(os.Getpid()); !ok || c < 0 || c >= runtime.NumCPU() {
			t.Errorf("statFiles.lastCore(self) = %d, %v", c, ok)
		}
	}
	if _, ok := s.lastCore(1 << 30); ok {
		t.Error("statFiles.lastCore of no process is ok")
	}
	s.keep(nil)
	if len(s.fds) != 0 {
		t.Errorf("keep(nil) left %d files open", len(s.fds))
	}
}

// TestWatchPlacementServerWithItself: watched as its own pooler, the
// role's one server shares its core at every sample, and the sampler
// finds it through pg_stat_activity on a connection of its own.
func TestWatchPlacementServerWithItself(t *testing.T) {
	needPostgres(t)
	cl := pgclustertest.Start(t, pgcluster.Options{MaxConnections: 20, SuperuserReservedConnections: pgcluster.ReserveNone})
	srv, err := parseServer(cl.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, cl.UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer closeConn(conn)
	rs, err := conn.Exec(ctx, "SELECT pg_backend_pid()").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(rs[0].Rows[0][0]))
	for {
		stop := watchPlacement(ctx, pid, cl.SuperuserDSN(srv.database), srv.user)
		// Work for the server while the sampler looks.
		if err := conn.Exec(ctx, "SELECT pg_sleep(0.2)").Close(); err != nil {
			t.Fatal(err)
		}
		pl := stop()
		if pl != nil {
			if pl.Shared != 1 || pl.Samples < 1 {
				t.Errorf("placement %+v: want every sample shared", *pl)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatal("no placement sample within a minute")
		}
	}
}

func TestRunsText(t *testing.T) {
	pt := CurvePoint{Runs: []Measured{{TPS: 15057.4, Placement: &Placement{Samples: 9, Shared: 0}}, {TPS: 26062, Placement: &Placement{Samples: 9, Shared: 1}}, {TPS: 20000}}}
	if got, want := pt.runsText(), "15057 (0 %), 26062 (100 %), 20000"; got != want {
		t.Errorf("runsText = %q, want %q", got, want)
	}
}
