package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/poolsim/poolsim/sim"
)

// Statement kinds (the validate: section's statement, validate.Live.Statement).
const (
	KindSleep = "sleep" // SELECT pg_sleep(seconds)
	KindCPU   = "cpu"   // SELECT count(*) FROM generate_series(1, n), n calibrated
	KindSQL   = "sql"   // the user's own statement
	// KindPgbenchSelect is pgbench's built-in select-only transaction (-S):
	// SELECT abalance FROM pgbench_accounts WHERE aid = :aid, with aid
	// drawn uniformly from the accounts, against a database pgbench -i
	// initialised. Its server time is what it is: the validator measures it.
	KindPgbenchSelect = "pgbench-select"
)

// PgbenchAccountsPerScale is how many pgbench_accounts rows pgbench -i
// creates per unit of scale factor.
const PgbenchAccountsPerScale = 100_000

// Statement turns a wanted server time into the SQL text of one statement.
type Statement struct {
	Kind string
	// SQL is the statement run as is when Kind is KindSQL.
	SQL string
	// RowNs is the server time per generate_series row for KindCPU, from
	// CalibrateCPU.
	RowNs float64
	// Joins joins that many one-row generate_series to a KindCPU
	// statement: each adds little to its execution and much to its
	// planning (the planner weighs every join order), which is how a
	// prepared-statement run gives its statement a parse and plan cost
	// (see Joined).
	Joins int
	// Accounts is how many pgbench_accounts rows a KindPgbenchSelect
	// statement draws its aid from (100,000 per pgbench scale factor).
	Accounts int64
}

// Next is the next statement a client runs for a wanted server time q:
// Text(q), except that a pgbench select draws its aid from r.
func (s Statement) Next(q time.Duration, r *sim.Rand) string {
	if s.Kind == KindPgbenchSelect {
		return PgbenchSelect(1 + int64(r.IntN(uint64(max(1, s.Accounts)))))
	}
	return s.Text(q)
}

// PgbenchSelect is pgbench -S's statement for account aid.
func PgbenchSelect(aid int64) string {
	return "SELECT abalance FROM pgbench_accounts WHERE aid = " + strconv.FormatInt(aid, 10)
}

// joined is the statement of a KindCPU statement of rows rows (a number or
// a parameter) with s.Joins one-row joins.
func (s Statement) joined(rows string) string {
	var b strings.Builder
	b.WriteString("SELECT count(*) FROM generate_series(1, " + rows + ") g")
	for i := range s.Joins {
		b.WriteString(", generate_series(1, 1) j" + strconv.Itoa(i+1))
	}
	return b.String()
}

// Text is the statement that should take q at the server. pg_sleep rounds
// its wait up to whole milliseconds, so a sleep takes a little longer than
// q; the validator measures by how much.
func (s Statement) Text(q time.Duration) string {
	switch s.Kind {
	case KindSQL:
		return strings.TrimRight(strings.TrimSpace(s.SQL), ";")
	case KindPgbenchSelect:
		return PgbenchSelect(1)
	case KindCPU:
		n := int64(1)
		if s.RowNs > 0 {
			n = max(1, int64(math.Round(float64(q)/s.RowNs)))
		}
		if s.Joins > 0 {
			return s.joined(strconv.FormatInt(n, 10))
		}
		return "SELECT count(*) FROM generate_series(1, " + strconv.FormatInt(n, 10) + ")"
	default:
		return "SELECT pg_sleep(" + strconv.FormatFloat(max(0, q.Seconds()), 'f', -1, 64) + ")"
	}
}

// Validate checks the kind.
func (s Statement) Validate() error {
	switch s.Kind {
	case KindSleep:
	case KindCPU:
		if !(s.RowNs > 0) {
			return errors.New("load: cpu statement not calibrated (run CalibrateCPU)")
		}
	case KindSQL:
		if strings.TrimSpace(s.SQL) == "" {
			return errors.New("load: sql statement is empty")
		}
	case KindPgbenchSelect:
		if s.Accounts <= 0 {
			return fmt.Errorf("load: pgbench-select statement: %d accounts: want the pgbench_accounts rows (100000 per scale factor)", s.Accounts)
		}
	default:
		return fmt.Errorf("load: statement kind %q: want sleep, cpu, sql or pgbench-select", s.Kind)
	}
	return nil
}

// Time runs sql n times on conn, one at a time, and returns each round
// trip, sorted. Every run is bounded by ctx.
func Time(ctx context.Context, conn *pgconn.PgConn, sql string, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		t := time.Now()
		if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
			return nil, fmt.Errorf("load: time %q: %w", sql, err)
		}
		out = append(out, time.Since(t))
	}
	slices.Sort(out)
	return out, nil
}

// Median of sorted durations.
func Median(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[len(sorted)/2]
}

// CalibrateCPU finds how long one generate_series row takes on conn's
// server, so that Statement{Kind: KindCPU} takes target: it times a
// probe-sized statement, scales it to target, times that and corrects once.
// The time of an empty query (the round trip) is subtracted.
func CalibrateCPU(ctx context.Context, conn *pgconn.PgConn, target time.Duration) (float64, error) {
	if target <= 0 {
		return 0, fmt.Errorf("load: calibrate cpu: target %v: want above 0", target)
	}
	empty, err := Time(ctx, conn, ";", 20)
	if err != nil {
		return 0, err
	}
	rt := Median(empty)
	rowNs := 0.0
	n := int64(100_000)
	for range 3 {
		s := Statement{Kind: KindCPU, RowNs: 1}
		d, err := Time(ctx, conn, s.Text(time.Duration(n)), 7)
		if err != nil {
			return 0, err
		}
		server := max(Median(d)-rt, time.Microsecond)
		rowNs = float64(server) / float64(n)
		n = max(1, int64(float64(target)/rowNs))
	}
	return rowNs, nil
}

// Prepared statements (workload.statements, workload.prepare_threshold):
// statement k of K is one fixed text per k — the kind's statement with its
// time as the parameter $1 and k in a comment — so that each k is a
// separate prepared statement whose execution time still varies per
// execution, as the model's does.

// PreparedText is the text of statement k (0-based): the same for every
// execution, with its time as parameter $1 (see Param).
func (s Statement) PreparedText(k int) string {
	tag := " /* poolsim statement " + strconv.Itoa(k+1) + " */"
	switch s.Kind {
	case KindCPU:
		return s.joined("$1::int8") + tag
	case KindSleep:
		return "SELECT pg_sleep($1::float8)" + tag
	}
	return ""
}

// Param is the value of PreparedText's $1 that makes it take q at the
// server: generate_series rows for KindCPU, seconds for KindSleep.
func (s Statement) Param(q time.Duration) string {
	if s.Kind == KindCPU {
		n := int64(1)
		if s.RowNs > 0 {
			n = max(1, int64(math.Round(float64(q)/s.RowNs)))
		}
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatFloat(max(0, q.Seconds()), 'f', -1, 64)
}
