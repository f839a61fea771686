package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/validate"
	"github.com/poolsim/poolsim/scenarios"
)

func init() {
	register(command{name: "validate", short: "run a scenario live and print the model next to the measurement", run: runValidate})
	beforeMain = append(beforeMain, validate.RunWakeSide)
}

const validateHelp = `Usage: poolsim validate SCENARIO [--dsn URL] [--target proxy|pgbouncer|direct] [--out DIR] [--set key=value ...] [--seed N] [--quick] [--repeats N] [--plot FILE.png]

Runs SCENARIO for real and prints, for every point of its sweep, the model,
the model with measured values (calibrated) and the measurement side by side,
with a verdict against fixed tolerances (progress on stderr: each phase,
the runs and probes done and the time left; --quiet turns it off): ok_txns and conn_refused exactly;
the calibrated model within 10%% of the measured TPS and p50 and within 25%%
of p99. Each row runs several times (--repeats), each run calibrated right
before it; the verdict holds the calibrated model's error per run (run i's
model against run i's measurement) to the tolerances by its mean over the
runs, and the report lists every run with the measured mean, its 95%%
confidence interval, the runs' 95%% interval of that error and the error
of the medians (shown, not judged). A miss still passes when the
interval reaches into the tolerance band (the verdict says "within the
runs' 95%% interval": the miss is not told apart from run-to-run noise);
it fails when the whole interval lies outside, or with one run. Then it
probes each session feature live in each pool mode (SET, LISTEN, PREPARE,
protocol-level prepared statements, advisory locks, WITH HOLD cursors,
temporary tables, transaction blocks) and compares with the model's compat
matrix.

Without --dsn it starts a throwaway PostgreSQL from the installed binaries
(initdb into a temporary folder, a free loopback port, the scenario's
server.max_connections and server.superuser_reserved_connections) and
removes it afterwards, also on Ctrl-C. The load connects as a
non-superuser role.

Targets: proxy (default) is poolsim's own pooling proxy, in this process;
pgbouncer starts the installed pgbouncer with a generated configuration;
direct runs only the scenario's direct rows. Direct rows always connect
straight to PostgreSQL.

The scenario's validate: section is poolsim validate's own (poolsim run,
sweep and advise ignore it): how a statement runs live, and, for a
what-if of the test machine itself, the machine the models run on; its
keys are listed below and take --set validate.KEY=VALUE. Its statement
says how a statement takes workload.query:
sleep (pg_sleep; it rounds up to whole milliseconds, the calibration
measures by how much), cpu (a generate_series count calibrated on the spot),
sql (validate.sql as is) or pgbench-select (pgbench -S's statement against a
database pgbench -i initialises at validate.scale in the throwaway cluster;
with --dsn the pgbench tables must exist).

A pgbench-select statement is CPU-bound and shares the machine's cores
with the pooler and the load driver, and so is an sql statement in a
scenario with server.cores. Before each run the validator calibrates a
testbed: statements per second straight to PostgreSQL at 1, 2, 4 and 8
connections, each process's CPU per statement from /proc (the driver's,
the backends', the pooler's) through the target with the row's clients,
and the other work on the machine; the calibrated model runs all of them
on the cores, with the backends' USL contention searched to match the
direct points. Such a run turns the kernel's autogroup off (as root; back
on at the end; --autogroup keep leaves it): with it on, a busy core is
shared between sessions first, and every PostgreSQL backend is a session
of its own while the validator, its proxy, pgbench and PgBouncer are one;
the model shares the cores thread by thread. The
scenario's model stays the production what-if (no load driver). A sweep
over pooler.default_pool_size is a curve: the report shows it with the
peak pool size of model and measurement, and --plot draws it.

Client classes (classes:, pools:) run together: one group of clients per
class, logging in as its pool's user; every pool is a [databases] entry of
its own (named after the pool, pointing at its database, with its
pool_mode and pool_size) in the proxy and in the generated pgbouncer.ini,
since PgBouncer 1.18 has no per-user pool_size. The throwaway cluster gets
the pools' users and databases (--dsn is refused). The report has a row for
all classes and one per class, with the request figures (ok_reqs, req_tps,
req_p50_ms, req_p99_ms) for classes with requests_per_session.
validate.with_hold: CLASS,... makes those classes' requests hold a WITH HOLD
cursor across their transactions (DECLARE, FETCH, CLOSE).

Prepared statements (workload.statements, workload.parse,
workload.prepare_threshold; e.g. prepared-statements-live): the statement
(sleep or cpu, taking workload.query + workload.cpu) becomes
workload.statements fixed texts run with the extended protocol, unnamed
until prepare_threshold executions, then named; a cpu statement gets its
parse and plan cost from one-row joins tuned to workload.parse, and the
real cost is measured before each run. The report compares the prepared
hit rate (within 0.05), server parses per second and TPS (within 15%%), and
the transactions that failed on a missing prepared statement. PgBouncer
before 1.21 has no max_prepared_statements: --target pgbouncer refuses
such rows.

Examples:
  poolsim validate pgbouncer-modes-live
  poolsim validate pgbouncer-modes-live --target pgbouncer --out results/pgbouncer-modes-live/pgbouncer
  poolsim validate prepared-statements-live --out results/prepared-statements-live/proxy
  poolsim validate pgbench-select-live --target pgbouncer --plot curve.png
  poolsim validate my-app.yaml --dsn postgres://app:secret@127.0.0.1:5432/app --set workload.clients=50

Flags:
%s
The validate: section's keys:
%s

Exit status: 0 when every row is within tolerance and every probe agrees
with compat, 1 otherwise or on failure, 2 usage error (bad flags, bad
scenario, a scenario validate cannot run).
`

