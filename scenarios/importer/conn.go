package importer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Conditions callers (and the command's exit status) tell apart.
var (
	// ErrUnreachable: nothing answered at the DSN's address, or the
	// connection broke.
	ErrUnreachable = errors.New("cannot reach the server")
	// ErrRefused: the server answered and refused the login or a
	// statement for lack of permission.
	ErrRefused = errors.New("refused")
	// ErrNotConsole: --pgbouncer does not lead to PgBouncer's admin console.
	ErrNotConsole = errors.New("not PgBouncer's admin console")
	// ErrNoPgStatStatements: the pg_stat_statements extension is not
	// loaded or not created in the database.
	ErrNoPgStatStatements = errors.New("pg_stat_statements is not available")
	// ErrFormat: a file is not in the format its flag reads.
	ErrFormat = errors.New("not the expected format")
	// ErrNoData: a source holds nothing import can use (a log without
	// durations, an idle pool, a window without transactions).
	ErrNoData = errors.New("nothing to import")
	// ErrBadInput: an option or a DSN does not parse.
	ErrBadInput = errors.New("bad input")
)

// queryTimeout bounds one statement on a source connection.
const queryTimeout = 10 * time.Second

// dialTimeout bounds a connection attempt when the DSN sets none.
const dialTimeout = 10 * time.Second

// where names a connection's target without its password.
func where(cfg *pgconn.Config) string {
	return fmt.Sprintf("%s:%d (user %s, database %s)", cfg.Host, cfg.Port, cfg.User, cfg.Database)
}

// parseDSN reads a connection string for the flag named flag.
func parseDSN(flag, dsn string) (*pgconn.Config, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: the DSN does not parse (want e.g. postgres://user@host:6432/pgbouncer): %v", ErrBadInput, flag, redact(err))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = dialTimeout
	}
	return cfg, nil
}

// redact drops a password pgconn may quote back in an error.
func redact(err error) string {
	s := err.Error()
	if i := strings.Index(s, "password="); i >= 0 {
		end := strings.IndexAny(s[i:], " &'\"")
		if end < 0 {
			end = len(s) - i
		}
		s = s[:i] + "password=xxx" + s[i+end:]
	}
	return s
}

// dial connects with cfg; flag names the source in errors.
func dial(ctx context.Context, flag string, cfg *pgconn.Config) (*pgconn.PgConn, error) {
	c, err := pgconn.ConnectConfig(ctx, cfg)
	if err == nil {
		return c, nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		hint := ""
		switch {
		case pe.Message == "not allowed":
			hint = fmt.Sprintf(": user %s may not use PgBouncer's console; add it to admin_users or stats_users in pgbouncer.ini", cfg.User)
		case strings.Contains(pe.Message, "authentication failed"):
			hint = ": check the user and password (PgBouncer: the auth_file; PostgreSQL: pg_hba.conf)"
		case strings.HasPrefix(pe.Message, "no such database"):
			hint = ": PgBouncer's console is the database pgbouncer"
		}
		return nil, fmt.Errorf("%w: %s: %s refused the login: %s%s", ErrRefused, flag, where(cfg), pe.Message, hint)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: connect to %s: %w", flag, where(cfg), ctx.Err())
	}
	return nil, fmt.Errorf("%w: %s: %s: %v (is it running and listening there?)", ErrUnreachable, flag, where(cfg), redact(err))
}

// query runs one simple-protocol statement and returns its last result
// as a Table.
func query(ctx context.Context, c *pgconn.PgConn, sql string) (Table, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	results, err := c.Exec(ctx, sql).ReadAll()
	if err != nil {
		return Table{}, err
	}
	if len(results) == 0 {
		return Table{}, fmt.Errorf("%s: no result", sql)
	}
	r := results[len(results)-1]
	t := Table{Columns: make([]string, len(r.FieldDescriptions)), Rows: make([][]string, len(r.Rows))}
	for i, f := range r.FieldDescriptions {
		t.Columns[i] = f.Name
	}
	for i, vals := range r.Rows {
		t.Rows[i] = make([]string, len(vals))
		for j, v := range vals {
			t.Rows[i][j] = string(v)
		}
	}
	return t, nil
}

// statementError says what a failed statement means for a source.
func statementError(flag, sql string, cfg *pgconn.Config, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == "42501" {
			return fmt.Errorf("%w: %s: %s as %s: permission denied: %s", ErrRefused, flag, sql, cfg.User, pe.Message)
		}
		return fmt.Errorf("%s: %s: %s (SQLSTATE %s)", flag, sql, pe.Message, pe.Code)
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %s: %w", flag, sql, err)
	}
	return fmt.Errorf("%w: %s: %s: %v", ErrUnreachable, flag, sql, err)
}
