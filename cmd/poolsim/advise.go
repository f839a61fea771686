package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/poolsim/poolsim/models/advise"
	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/plot"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/poolsim/poolsim/scenarios/vary"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "advise", short: "recommend a pool mode and pool size, with reasons and how sure", run: runAdvise})
}

const adviseHelp = `Usage: poolsim advise SCENARIO [--features [CLASS=]LIST] [--slo-p99 [CLASS=]DURATION] [--min-tps N]
                      [--pool-sizes VALUES] [--server-cores N] [--spindles N]
                      [--replications N | --precision P] [--set key=value ...]
                      [--seed N] [--format table|json] [--quiet]

Answers "which pool mode, and how big a pool?" for SCENARIO's workload:
simulates every mode (direct, session, transaction, statement) at every pool
size (pooler.default_pool_size; direct keeps the server's max_connections),
each with the same replications (default 10 for a scenario that draws random
numbers; a deterministic one runs once), and prints the answer first with
how sure it is, then the reasons with figures (mean ± 95%% CI), the
runner-up, each mode's verdict and the classic rules of thumb.

How it decides:
  1. Modes that break a session feature in --features are dropped, unless a
     setting saves them: protocol-level prepared statements (prepared) work in
     transaction and statement pooling with max_prepared_statements > 0, so
     those modes are evaluated again with max_prepared_statements=200. More
     than one statement per transaction implies 'transactions', which
     statement pooling breaks.
  2. A configuration qualifies when it carries the load and nothing fails:
     an open workload's tps_steady (the completion rate between the warm-up
     and the end of arrivals) is not short of the offered load (arrival rate
     x transactions per session) by more than %.0f%% beyond its CI, and its
     backlog drains within %d mean sessions after arrivals stop; a closed
     workload's tps_steady is within %.0f%% of the best any configuration
     reaches. No connection is refused, no client times out
     (query_wait_timeout, app-pool acquire), every transaction finishes,
     p99 <= --slo-p99 and tps_steady >= --min-tps when given. Latency counts
     every wait the application sees: connecting (and its queue), the
     application pool, the pooler.
  3. Per mode: the smallest qualifying pool whose p99 is not significantly
     worse than the mode's best qualifying p99 by more than %.0f%% (the
     paired 95%% CI of the difference over the shared replications decides).
     The answer's uncertainty is the range of pool sizes the CIs cannot tell
     apart from it.
  4. Across modes: the lowest best p99 (the best each mode reaches among its
     qualifying pools); modes whose paired difference has a CI that includes
     zero are tied, and the tie goes to the mode that keeps more session
     features (direct, session, transaction, statement).
  5. When nothing qualifies it says so, names the binding constraint and the
     closest configuration, and what would make one qualify.

The SLO bounds the p99 of a request when the workload runs requests
(workload.requests_per_session), else of a transaction; the output says
which (slo_applies_to in JSON).

A scenario with classes: (several pools) gets a mode and pool_size per pool
under the one server budget: each pool in turn, in the scenario's order, is
simulated at every allowed mode and size with the other pools as they stand
(decided ones at their answers), and decided on the figures of its lead
class (the one with an SLO, else the most clients) by the rules above; every
class is guarded - no configuration may make any class refuse connections,
time out or leave transactions unfinished, or miss the SLO of a class on the
same pool. The final configuration is simulated as a whole and every class
checked on it. --features and --slo-p99 take CLASS=VALUE for one class
(repeat the flag); a plain value applies to every class. The answer reads
"web: transaction, 40; report: session, 3; 43 of 200 server connections".

The scenario's sweep: block is ignored (advise takes one workload: the
scenario's base values with --set applied).

--features (comma-separated): prepared (protocol-level prepared statements),
sql_prepare, set (session SET), listen, advisory_locks (session-level),
with_hold (cursors), temp_tables, transactions.

%s
Examples:
  poolsim advise pgbouncer-modes --set workload.clients=200
  poolsim advise pgbouncer-modes --set workload.clients=200 --features prepared --slo-p99 100ms
  poolsim advise pgbouncer-modes --set workload.clients=200 --features advisory_locks
  poolsim advise web-app --slo-p99 50ms --plot advise.png
  poolsim advise web-app --set workload.arrival_rate=1200/s --replications 20
  poolsim advise my-app.yaml --features set,listen --slo-p99 50ms --min-tps 2000 --pool-sizes 5..60/5
  poolsim advise my-app.yaml --format json | jq .answer
  poolsim advise web-and-report --slo-p99 web=150ms --features report=with_hold

Exit status: 0 success (also when no configuration qualifies: the output says
so), 1 failure, 2 usage error (bad flags, bad --features, --slo-p99 or
--pool-sizes, bad scenario).
`

