package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/importer"
)

func init() {
	register(command{name: "import", short: "write a scenario from your PgBouncer, PostgreSQL and logs, and check it", run: runImport})
}

const importHelp = `Usage: poolsim import [--pgbouncer DSN] [--pg DSN] [--csvlog FILE ...] [--pgbench-log FILE ...]
                      [--duration 60s] [--interval 1s] [--database NAME] [--out FILE] [--replications N]

Writes a scenario from what your system already measures, with a comment
above every value saying where it came from (source, window, formula), then
simulates it with the observed settings and prints the prediction beside the
observation with a verdict. The sources combine:

  --pgbouncer DSN      PgBouncer's admin console (database pgbouncer; the
                       user must be in admin_users or stats_users), sampled
                       every --interval for --duration: SHOW STATS (transactions,
                       queries, their times and the wait for a server), SHOW
                       POOLS (clients, waiting clients, linked servers), SHOW
                       CLIENTS (turnover), SHOW CONFIG and SHOW DATABASES (the
                       pool settings in force).
  --pg DSN             PostgreSQL: pg_stat_statements twice, --duration apart
                       (each statement's calls, mean and stddev in the window;
                       needs shared_preload_libraries = 'pg_stat_statements'
                       and CREATE EXTENSION pg_stat_statements), and
                       pg_settings (max_connections, reserved slots).
  --csvlog FILE        PostgreSQL csvlog or jsonlog files (repeat the flag for
                       several, oldest first) written with
                       log_min_duration_statement = 0 (and log_connections,
                       log_disconnections): the server's time of every round
                       trip, transactions, gaps between statements, sessions.
  --pgbench-log FILE   pgbench -l logs (per transaction or --aggregate-interval):
                       clients, the transaction rate and pgbench's latency.

The files are read over the live sources' window when there is one (their
clocks must agree: log_timezone = 'UTC' helps), else over their own span.

Output: the scenario YAML, with the fidelity report as a comment block at its
end, on stdout; with --out FILE the scenario goes to FILE and the report to
stdout. Run it like any scenario: poolsim run FILE --set
pooler.default_pool_size=40 asks what another pool size would do.

Examples:
  poolsim import --pgbouncer postgres://admin@db1:6432/pgbouncer --pg postgres://app@db1:5432/app \
                 --csvlog /var/log/postgresql/postgresql.csv --duration 2m --out app.yaml
  poolsim import --csvlog postgresql-Mon.csv --pgbench-log pgbench_log.4711 > bench.yaml
  poolsim import --pgbouncer ... --pg ... --save-raw raw/   # keep the samples
  poolsim import --from-raw raw/ --csvlog pg.csv            # import them again, offline

Flags:
%s
Exit status: 0 success (whatever the verdict), 1 failure (a source unreachable,
refused, or without what import needs), 2 usage error (bad flags, a file in
another format).
`

