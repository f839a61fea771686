package importer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ownTag marks import's own statements, so pg_stat_statements' rows for
// them are left out.
const ownTag = "/* poolsim import */"

// pgSettingNames are the pg_settings rows --pg reads.
var pgSettingNames = []string{"max_connections", "superuser_reserved_connections", "reserved_connections",
	"shared_preload_libraries", "log_min_duration_statement", "log_duration", "log_statement", "log_connections",
	"log_disconnections", "log_destination", "logging_collector", "log_timezone", "lc_messages",
	"pg_stat_statements.track", "pg_stat_statements.track_utility", "pg_stat_statements.max", "track_activities"}

// PGSnapshot is pg_stat_statements at one moment, the current database's
// rows, as sent.
type PGSnapshot struct {
	At         time.Time `json:"at"`
	Statements Table     `json:"statements"`
	Dealloc    int64     `json:"dealloc"` // pg_stat_statements_info.dealloc (PostgreSQL 14+), -1 when unknown
}

// PGRecord is what --pg read: the server's version and settings, and two
// snapshots of pg_stat_statements --duration apart.
type PGRecord struct {
	Version    string       `json:"version"`
	VersionNum int          `json:"version_num"`
	Database   string       `json:"database"`
	Settings   Table        `json:"settings"` // name, setting, unit
	Snapshots  []PGSnapshot `json:"snapshots"`
}

// SamplePG reads PostgreSQL at dsn: its settings, then pg_stat_statements
// twice, duration apart.
func SamplePG(ctx context.Context, dsn string, duration time.Duration) (*PGRecord, error) {
	const flag = "--pg"
	if duration <= 0 {
		return nil, fmt.Errorf("%w: --duration must be above 0", ErrBadInput)
	}
	cfg, err := parseDSN(flag, dsn)
	if err != nil {
		return nil, err
	}
	c, err := dial(ctx, flag, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	run := func(sql string) (Table, error) {
		t, err := query(ctx, c, ownTag+" "+sql)
		if err != nil {
			return t, pgStatError(flag, cfg, sql, err)
		}
		return t, nil
	}
	rec := &PGRecord{}
	v, err := run("SELECT current_setting('server_version'), current_setting('server_version_num'), current_database()")
	if err != nil {
		return nil, err
	}
	if len(v.Rows) != 1 || len(v.Rows[0]) != 3 {
		return nil, fmt.Errorf("%s: %s: the server's version query returned %d rows", flag, where(cfg), len(v.Rows))
	}
	rec.Version, rec.Database = v.Rows[0][0], v.Rows[0][2]
	if rec.VersionNum, err = strconv.Atoi(v.Rows[0][1]); err != nil {
		return nil, fmt.Errorf("%s: %s: server_version_num %q is not a number", flag, where(cfg), v.Rows[0][1])
	}
	if rec.Settings, err = run("SELECT name, setting, unit FROM pg_settings WHERE name IN ('" + strings.Join(pgSettingNames, "', '") + "') ORDER BY name"); err != nil {
		return nil, err
	}
	ext, err := run("SELECT extversion FROM pg_extension WHERE extname = 'pg_stat_statements'")
	if err != nil {
		return nil, err
	}
	if len(ext.Rows) == 0 {
		return nil, noExtension(flag, rec)
	}
	snap := func() (PGSnapshot, error) {
		s := PGSnapshot{Dealloc: -1}
		t0 := time.Now()
		var err error
		if s.Statements, err = run(statementsSQL(rec.VersionNum)); err != nil {
			return s, err
		}
		s.At = t0.Add(time.Since(t0) / 2)
		if rec.VersionNum >= 140000 {
			d, err := run("SELECT dealloc FROM pg_stat_statements_info")
			if err != nil {
				return s, err
			}
			if len(d.Rows) == 1 {
				if s.Dealloc, err = strconv.ParseInt(d.Rows[0][0], 10, 64); err != nil {
					s.Dealloc = -1
				}
			}
		}
		return s, nil
	}
	first, err := snap()
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Until(first.At.Add(duration)))
	select {
	case <-ctx.Done():
		t.Stop()
		return nil, fmt.Errorf("%s: waiting for the second snapshot: %w", flag, ctx.Err())
	case <-t.C:
	}
	second, err := snap()
	if err != nil {
		return nil, err
	}
	rec.Snapshots = []PGSnapshot{first, second}
	return rec, nil
}

// statementsSQL reads the current database's pg_stat_statements rows; the
// time columns were renamed in PostgreSQL 13 and toplevel came in 14.
func statementsSQL(versionNum int) string {
	total, stddev, top := "total_exec_time", "stddev_exec_time", "toplevel"
	if versionNum < 130000 {
		total, stddev = "total_time", "stddev_time"
	}
	if versionNum < 140000 {
		top = "true"
	}
	return fmt.Sprintf("SELECT userid, queryid, %s AS toplevel, query, calls, %s AS total_ms, %s AS stddev_ms FROM pg_stat_statements "+
		"WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())", top, total, stddev)
}

