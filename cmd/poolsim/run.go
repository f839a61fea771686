package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "run", short: "simulate a scenario and print its table", run: runRun})
}

const runHelp = `Usage: poolsim run SCENARIO [--format table|json|csv] [--seed N] [--set key=value ...]
                   [--replications N | --precision P] [--explain]

Simulates SCENARIO (a YAML file, or the name of a built-in scenario: see
'poolsim scenarios') and prints one row per point of its sweep: throughput,
transaction latency, the wait for a server connection, refusals and
timeouts, then the session-feature matrix of each mode. The run is
deterministic: the same scenario and seed print the same bytes.

Examples:
  poolsim run pgbouncer-modes
  poolsim run pgbouncer-modes --set workload.clients=500 --format csv
  poolsim run my-app.yaml --set 'workload.query={dist: exp, mean: 2ms}' --seed 7
  poolsim run erlang-c --format json
  poolsim run erlang-c --explain         # Little's law and Erlang C beside the simulation
  poolsim run erlang-c --explain --format json # the same, as the JSON's "explanation"
  poolsim run erlang-c --replications 20 # mean ± 95%% CI of every figure
  poolsim run erlang-c --precision 1%%    # as many replications as tps and p99 need

Columns: tps is ok_txns/wall; tps_steady the rate the configuration
sustains (see Steady state); busy is server_busy, the mean server
connections executing a statement over the pool size (JSON/CSV add
server_linked, the mean held for a client: a session-mode server is linked
while its client is connected, busy only while it runs a statement).
wait_L, wait_lambda and wait_W are Little's law on the pooler's wait queue:
wait_lambda counts departures from the queue - assignments and
query_wait_timeout disconnects - per second, wait_W is their mean wait in
seconds and wait_L the queue's time-averaged length from its own integral,
so wait_L = wait_lambda x wait_W up to the waiters at the window's ends.

Steady state: an open workload's first workload.warmup (auto: found by MSER-5 on
5 pilot runs of its own, and at least until their pools have filled; a study's first
batch may lengthen it) is left out of every time average, percentile and rate, which are
measured up to the end of arrivals (warmup_ms and steady_ms say how much);
ok_txns, tps and wall_ms stay the whole run's. A closed workload adds
tps_steady: the completion rate from the first completion until the first
client finishes, while every client still runs ('run --explain' says which
to read for what).

%s
Keys for --set (also the keys of the scenario YAML and its sweep: block):
%s

%s
Exit status: 0 success, 1 failure, 2 usage error (bad flags, bad scenario).
`

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "table", "output format: table, json or csv")
	seed := fs.Uint64("seed", 0, "random seed (default: the scenario's)")
	sets := fs.StringArray("set", nil, "override a scenario value by its dotted key: --set workload.clients=500")
	explain := fs.Bool("explain", false, "explain each row's queues - Little's law and the matching analytic result - after the table, or as the JSON's \"explanation\"")
	sf := addStudyFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, runHelp, studyHelp, "  "+strings.Join(scenarios.Fields(), "\n  "), scenarios.DistHelp)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := report.CheckFormat(*format); err != nil {
		return usage(err)
	}
	if *explain && *format == "csv" {
		return usagef("--explain prints text after the table, or an \"explanation\" field in the JSON: use it with --format table or json")
	}
	if fs.NArg() != 1 {
		return usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim run --help'", fs.NArg())
	}
	sc, err := loadScenario(fs.Arg(0), *sets, fs.Changed("seed"), *seed)
	if err != nil {
		return err
	}
	st, err := sf.study(fs, sc)
	if err != nil {
		return err
	}
	points, err := sc.Points()
	if err != nil {
		return usage(err)
	}
	if err := sf.checkCost(sc, points, st); err != nil {
		return err
	}
	rows, runErr := sf.run(ctx, points, st, stderr, "run "+sc.Name)
	r := report.New(sc, st, rows)
	var e report.Explanation
	if *explain {
		e = report.Explain(r.Rows)
		if *format == "json" && runErr == nil {
			r.Explanation = &e
		}
	}
	if err := report.Write(stdout, *format, r); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if *explain && *format == "table" {
		return report.WriteExplanation(stdout, e)
	}
	return nil
}

// loadScenario loads a scenario and applies --seed and --set; every error
// is a usage error.
func loadScenario(name string, sets []string, seedSet bool, seed uint64) (*scenarios.Scenario, error) {
	sc, err := scenarios.Load(name)
	if err != nil {
		if errors.Is(err, scenarios.ErrInvalid) || errors.Is(err, scenarios.ErrNotFound) {
			return nil, usage(err)
		}
		return nil, err
	}
	if err := sc.Override(seedSet, seed, sets); err != nil {
		return nil, usage(err)
	}
	return sc, nil
}