func runImport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("import", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var req importer.Request
	fs.StringVar(&req.PgBouncer, "pgbouncer", "", "PgBouncer admin console DSN, e.g. postgres://admin@host:6432/pgbouncer")
	fs.StringVar(&req.PG, "pg", "", "PostgreSQL DSN of the database to read pg_stat_statements in")
	fs.StringArrayVar(&req.CSVLogs, "csvlog", nil, "PostgreSQL csvlog or jsonlog file (repeatable)")
	fs.StringArrayVar(&req.Pgbench, "pgbench-log", nil, "pgbench -l log file (repeatable)")
	fs.DurationVar(&req.Duration, "duration", 60*time.Second, "how long to read the live sources")
	fs.DurationVar(&req.Interval, "interval", time.Second, "how often to sample PgBouncer's console")
	fs.StringVar(&req.Database, "database", "", "database to import (default: the busiest in PgBouncer, else --pg's)")
	name := fs.String("name", "", "scenario name (default imported-DATABASE)")
	out := fs.String("out", "", "write the scenario to this file and the report to stdout")
	reps := fs.Int("replications", 10, "replications of the fidelity simulation")
	saveRaw := fs.String("save-raw", "", "save what the live sources returned to this folder (console.json, pg.json)")
	fromRaw := fs.String("from-raw", "", "read console.json and pg.json saved by --save-raw instead of the live sources")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	fs.Usage = func() { fmt.Fprintf(stderr, importHelp, fs.FlagUsages()) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("unexpected arguments %q: every source is a flag (--pgbouncer, --pg, --csvlog, --pgbench-log)", fs.Args())
	}
	if *reps < 1 || *reps > scenarios.MaxReplications {
		return usagef("--replications %d: want 1 to %d", *reps, scenarios.MaxReplications)
	}
	live := req.PgBouncer != "" || req.PG != ""
	if !live && *fromRaw == "" && len(req.CSVLogs) == 0 && len(req.Pgbench) == 0 {
		return usagef("no source: give --pgbouncer, --pg, --csvlog or --pgbench-log (see 'poolsim import --help')")
	}
	if live && *fromRaw != "" {
		return usagef("--from-raw replays a saved sampling: give it instead of --pgbouncer and --pg, not with them")
	}
	if live && (req.Interval <= 0 || req.Duration < req.Interval || req.Duration > 24*time.Hour) {
		return usagef("--interval %v and --duration %v: want an interval above 0 and a duration from the interval to 24h", req.Interval, req.Duration)
	}
	if *saveRaw != "" && !live {
		return usagef("--save-raw saves the live sources' samples: give --pgbouncer or --pg")
	}
	if *fromRaw != "" {
		if err := loadRaw(*fromRaw, &req); err != nil {
			return err
		}
	}
	if live && !*quiet {
		fmt.Fprintf(stderr, "poolsim import: reading the live sources for %v ...\n", req.Duration)
	}
	col, err := importer.Collect(ctx, req)
	if err != nil {
		return importError(err)
	}
	if *saveRaw != "" {
		if err := saveRawRecords(*saveRaw, col); err != nil {
			return err
		}
	}
	im, err := importer.Derive(col.Sources, importer.Options{Name: *name})
	if err != nil {
		return importError(err)
	}
	im.Caveats = append(im.Caveats, col.Notes...)
	cmdline := commandLine(append([]string{"poolsim", "import"}, redactArgs(args)...))
	source := "import"
	if *out != "" {
		source = *out
	}
	sc, err := scenarios.Parse(im.YAML(cmdline, ""), source)
	if err != nil {
		return fmt.Errorf("the imported scenario does not load: %w", err)
	}
	if !*quiet {
		fmt.Fprintf(stderr, "poolsim import: simulating the imported scenario (%d replications) ...\n", *reps)
	}
	fd, err := importer.Check(ctx, sc, im.Observed, *reps)
	if err != nil {
		return err
	}
	report := fd.Text()
	text := im.YAML(cmdline, report)
	if *out == "" {
		_, err = stdout.Write(text)
		return err
	}
	if err := os.WriteFile(*out, text, 0o644); err != nil {
		return fmt.Errorf("write the scenario: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "Wrote %s (run it: poolsim run %s).\n\n%s", *out, *out, report)
	return err
}

// importError makes bad input a usage error; the rest are failures.
func importError(err error) error {
	if errors.Is(err, importer.ErrFormat) || errors.Is(err, importer.ErrBadInput) {
		return usage(err)
	}
	return err
}

// rawFiles are the files --save-raw writes and --from-raw reads.
const (
	rawConsole = "console.json"
	rawPG      = "pg.json"
)

func saveRawRecords(dir string, col *importer.Collected) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--save-raw: %w", err)
	}
	for _, r := range []struct {
		name string
		v    any
		ok   bool
	}{{rawConsole, col.ConsoleRecord, col.ConsoleRecord != nil}, {rawPG, col.PGRecord, col.PGRecord != nil}} {
		if !r.ok {
			continue
		}
		b, err := json.MarshalIndent(r.v, "", " ")
		if err != nil {
			return fmt.Errorf("--save-raw: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, r.name), append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--save-raw: %w", err)
		}
	}
	return nil
}

func loadRaw(dir string, req *importer.Request) error {
	found := false
	for _, r := range []struct {
		name string
		load func([]byte) error
	}{
		{rawConsole, func(b []byte) error {
			req.ConsoleRecord = &importer.ConsoleRecord{}
			return json.Unmarshal(b, req.ConsoleRecord)
		}},
		{rawPG, func(b []byte) error { req.PGRecord = &importer.PGRecord{}; return json.Unmarshal(b, req.PGRecord) }},
	} {
		b, err := os.ReadFile(filepath.Join(dir, r.name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("--from-raw: %w", err)
		}
		if err := r.load(b); err != nil {
			return usagef("--from-raw: %s: not a saved sampling: %v", filepath.Join(dir, r.name), err)
		}
		found = true
	}
	if !found {
		return usagef("--from-raw %s: neither %s nor %s is there (--save-raw writes them)", dir, rawConsole, rawPG)
	}
	return nil
}

var kvPassword = regexp.MustCompile(`password=\S+`)

// redactArgs hides passwords in DSNs, for the command line the scenario
// records.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		flag, val := "", a
		if f, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "--") {
			flag, val = f+"=", v
		}
		if u, err := url.Parse(val); err == nil && u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxx")
				val = u.String()
			}
		}
		out[i] = flag + kvPassword.ReplaceAllString(val, "password=xxx")
	}
	return out
}
