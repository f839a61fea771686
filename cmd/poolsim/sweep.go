package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/poolsim/poolsim/scenarios/plot"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/poolsim/poolsim/scenarios/vary"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "sweep", short: "vary scenario keys over lists or ranges; table, json, csv, plots, shards", run: runSweep})
}

const sweepHelp = `Usage: poolsim sweep SCENARIO --vary key=values [--vary ...] [--set key=value ...]
                     [--seed N] [--format table|json|csv] [--plot out.png|out.svg]
                     [--shard i/n] [--workers N] [--drop-sweep]
                     [--replications N | --precision P] [--quiet]

Runs SCENARIO over a grid of values and prints one row per point, with the
same columns as 'poolsim run'. Each --vary adds an axis; several give their
cartesian product, the first --vary outermost. A --vary axis replaces the
scenario's own sweep: axis for that key; the scenario's other sweep axes
stay, inside the --vary axes (--set KEY=VALUE pins one of them, --drop-sweep
drops them all). Points run in parallel (--workers, default one per CPU) and
the output is byte-identical to a sequential run. Progress goes to stderr
(a redrawn line in a terminal, a plain line every few seconds otherwise;
--quiet turns it off), never to stdout.

Values for --vary:
  1,2,5,10            a list (YAML flow items: {dist: exp, mean: 1ms} works)
  1..150              every whole number from 1 to 150
  10..100/10          from 10 to 100 in steps of 10 (also 1ms..10ms/1ms, 0.1..1/0.1)
  1..150/log          log-spaced, 10 points per decade, both ends included,
                      whole numbers rounded and deduplicated (1..150/log: 20 points)
  1..150/log30        log-spaced, 30 points before deduplication
  10ms..100ms/log     durations (3 significant figures); rates: 10/s..1000/s/log

--plot FILE draws steady throughput, p50 and p99 transaction latency, the
p99 wait for a server, refusals and timeouts, and how busy the server
connections were against the first numeric swept key, one line per value of
the other swept keys (e.g. one per mode); PNG or SVG by the extension; the x
axis is logarithmic for /log ranges, a y axis whose values span decades too.
With replications each line has its 95%% CI as a band. --slo-p99 D draws the
SLO on the p99 panel and rings, on each line, the first point that meets it
with nothing refused or timed out.

--shard i/n (1 <= i <= n) runs only the points whose index (0-based, in
output order) is i-1 modulo n, and writes a self-describing shard (JSON by
default, or --format csv) that carries each point's index. 'poolsim merge'
joins the n shard files into exactly the bytes the unsharded sweep prints in
that format. One shard per task of a batch system:
  poolsim sweep big.yaml --vary workload.clients=1..5000 --shard $((JOB_COMPLETION_INDEX+1))/16 > shard.json
  poolsim sweep big.yaml --vary workload.clients=1..5000 --shard $SLURM_ARRAY_TASK_ID/16 --format csv > shard.csv

Examples:
  poolsim sweep pgbouncer-modes --vary workload.clients=10..400/log --plot clients.png
  poolsim sweep pgbouncer-modes --vary workload.clients=10..400/log \
      --vary pooler.mode=direct,session,transaction,statement --format csv
  poolsim sweep pgbouncer-modes --vary pooler.default_pool_size=1..20 --set workload.clients=200 --drop-sweep
  poolsim sweep my-app.yaml --vary workload.query=1ms..20ms/log --vary pooler.mode=session,transaction
  poolsim sweep pgbouncer-modes --vary workload.clients=1..250 --shard 2/4 > part2.json
  poolsim sweep erlang-c --vary pooler.default_pool_size=9..14 --replications 10
  poolsim sweep web-app --vary pooler.default_pool_size=1..40/log --vary pooler.mode=session,transaction \
      --replications 5 --plot pool.png --slo-p99 50ms

%s
Keys for --vary and --set:
%s

Exit status: 0 success, 1 failure, 2 usage error (bad flags, bad --vary, bad scenario).
`