// errOutside reports a validation that ran but did not pass.
var errOutside = errors.New("the measurement is outside the tolerances or a probe disagrees with compat (see the report)")

func runValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("validate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", "", "PostgreSQL to use instead of a throwaway cluster (URL or keyword/value)")
	target := fs.String("target", validate.TargetProxy, "what the pooled rows go through: proxy, pgbouncer or direct")
	out := fs.String("out", "", "write report.md, rows.csv, command.txt and versions.txt into this folder")
	seed := fs.Uint64("seed", 0, "random seed (default: the scenario's)")
	sets := fs.StringArray("set", nil, "override a scenario value by its dotted key: --set workload.clients=50")
	quick := fs.Bool("quick", false, "fewer calibration samples, one run per row, no feature probes")
	repeats := fs.Int("repeats", 0, "live runs per row, each with its own calibrated model, judged by the runs' mean error (default 5, 1 with --quick)")
	plotPath := fs.String("plot", "", "draw the curve along pooler.default_pool_size (throughput, p50, p99: measured, calibrated model, scenario model) into this PNG")
	verbose := fs.BoolP("verbose", "v", false, "log each step to stderr")
	quiet := fs.BoolP("quiet", "q", false, "no progress on stderr")
	autogroupFlag := fs.String("autogroup", "off", "the kernel's autogroup during a CPU-bound run: off (as root, turned off for the run and back on after, so the cores are shared thread by thread as in the model) or keep")
	fs.Usage = func() {
		fmt.Fprintf(stderr, validateHelp, fs.FlagUsages(), "  "+strings.Join(validate.Keys(), "\n  "))
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim validate --help'", fs.NArg())
	}
	if *repeats < 0 || *repeats > 100 {
		return usagef("--repeats %d: want 1 to 100 (0 = the default)", *repeats)
	}
	switch *target {
	case validate.TargetProxy, validate.TargetPgBouncer, validate.TargetDirect:
	default:
		return usagef("--target %q: want proxy, pgbouncer or direct", *target)
	}
	sc, err := loadScenario(fs.Arg(0), *sets, fs.Changed("seed"), *seed)
	if err != nil {
		return err
	}
	if _, err := sc.Points(); err != nil {
		return usage(err)
	}
	if *plotPath != "" {
		if !strings.EqualFold(filepath.Ext(*plotPath), ".png") {
			return usagef("--plot %s: want a .png file", *plotPath)
		}
		if !sweeps(sc, validate.CurveKey) {
			return usagef("--plot: the scenario's sweep does not vary %s, so there is no curve to draw", validate.CurveKey)
		}
	}
	if *target == validate.TargetPgBouncer {
		if _, err := pgbouncer.Find(); err != nil {
			return err
		}
	}
	if *autogroupFlag != "off" && *autogroupFlag != "keep" {
		return usagef("--autogroup %q: want off or keep", *autogroupFlag)
	}
	opts := validate.Options{
		KeepAutogroup: *autogroupFlag == "keep",
		Scenario:      sc,
		DSN:           *dsn,
		Target:        *target,
		Quick:         *quick,
		Repeats:       *repeats,
		Command:       commandLine(append([]string{"poolsim", "validate"}, args...)),
	}
	if *verbose {
		opts.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	}
	p := newProgress(stderr, "validate "+sc.Name, *quiet || *verbose)
	opts.Progress = p.phase
	rep, err := validate.Run(ctx, opts)
	p.finish()
	if err != nil {
		if errors.Is(err, validate.ErrUnsupported) || errors.Is(err, scenarios.ErrInvalid) {
			return usage(err)
		}
		return err
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	if *out != "" {
		if err := rep.WriteDir(*out); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "\nwrote %s/report.md, rows.csv, command.txt, versions.txt\n", strings.TrimRight(*out, "/"))
	}
	if *plotPath != "" {
		if err := rep.WritePlot(*plotPath); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *plotPath)
	}
	if !rep.Pass() {
		return errOutside
	}
	return nil
}

// commandLine quotes args for a shell where needed.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// sweeps reports whether the scenario's sweep varies key.
func sweeps(sc *scenarios.Scenario, key string) bool {
	for _, a := range sc.Sweep {
		if a.Key == key {
			return true
		}
	}
	return false
}
