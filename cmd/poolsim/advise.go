package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/plot"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/poolsim/poolsim/scenarios/vary"
)

func init() {
	register(command{name: "advise", short: "recommend pool modes and sizes under one server budget, with reasons and how sure", run: runAdvise})
}

const adviseHelp = `Usage: poolsim advise SCENARIO [--slo-p99 [CLASS=]DURATION] [--max-wait [CLASS=]DURATION]
                      [--min-tps [CLASS=]N] [--features [CLASS=]LIST] [--assume [CLASS=]CHANGE]
                      [--objective connections|latency] [--headroom N|P%%] [--modes LIST]
                      [--pool-sizes VALUES] [--emit pgbouncer.ini] [--plot FILE]
                      [--server-cores N] [--spindles N] [--replications N | --precision P]
                      [--set key=value ...] [--seed N] [--format table|json] [--quiet]

Answers "which pool mode, and how big a pool?" for every pool of SCENARIO at
once, under one server budget, and checks the answer as a whole run.

The budget is max_connections less server.superuser_reserved_connections
(PostgreSQL's default 3) less a headroom for consoles, migrations and
deploys (--headroom, default 10%% of max_connections). A pooled mode spends
its pool size (at every pooler process); direct spends one server connection
per client connection.

The objective (--objective): connections (default) is the fewest server
connections, summed over the pools, that meet every class's bars inside the
budget; latency is the best latency inside the budget (the class closest to
its latency bar kept as far from it as can be).

Every class is held to its own bars, on its own figures:
  - nothing refused, no client timed out (query_wait_timeout, app-pool
    acquire), nothing left unfinished;
  - it carries its load: an open class what it carries with a server for
    every client connection (the same arrivals, replication by replication),
    not short by more than %.0f%% beyond its interval, that spare carrying the
    offered load, and a backlog that drains after arrivals stop; a closed
    class within %.0f%% of its throughput with servers to spare;
  - --slo-p99: its p99 latency (of a request when it runs requests, else of
    a transaction) within the SLO; --max-wait: its p99 wait for a server
    within it; a class given neither is held to a p99 at most %.0f%% above its
    p99 with servers to spare;
  - --min-tps: its steady throughput at least N.

How it searches: each pool's modes (those that keep the session features
its classes use; --modes limits them) on a logarithmic grid of pool sizes,
then bisection to the exact smallest size that meets every bar of its
classes; the other pools meanwhile at the scenario's modes with a server for
every client connection. Classes and pools are taken in name order, so the
file's order does not matter. The objective picks one option per pool; the
whole configuration then runs with the scenario's max_connections, and the
pools whose classes miss a bar there are searched again beside the others'
answers (at most %d rounds). Figures come from replications with the same
seeds everywhere (default 10 when the scenario draws random numbers).

The change that frees a pool: where a feature keeps a pool off transaction
pooling (advisory locks, LISTEN, SET, SQL PREPARE, WITH HOLD cursors,
temporary tables), advise says what change of the application would free it
and what transaction pooling would then take; --assume answers for the
changed application:
  xact_locks        transaction-level advisory locks (pg_advisory_xact_lock)
  listen_direct:N   LISTEN on N dedicated direct connections, one per process
  set_local         SET LOCAL or startup parameters instead of SET
  max_prepared      max_prepared_statements above 0 (or no driver cache)
  protocol_prepare  protocol-level prepared statements instead of SQL PREPARE
  close_cursors     WITH HOLD cursors closed inside the transaction
  on_commit_drop    temporary tables ON COMMIT DROP

--emit FILE writes the answer as a pgbouncer.ini ([databases] and [users] per
pool with pool_mode and pool_size, max_db_connections, max_client_conn) that
PgBouncer and 'poolsim proxy --config' load, with the application side's
connection counts in comments; '-' writes it to stdout.

--features (comma-separated): prepared (protocol-level prepared statements),
sql_prepare, set (session SET), listen, advisory_locks (session-level),
with_hold (cursors), temp_tables, transactions. --features, --slo-p99,
--max-wait, --min-tps and --assume take CLASS=VALUE for one class (repeat the
flag); a plain value applies to every class.

The scenario's sweep: block is ignored (advise takes one workload: the
scenario's base values with --set applied).

%s
Examples:
  poolsim advise pgbouncer-modes --set workload.clients=200
  poolsim advise web-app --slo-p99 100ms
  poolsim advise web-app --slo-p99 100ms --objective latency --headroom 20
  poolsim advise web-and-report --slo-p99 web=150ms --features report=with_hold --emit pgbouncer.ini
  poolsim advise rails-app --slo-p99 web=200ms --max-wait jobs=1s --features jobs=advisory_locks,cable=listen
  poolsim advise rails-app --features jobs=advisory_locks --assume jobs=xact_locks
  poolsim advise my-app.yaml --modes session,transaction --pool-sizes 5..60/5 --format json | jq .split

Exit status: 0 success (also when no configuration qualifies: the output says
so), 1 failure, 2 usage error (bad flags or scenario), 130 interrupted (what
finished is printed, marked INCOMPLETE).
`