// sweepOptions are the parsed flags of sweep.
type sweepOptions struct {
	varies    []string
	sets      []string
	seedSet   bool
	seed      uint64
	dropSweep bool
}

// sweepOutput is what the sweep command writes: its format, shard i of
// n (0 of 0: the whole sweep), and the plot with its SLO line (0: none).
type sweepOutput struct {
	format, plotPath string
	shardI, shardN   int
	sloMs            float64
}

func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o sweepOptions
	format := fs.String("format", "table", "output format: table, json or csv (json with --shard unless set)")
	fs.Uint64Var(&o.seed, "seed", 0, "random seed (default: the scenario's)")
	fs.StringArrayVar(&o.sets, "set", nil, "override a scenario value by its dotted key: --set workload.clients=500")
	fs.StringArrayVar(&o.varies, "vary", nil, "sweep a key over values: --vary workload.clients=10..400/log")
	fs.BoolVar(&o.dropSweep, "drop-sweep", false, "ignore the scenario's own sweep: block; only the --vary axes")
	plotPath := fs.String("plot", "", "also draw the sweep into this .png or .svg file")
	slo := fs.String("slo-p99", "", "with --plot: draw this p99 as the SLO line and mark, on each line, the first point that meets it without refusals or timeouts")
	shard := fs.String("shard", "", "run only shard i of n (1-based): --shard 2/8; merge with 'poolsim merge'")
	sf := addStudyFlags(fs)
	fs.Usage = func() { fmt.Fprintf(stderr, sweepHelp, studyHelp, "  "+strings.Join(scenarios.Fields(), "\n  ")) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o.seedSet = fs.Changed("seed")
	if *shard != "" && !fs.Changed("format") {
		*format = "json"
	}
	out, err := checkSweepArgs(fs, *format, *plotPath, *slo, *shard)
	if err != nil {
		return err
	}
	sc, axes, err := sweepScenario(fs.Arg(0), o)
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
	index, sel := shardPoints(points, out.shardI, out.shardN)
	if err := sf.checkCost(sc, sel, st); err != nil {
		return err
	}
	rows, runErr := sf.run(ctx, sel, st, stderr, "sweep "+sc.Name)
	if runErr != nil { // interrupted: the finished points, marked incomplete
		var keep []int
		for k := range rows {
			if !rows[k].Incomplete {
				keep = append(keep, index[k])
			}
		}
		index = keep
	}
	rep := report.New(sc, st, rows)
	rows = rep.Rows
	if out.shardN > 0 {
		if err := writeSweepShard(stdout, out, sc, st, points, index, rep); err != nil {
			return err
		}
		return runErr
	}
	if err := report.Write(stdout, out.format, rep); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if out.plotPath != "" {
		return plotSweep(out, sc, axes, o.sets, rows)
	}
	return nil
}

// checkSweepArgs checks the command line's scenario argument and output
// flags, the format first.
func checkSweepArgs(fs *pflag.FlagSet, format, plotPath, slo, shard string) (sweepOutput, error) {
	out := sweepOutput{format: format, plotPath: plotPath}
	if err := report.CheckFormat(format); err != nil {
		return out, usage(err)
	}
	if fs.NArg() != 1 {
		return out, usagef("want exactly one SCENARIO (a file or a built-in name), got %d arguments; see 'poolsim sweep --help'", fs.NArg())
	}
	if shard != "" {
		var err error
		if out.shardI, out.shardN, err = parseShard(shard); err != nil {
			return out, err
		}
		if format == "table" {
			return out, usagef("--shard writes json or csv (a table cannot be merged); use --format json or csv")
		}
		if plotPath != "" {
			return out, usagef("--plot with --shard would draw one shard only; merge the shards, then sweep without --shard to plot")
		}
	}
	if slo != "" {
		d, err := time.ParseDuration(slo)
		if err != nil || d <= 0 {
			return out, usagef("--slo-p99 %q: want a duration above 0 such as 50ms", slo)
		}
		if plotPath == "" {
			return out, usagef("--slo-p99 draws on the plot: give --plot too")
		}
		out.sloMs = float64(d) / 1e6
	}
	if plotPath != "" {
		if err := plot.CheckPath(plotPath); err != nil {
			return out, usage(err)
		}
	}
	return out, nil
}