// pgStatError explains a failed statement of --pg.
func pgStatError(flag string, cfg *pgconn.Config, sql string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "55000" && strings.Contains(pe.Message, "pg_stat_statements"):
			return fmt.Errorf("%w: %s: %s: %s: add pg_stat_statements to shared_preload_libraries in postgresql.conf and restart PostgreSQL",
				ErrNoPgStatStatements, flag, where(cfg), pe.Message)
		case pe.Code == "42P01" && strings.Contains(sql, "pg_stat_statements"):
			return fmt.Errorf("%w: %s: %s: %s: run CREATE EXTENSION pg_stat_statements in database %s (with pg_stat_statements in shared_preload_libraries)",
				ErrNoPgStatStatements, flag, where(cfg), pe.Message, cfg.Database)
		}
	}
	return statementError(flag, sql, cfg, err)
}

// noExtension says how to enable pg_stat_statements, depending on whether
// its library is loaded already.
func noExtension(flag string, rec *PGRecord) error {
	loaded := false
	if r, ok := rec.Settings.find("name", "shared_preload_libraries"); ok {
		for _, lib := range strings.Split(r.str("setting"), ",") {
			if strings.Trim(strings.TrimSpace(lib), `"`) == "pg_stat_statements" {
				loaded = true
			}
		}
	}
	if loaded {
		return fmt.Errorf("%w: %s: the extension is not created in database %s: run CREATE EXTENSION pg_stat_statements there (its library is already in shared_preload_libraries)",
			ErrNoPgStatStatements, flag, rec.Database)
	}
	return fmt.Errorf("%w: %s: add pg_stat_statements to shared_preload_libraries in postgresql.conf, restart PostgreSQL, then run CREATE EXTENSION pg_stat_statements in database %s",
		ErrNoPgStatStatements, flag, rec.Database)
}

// StatementFacts is one pg_stat_statements entry over the window.
type StatementFacts struct {
	Query        string
	Calls        int64
	Total        time.Duration
	Mean, Stddev time.Duration // over the window's calls (from the two snapshots' sums and sums of squares)
	Kind         stmtKind
}

// PGFacts is what PostgreSQL says over the window between two snapshots.
type PGFacts struct {
	Version  string
	Database string
	Window   Window

	MaxConnections    int // max_connections
	SuperuserReserved int // superuser_reserved_connections
	Reserved          int // reserved_connections (PostgreSQL 16+), 0 before
	Setting           map[string]string

	Statements    []StatementFacts // by total time, most first; import's own left out
	Calls         int64
	Total         time.Duration
	Mean, Stddev  time.Duration // over every call of every statement
	Begins, Ends  int64         // calls of BEGIN/START TRANSACTION and of COMMIT/END/ROLLBACK/ABORT
	Hidden        int64         // calls whose text the user may not read (<insufficient privilege>)
	Evicted       int64         // entries pg_stat_statements deallocated in the window (-1 unknown)
	UtilityHidden bool          // pg_stat_statements.track_utility is off: BEGIN/COMMIT are not counted
}

// UsableSlots is max_connections less the slots reserved for superusers
// and pg_use_reserved_connections: what an application's role can open.
func (f *PGFacts) UsableSlots() int {
	return f.MaxConnections - f.SuperuserReserved - f.Reserved
}