// DefaultAdviseReplications is how many replications advise runs of a
// stochastic scenario unless told.
const DefaultAdviseReplications = 10

// adviseFlags are advise's own flags.
type adviseFlags struct {
	format, emit, plotPath     string
	features, slos, waits, tps []string
	assume                     []string
	objective, headroom, modes string
	poolSizes                  string
	cores, spindles            int
	seed                       uint64
	sets                       []string
	study                      *studyFlags
	fs                         *pflag.FlagSet
	req                        advise.Request
	scenario                   *scenarios.Scenario
	st                         scenarios.Study
	stdout, stderr             io.Writer
}

func newAdviseFlags(stdout, stderr io.Writer) *adviseFlags {
	f := &adviseFlags{stdout: stdout, stderr: stderr}
	fs := pflag.NewFlagSet("advise", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.format, "format", "table", "output format: table or json")
	fs.Uint64Var(&f.seed, "seed", 0, "random seed (default: the scenario's)")
	fs.StringArrayVar(&f.sets, "set", nil, "override a scenario value by its dotted key: --set workload.clients=500")
	fs.StringArrayVar(&f.features, "features", nil, "session features in use: "+advise.FeatureNames+"; CLASS=LIST for one class")
	fs.StringArrayVar(&f.slos, "slo-p99", nil, "p99 latency bound, e.g. 50ms (of a request when the class runs requests, else of a transaction); CLASS=DURATION for one class")
	fs.StringArrayVar(&f.waits, "max-wait", nil, "p99 bound on the wait for a server, e.g. 20ms; CLASS=DURATION for one class")
	fs.StringArrayVar(&f.tps, "min-tps", nil, "least steady throughput in transactions per second; CLASS=N for one class")
	fs.StringArrayVar(&f.assume, "assume", nil, "answer for the application after a change that frees a feature: [CLASS=]CHANGE (xact_locks, listen_direct:N, set_local, max_prepared, protocol_prepare, close_cursors, on_commit_drop)")
	fs.StringVar(&f.objective, "objective", "connections", "connections (the fewest server connections) or latency (the best latency inside the budget)")
	fs.StringVar(&f.headroom, "headroom", advise.DefaultHeadroom.String(), "server connections kept free for consoles, migrations and deploys: a count, or a share of max_connections")
	fs.StringVar(&f.modes, "modes", "", "the modes to consider, comma-separated (default: all four)")
	fs.StringVar(&f.poolSizes, "pool-sizes", "", "the coarse grid of pool sizes, as for sweep --vary (default: logarithmic up to each pool's client connections); the answer is refined to the exact smallest")
	fs.IntVar(&f.cores, "server-cores", 2, "server CPU cores, for the HikariCP rule cores*2 + spindles (default: the scenario's server.cores, else 2)")
	fs.IntVar(&f.spindles, "spindles", 1, "server disks (effective spindles), for the HikariCP rule")
	fs.StringVar(&f.emit, "emit", "", "write the answer as a pgbouncer.ini to this file ('-': stdout)")
	fs.StringVar(&f.plotPath, "plot", "", "draw each class's latency and wait against its pool's size, one line per mode, its bars and the answer marked, into this .png or .svg file")
	f.study = addStudyFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, adviseHelp, advise.LoadSlack*100, advise.Tolerance*100, advise.P99Slack*100, advise.MaxRounds, studyHelp)
	}
	f.fs = fs
	return f
}