// shardPoints are shard i of n's points (every n-th from the i-th) and
// their indexes among all; with n 0, all of them.
func shardPoints(points []scenarios.Point, i, n int) (index []int, sel []scenarios.Point) {
	index = make([]int, 0, len(points))
	for k := range points {
		if n == 0 || k%n == i-1 {
			index = append(index, k)
		}
	}
	if n == 0 {
		return index, points
	}
	sel = make([]scenarios.Point, len(index))
	for k, p := range index {
		sel[k] = points[p]
	}
	return index, sel
}

// writeSweepShard writes a shard's rows with what merging them needs:
// the shard's place, the sweep's fingerprint and every point's
// assumptions.
func writeSweepShard(w io.Writer, out sweepOutput, sc *scenarios.Scenario, st scenarios.Study, points []scenarios.Point, index []int, rep report.Report) error {
	meta := report.ShardMeta{Scenario: sc.Name, Seed: sc.Base.Seed, Index: out.shardI, Count: out.shardN, Points: len(points), Sweep: report.Fingerprint(sc, st, points)}
	all := make([]scenarios.Row, len(points)) // the merged output's assumptions cover every point
	for i, p := range points {
		all[i].Config = p.Config
	}
	rep.Notes = report.Assumptions(all)
	return report.WriteShard(w, out.format, meta, index, rep)
}

// plotSweep draws the sweep's rows, log axes as the --vary axes say,
// with the SLO line and each line's first point to meet it.
func plotSweep(out sweepOutput, sc *scenarios.Scenario, axes []vary.Axis, sets []string, rows []scenarios.Row) error {
	logKeys := map[string]bool{}
	for _, a := range axes {
		if a.Log {
			logKeys[a.Key] = true
		}
	}
	title := fmt.Sprintf("%s (seed %d)", sc.Name, sc.Base.Seed)
	if len(sets) > 0 {
		title += ", " + strings.Join(sets, ", ")
	}
	in := plot.Input{Title: title, Rows: rows, LogKeys: logKeys, SLOP99Ms: out.sloMs}
	if out.sloMs > 0 {
		in.Chosen, in.ChosenLabel = plot.FirstMeeting(rows, out.sloMs), "first to meet the SLO"
	}
	if err := plot.Write(out.plotPath, in); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}

// parseShard reads "i/n" with 1 <= i <= n.
func parseShard(s string) (i, n int, err error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return 0, 0, usagef("--shard %q: want i/n with 1 <= i <= n, e.g. --shard 1/4", s)
	}
	return i, n, nil
}

// sweepScenario loads the scenario, applies --seed and --set, and puts the
// --vary axes in front of the scenario's remaining sweep axes.
func sweepScenario(name string, o sweepOptions) (*scenarios.Scenario, []vary.Axis, error) {
	if len(o.varies) == 0 {
		return nil, nil, usagef("want at least one --vary key=values, e.g. --vary workload.clients=10..400/log; see 'poolsim sweep --help'")
	}
	var axes []vary.Axis
	for _, spec := range o.varies {
		a, err := vary.Parse(spec)
		if err != nil {
			return nil, nil, usage(err)
		}
		for _, b := range axes {
			if b.Key == a.Key {
				return nil, nil, usagef("--vary %s given twice; put all its values in one --vary", a.Key)
			}
		}
		for _, kv := range o.sets {
			if k, _, _ := strings.Cut(kv, "="); strings.TrimSpace(k) == a.Key {
				return nil, nil, usagef("%s is both --set and --vary; drop one", a.Key)
			}
		}
		axes = append(axes, a)
	}
	sc, err := loadScenario(name, o.sets, o.seedSet, o.seed)
	if err != nil {
		return nil, nil, err
	}
	if err := vary.Apply(sc, axes, o.dropSweep); err != nil {
		return nil, nil, usage(err)
	}
	return sc, axes, nil
}