// DefaultAdviseReplications is how many replications advise runs of a
// stochastic scenario unless told.
const DefaultAdviseReplications = 10

func runAdvise(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("advise", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "table", "output format: table or json")
	seed := fs.Uint64("seed", 0, "random seed (default: the scenario's)")
	sets := fs.StringArray("set", nil, "override a scenario value by its dotted key: --set workload.clients=500")
	features := fs.StringArray("features", nil, "session features the application uses: "+advise.FeatureNames+"; with classes, CLASS=LIST for one class (repeat the flag)")
	slos := fs.StringArray("slo-p99", nil, "p99 latency bound, e.g. 50ms, of a request when the workload has requests, else of a transaction (default: none); with classes, CLASS=DURATION for one class (repeat the flag)")
	minTPS := fs.Float64("min-tps", 0, "least acceptable steady throughput in transactions per second (default: none)")
	poolSizes := fs.String("pool-sizes", "", "default_pool_size values to try, as for sweep --vary (default 1..max_connections/log)")
	cores := fs.Int("server-cores", 2, "server CPU cores, for the HikariCP rule cores*2 + spindles (default: the scenario's server.cores, else 2)")
	spindles := fs.Int("spindles", 1, "server disks (effective spindles), for the HikariCP rule")
	plotPath := fs.String("plot", "", "also draw every mode against the pool size into this .png or .svg file, the SLO and the answer marked")
	sf := addStudyFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, adviseHelp, advise.LoadSlack*100, advise.DrainFactor, advise.Tolerance*100, advise.P99Slack*100, studyHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *format != "table" && *format != "json" {
		return usagef("--format %q: want table or json", *format)
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim advise --help'", fs.NArg())
	}
	needs, err := parseNeeds(*features, *slos)
	if err != nil {
		return err
	}
	all := needs[""]
	req := advise.Request{Features: all.Features, SLOP99: all.SLOP99, MinTPS: *minTPS, ServerCores: *cores, Spindles: *spindles}
	if *minTPS < 0 || math.IsNaN(*minTPS) || math.IsInf(*minTPS, 0) {
		return usagef("--min-tps %v: want a throughput of 0 or more", *minTPS)
	}
	if *cores < 1 || *spindles < 0 {
		return usagef("--server-cores %d --spindles %d: want at least 1 core and 0 or more spindles", *cores, *spindles)
	}
	if *plotPath != "" {
		if err := plot.CheckPath(*plotPath); err != nil {
			return usage(err)
		}
	}
	sc, err := loadScenario(fs.Arg(0), *sets, fs.Changed("seed"), *seed)
	if err != nil {
		return err
	}
	st, err := sf.study(fs, sc)
	if err != nil {
		return err
	}
	if st.Replications == 0 && st.Precision == 0 {
		st.Replications = DefaultAdviseReplications
	}
	req.Base = sc.Base
	if !fs.Changed("server-cores") && sc.Base.Server.Cores > 0 {
		req.ServerCores = sc.Base.Server.Cores
	}
	if err := req.Base.Validate(); err != nil {
		return usagef("%s: %v", sc.Source, err)
	}
	spec := *poolSizes
	if spec == "" {
		spec = fmt.Sprintf("1..%d/log", max(1, req.Base.Server.MaxConnections))
	}
	sizes, _, err := vary.Ints(spec)
	if err != nil {
		return usagef("--pool-sizes %q: %v", spec, err)
	}
	for _, s := range sizes {
		if s < 1 || s > 100_000 {
			return usagef("--pool-sizes %q: pool size %d: want 1 to 100000", spec, s)
		}
	}
	req.PoolSizes = sizes
	if sc.Base.Multi() {
		if fs.Changed("min-tps") {
			return usagef("--min-tps: a scenario with classes takes an SLO per class (--slo-p99 CLASS=DURATION), not a throughput floor")
		}
		return advisePools(ctx, sc, req, needs, sf, st, *format, *plotPath, stdout, stderr)
	}
	for name := range needs {
		if name != "" {
			return usagef("%s=...: %s has no classes (classes: in the scenario); give --features and --slo-p99 without a class name", name, sc.Source)
		}
	}
	a, err := advise.Run(req, func(cfgs []system.Config) ([]system.Replicated, error) {
		pts := make([]scenarios.Point, len(cfgs))
		for i, c := range cfgs {
			pts[i] = scenarios.Point{Config: c}
		}
		if err := sf.checkCost(sc, pts, st); err != nil {
			return nil, err
		}
		rows, err := sf.run(ctx, pts, st, stderr, "advise "+sc.Name)
		if err != nil {
			return nil, err
		}
		out := make([]system.Replicated, len(rows))
		for i := range rows {
			out[i] = rows[i].Reps
		}
		return out, nil
	})
	if err != nil {
		var ue usageError
		if ctx.Err() != nil || errors.As(err, &ue) {
			return err
		}
		return usage(err)
	}
	if len(sc.Sweep) > 0 {
		var ks []string
		for _, ax := range sc.Sweep {
			ks = append(ks, ax.Key)
		}
		a.Notes = append(a.Notes, fmt.Sprintf("the scenario's sweep over %s is ignored: advise uses its base values (%s); change them with --set", strings.Join(ks, ", "), report.BaseWords(req.Base)))
	}
	in := report.AdviceInput{Scenario: sc.Name, Request: req, Advice: a, Study: st}
	if *plotPath != "" {
		if err := plot.Write(*plotPath, advicePlot(sc, req, a)); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	if *format == "json" {
		return report.WriteAdviceJSON(stdout, in)
	}
	return report.WriteAdviceText(stdout, in)
}

// advicePlot is every evaluated configuration against the pool size, one
// line per mode (direct, which has no pool, drawn flat across), with the
// SLO and the answer marked.
func advicePlot(sc *scenarios.Scenario, req advise.Request, a *advise.Advice) plot.Input {
	var rows []scenarios.Row
	var chosen []int
	for _, v := range a.Modes {
		for _, e := range v.Evals {
			sizes := []int{e.PoolSize}
			if e.Mode == poolmode.Direct {
				sizes = req.PoolSizes
			}
			for _, n := range sizes {
				c := req.Base
				c.Pooler.PoolMode, c.Pooler.DefaultPoolSize, c.Pooler.MaxPreparedStatements = e.Mode, n, e.MaxPrepared
				if e == a.Answer && (e.Mode != poolmode.Direct || n == sizes[0]) {
					chosen = append(chosen, len(rows))
				}
				rows = append(rows, scenarios.Row{
					Params: []scenarios.Param{{Key: "pooler.default_pool_size", Value: strconv.Itoa(n)}, {Key: "pooler.mode", Value: e.Option.Name()}},
					Config: c, Result: system.Result{Metrics: e.Metrics}, Reps: e.Reps,
				})
			}
		}
	}
	title := fmt.Sprintf("poolsim advise %s (seed %d)", sc.Name, req.Base.Seed)
	if a.Answer != nil {
		title += ": " + a.Answer.Mode.String() + ", pool " + strconv.Itoa(a.Answer.PoolSize)
	} else {
		title += ": no configuration qualifies"
	}
	return plot.Input{Title: title, Rows: rows, SLOP99Ms: float64(req.SLOP99) / 1e6, Chosen: chosen,
		LogKeys: map[string]bool{"pooler.default_pool_size": true}}
}