func runAdvise(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newAdviseFlags(stdout, stderr)
	if err := f.parse(args); err != nil {
		return err
	}
	if err := f.checkCost(); err != nil {
		return err
	}
	a, err := advise.Advise(f.req, f.runner(ctx))
	if a == nil {
		var ue usageError
		if ctx.Err() != nil || errors.As(err, &ue) {
			return err
		}
		return usage(err)
	}
	in := report.AdviceInput{Scenario: f.scenario.Name, Seed: f.req.Base.Seed, Advice: a, Study: f.st}
	if err == nil && len(f.scenario.Sweep) > 0 {
		var ks []string
		for _, ax := range f.scenario.Sweep {
			ks = append(ks, ax.Key)
		}
		a.Notes = append(a.Notes, fmt.Sprintf("the scenario's sweep over %s is ignored: advise uses its base values (%s); change them with --set", strings.Join(ks, ", "), report.BaseWords(f.req.Base)))
	}
	if werr := f.write(in); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("advise %s: interrupted: %w", f.scenario.Name, err)
	}
	return f.artefacts(a)
}

// parse reads the flags and the scenario into the request.
func (f *adviseFlags) parse(args []string) error {
	fs := f.fs
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.format != "table" && f.format != "json" {
		return usagef("--format %q: want table or json", f.format)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim advise --help'", fs.NArg())
	}
	if f.cores < 1 || f.spindles < 0 {
		return usagef("--server-cores %d --spindles %d: want at least 1 core and 0 or more spindles", f.cores, f.spindles)
	}
	if f.plotPath != "" {
		if err := plot.CheckPath(f.plotPath); err != nil {
			return usage(err)
		}
	}
	r := advise.Request{ServerCores: f.cores, Spindles: f.spindles, CoresSet: fs.Changed("server-cores")}
	var err error
	if r.Objective, err = advise.ParseObjective(f.objective); err != nil {
		return usagef("--objective: %v", err)
	}
	if r.Headroom, err = advise.ParseHeadroom(f.headroom); err != nil {
		return usagef("--headroom: %v", err)
	}
	if fs.Changed("modes") {
		if r.Modes, err = advise.ParseModes(f.modes); err != nil {
			return usagef("--modes %q: %v", f.modes, err)
		}
	}
	if f.scenario, err = loadScenario(fs.Arg(0), f.sets, fs.Changed("seed"), f.seed); err != nil {
		return err
	}
	if f.st, err = f.study.study(fs, f.scenario); err != nil {
		return err
	}
	if f.st.Replications == 0 && f.st.Precision == 0 {
		f.st.Replications = DefaultAdviseReplications
	}
	r.Base = f.scenario.Base
	if err := r.Base.Validate(); err != nil {
		return usagef("%s: %v", f.scenario.Source, err)
	}
	if f.poolSizes != "" {
		sizes, _, err := vary.Ints(f.poolSizes)
		if err != nil {
			return usagef("--pool-sizes %q: %v", f.poolSizes, err)
		}
		for _, s := range sizes {
			if s < 1 || s > 100_000 {
				return usagef("--pool-sizes %q: pool size %d: want 1 to 100000", f.poolSizes, s)
			}
		}
		r.PoolSizes = sizes
	}
	if r.Needs, err = f.needs(); err != nil {
		return err
	}
	if r.Assume, err = f.assumptions(r.Needs); err != nil {
		return err
	}
	f.req = r
	return nil
}