// AnalyzePG works out the window's statement mix from a recording.
func AnalyzePG(rec *PGRecord) (*PGFacts, error) {
	const flag = "--pg"
	if rec == nil || len(rec.Snapshots) != 2 {
		n := 0
		if rec != nil {
			n = len(rec.Snapshots)
		}
		return nil, fmt.Errorf("%w: %s: two pg_stat_statements snapshots are needed, got %d", ErrNoData, flag, n)
	}
	a, b := rec.Snapshots[0], rec.Snapshots[1]
	f := &PGFacts{Version: rec.Version, Database: rec.Database, Setting: map[string]string{}, Evicted: -1,
		Window: Window{From: a.At, To: b.At, Samples: 2}}
	if f.Window.Span() <= 0 {
		return nil, fmt.Errorf("%w: %s: the snapshots' times do not increase", ErrFormat, flag)
	}
	for _, r := range rec.Settings.Rows {
		rr := row{&rec.Settings, r}
		f.Setting[rr.str("name")] = rr.str("setting")
	}
	for _, s := range []struct {
		name string
		dst  *int
	}{{"max_connections", &f.MaxConnections}, {"superuser_reserved_connections", &f.SuperuserReserved}, {"reserved_connections", &f.Reserved}} {
		v, ok := f.Setting[s.name]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s: pg_settings %s = %q is not a count", ErrFormat, flag, s.name, v)
		}
		*s.dst = n
	}
	if f.MaxConnections < 1 {
		return nil, fmt.Errorf("%w: %s: pg_settings has no max_connections", ErrFormat, flag)
	}
	f.UtilityHidden = f.Setting["pg_stat_statements.track_utility"] == "off"
	if a.Dealloc >= 0 && b.Dealloc >= a.Dealloc {
		f.Evicted = b.Dealloc - a.Dealloc
	}
	before := map[string]sums{}
	for _, r := range a.Statements.Rows {
		k, s, err := statementSums(row{&a.Statements, r})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: first snapshot: %v", ErrFormat, flag, err)
		}
		before[k] = before[k].add(s)
	}
	after := map[string]sums{}
	var order []string
	for _, r := range b.Statements.Rows {
		k, s, err := statementSums(row{&b.Statements, r})
		if err != nil {
			return nil, fmt.Errorf("%w: %s: second snapshot: %v", ErrFormat, flag, err)
		}
		if _, seen := after[k]; !seen {
			order = append(order, k)
		}
		after[k] = after[k].add(s)
	}
	var all sums
	for _, k := range order {
		d := after[k].minus(before[k])
		if d.n <= 0 || strings.Contains(d.text, ownTag) {
			continue // idle in the window, reset, or import's own
		}
		sf := StatementFacts{Query: d.text, Calls: d.n, Total: ms(d.sum)}
		mean, sd := d.meanSD()
		sf.Mean, sf.Stddev = ms(mean), ms(sd)
		if d.text == "<insufficient privilege>" || d.text == "" {
			f.Hidden += d.n
		} else if kinds := splitKinds(d.text); len(kinds) > 0 {
			sf.Kind = kinds[0]
		}
		switch sf.Kind {
		case kBegin:
			f.Begins += d.n
		case kEnd:
			f.Ends += d.n
		}
		f.Statements = append(f.Statements, sf)
		all = all.add(d)
	}
	if all.n == 0 {
		return nil, fmt.Errorf("%w: %s: no statement ran in database %s during the %v window (pg_stat_statements saw none)", ErrNoData, flag, f.Database, roundDur(f.Window.Span()))
	}
	sort.SliceStable(f.Statements, func(i, j int) bool { return f.Statements[i].Total > f.Statements[j].Total })
	f.Calls, f.Total = all.n, ms(all.sum)
	mean, sd := all.meanSD()
	f.Mean, f.Stddev = ms(mean), ms(sd)
	return f, nil
}

// sums are one statement's counters: calls, the sum of times and the sum
// of squared times (milliseconds), so that two snapshots' difference gives
// the window's mean and standard deviation.
type sums struct {
	text      string
	n         int64
	sum, sum2 float64
}

func (s sums) add(o sums) sums {
	if s.text == "" {
		s.text = o.text
	}
	s.n += o.n
	s.sum += o.sum
	s.sum2 += o.sum2
	return s
}

func (s sums) minus(o sums) sums {
	if s.n < o.n { // the entry was reset or evicted and came back: count it from 0
		return s
	}
	s.n -= o.n
	s.sum -= o.sum
	s.sum2 -= o.sum2
	return s
}

func (s sums) meanSD() (mean, sd float64) {
	if s.n == 0 {
		return 0, 0
	}
	mean = s.sum / float64(s.n)
	v := s.sum2/float64(s.n) - mean*mean
	return math.Max(mean, 0), math.Sqrt(math.Max(v, 0))
}

// statementSums reads one pg_stat_statements row: its key (user, query id,
// top level) and sums. pg_stat_statements' stddev is the population one:
// the sum of squares is calls × (stddev² + mean²).
func statementSums(r row) (string, sums, error) {
	n, err := r.int("calls")
	if err != nil {
		return "", sums{}, err
	}
	total, err := r.float("total_ms")
	if err != nil {
		return "", sums{}, err
	}
	sd, err := r.float("stddev_ms")
	if err != nil {
		return "", sums{}, err
	}
	if n < 0 || total < 0 || sd < 0 {
		return "", sums{}, fmt.Errorf("negative calls, total or stddev (%d, %v, %v)", n, total, sd)
	}
	s := sums{text: r.str("query"), n: n, sum: total}
	if n > 0 {
		mean := total / float64(n)
		s.sum2 = float64(n) * (sd*sd + mean*mean)
	}
	key := r.str("userid") + "|" + r.str("queryid") + "|" + r.str("toplevel")
	if r.str("queryid") == "" {
		key += "|" + s.text
	}
	return key, s, nil
}

// ms turns milliseconds into a duration (to the nanosecond).
func ms(x float64) time.Duration { return time.Duration(math.Round(x * 1e6)) }