// perClass splits a flag's values into their items by class: a value is
// a comma-separated list whose items apply to every class (key "") until
// an item CLASS=ITEM names a class, which the items after it then follow
// ("jobs=advisory_locks,set,cable=listen").
func perClass(values []string) map[string][]string {
	out := map[string][]string{}
	for _, v := range values {
		class := ""
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if k, rest, ok := strings.Cut(item, "="); ok && k != "" && !strings.Contains(k, " ") {
				class, item = k, rest
			}
			if item != "" {
				out[class] = append(out[class], item)
			}
		}
	}
	return out
}

// classNames are the scenario's classes ("" for one without classes).
func (f *adviseFlags) classNames() []string {
	var out []string
	for _, cl := range f.scenario.Base.ClassList() {
		out = append(out, cl.Name)
	}
	return out
}

// forClasses applies a per-class flag: the plain value to every class, a
// class's own over it; an unknown class is a usage error.
func (f *adviseFlags) forClasses(flag string, values []string, apply func(class, v string) error) error {
	by := perClass(values)
	names := f.classNames()
	for k := range by {
		if k == "" {
			continue
		}
		known := false
		for _, n := range names {
			known = known || n == k
		}
		if !known {
			if len(names) == 1 && names[0] == "" {
				return usagef("--%s %s=...: %s has no classes (classes: in the scenario); give the value without a class name", flag, k, f.scenario.Source)
			}
			return usagef("--%s %s=...: no class %q in %s (the classes are %s)", flag, k, k, f.scenario.Source, strings.Join(names, ", "))
		}
	}
	for _, n := range names {
		for _, v := range by[""] {
			if err := apply(n, v); err != nil {
				return err
			}
		}
		if n != "" {
			for _, v := range by[n] {
				if err := apply(n, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// needs reads --features, --slo-p99, --max-wait and --min-tps per class.
func (f *adviseFlags) needs() (map[string]advise.Need, error) {
	needs := map[string]advise.Need{}
	upd := func(class string, g func(n *advise.Need) error) error {
		n := needs[class]
		if err := g(&n); err != nil {
			return err
		}
		needs[class] = n
		return nil
	}
	dur := func(flag string, set func(n *advise.Need, d time.Duration)) func(class, v string) error {
		return func(class, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return usagef("--%s %q: want a duration above 0 such as 50ms or 1.5s, or CLASS=DURATION", flag, v)
			}
			return upd(class, func(n *advise.Need) error { set(n, d); return nil })
		}
	}
	steps := []struct {
		flag   string
		values []string
		apply  func(class, v string) error
	}{
		{"features", f.features, func(class, v string) error {
			fs, err := advise.ParseFeatures(v)
			if err != nil {
				return usagef("--features %q: %v", v, err)
			}
			return upd(class, func(n *advise.Need) error { n.Features = append(n.Features, fs...); return nil })
		}},
		{"slo-p99", f.slos, dur("slo-p99", func(n *advise.Need, d time.Duration) { n.SLOP99 = d })},
		{"max-wait", f.waits, dur("max-wait", func(n *advise.Need, d time.Duration) { n.MaxWait = d })},
		{"min-tps", f.tps, func(class, v string) error {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || x <= 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return usagef("--min-tps %q: want a throughput above 0 in transactions per second, or CLASS=N", v)
			}
			return upd(class, func(n *advise.Need) error { n.MinTPS = x; return nil })
		}},
	}
	for _, s := range steps {
		if err := f.forClasses(s.flag, s.values, s.apply); err != nil {
			return nil, err
		}
	}
	return needs, nil
}

// assumptions reads --assume: CLASS=CHANGE for one class; a plain
// CHANGE for every class that uses the feature it frees.
func (f *adviseFlags) assumptions(needs map[string]advise.Need) (map[string][]advise.Assumption, error) {
	out := map[string][]advise.Assumption{}
	names := f.classNames()
	by := perClass(f.assume)
	classes := slices.Sorted(maps.Keys(by))
	for _, class := range classes {
		for _, item := range by[class] {
			_, as, err := advise.ParseAssume(item)
			if err != nil {
				return nil, usage(err)
			}
			if class != "" {
				if !slices.Contains(names, class) {
					return nil, usagef("--assume %s=%s: no class %q in %s (the classes are %s)", class, item, class, f.scenario.Source, strings.Join(names, ", "))
				}
				out[class] = append(out[class], as...)
				continue
			}
			for _, a := range as {
				used := false
				for _, n := range names {
					if slices.Contains(needs[n].Features, a.Change.Feature) {
						out[n] = append(out[n], a)
						used = true
					}
				}
				if !used {
					return nil, usagef("--assume %s: no class uses %s (give --features)", item, a.Change.Feature)
				}
			}
		}
	}
	return out, nil
}

// runner simulates advise's batches with the study's replications and
// progress on stderr.
func (f *adviseFlags) runner(ctx context.Context) advise.Runner {
	return func(cfgs []system.Config) ([]advise.Outcome, error) {
		pts := make([]scenarios.Point, len(cfgs))
		for i, c := range cfgs {
			pts[i] = scenarios.Point{Config: c}
		}
		rows, err := f.study.run(ctx, pts, f.st, f.stderr, "advise "+f.scenario.Name)
		out := make([]advise.Outcome, len(rows))
		for i := range rows {
			if rows[i].Incomplete {
				continue
			}
			o := advise.Outcome{Total: rows[i].Reps, Deterministic: rows[i].Deterministic, Notes: rows[i].Notes}
			if cfgs[i].Multi() {
				for _, c := range rows[i].Classes {
					o.Classes = append(o.Classes, c.Reps)
				}
			} else {
				o.Classes = []system.Replicated{rows[i].Reps}
			}
			out[i] = o
		}
		return out, err
	}
}

// write prints the advice in the chosen format.
func (f *adviseFlags) write(in report.AdviceInput) error {
	if f.format == "json" {
		return report.WriteAdviceJSON(f.stdout, in)
	}
	return report.WriteAdviceText(f.stdout, in)
}

// artefacts writes --emit and --plot.
func (f *adviseFlags) artefacts(a *advise.Advice) error {
	if f.emit != "" {
		text, err := advise.INI(a, f.scenario.Name)
		if err != nil {
			return fmt.Errorf("--emit: %w", err)
		}
		if f.emit == "-" {
			_, err = io.WriteString(f.stdout, text)
		} else {
			err = os.WriteFile(f.emit, []byte(text), 0o644)
		}
		if err != nil {
			return fmt.Errorf("--emit: %w", err)
		}
	}
	if f.plotPath != "" {
		if err := plot.WriteAdvice(f.plotPath, advicePlot(f.scenario, a)); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return nil
}

// checkCost refuses, before anything runs, an advise estimated above the
// limits unless --yes was given.
func (f *adviseFlags) checkCost() error {
	n, err := advise.EstimateRuns(f.req)
	if err != nil {
		return usage(err)
	}
	pts := make([]scenarios.Point, n)
	for i := range pts {
		pts[i] = scenarios.Point{Config: f.req.Base}
	}
	return f.study.checkCost(f.scenario, pts, f.st)
}

// advicePlot is each class's figures against its pool's size.
func advicePlot(sc *scenarios.Scenario, a *advise.Advice) plot.AdviceInput {
	return plot.AdviceInput{Title: fmt.Sprintf("poolsim advise %s (seed %d): %s", sc.Name, sc.Base.Seed, report.AnswerLine(a)), Advice: a}
}
