package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/poolsim/poolsim/scenarios/plot"
	"github.com/poolsim/poolsim/scenarios/report"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "merge", short: "join 'sweep --shard' outputs into the unsharded output", run: runMerge})
}

const mergeHelp = `Usage: poolsim merge SHARD-FILE... [--plot out.png|out.svg]

Joins the outputs of 'poolsim sweep ... --shard i/n' (all n of them, in any
order) and prints exactly the bytes the same sweep prints without --shard,
in the shards' format: JSON shards give the JSON report, CSV shards the CSV.
The shards must come from the same sweep (scenario, seed, --set and --vary
values: each shard carries a fingerprint of its sweep), each shard once.
--plot draws the merged sweep as 'poolsim sweep --plot' does (the x axis is
logarithmic when the values look log-spaced).

Examples:
  for i in 1 2 3 4; do
    poolsim sweep pgbouncer-modes --vary workload.clients=1..250 --shard $i/4 > part$i.json
  done
  poolsim merge part*.json > sweep.json
  poolsim merge part*.csv --plot sweep.png > sweep.csv

Exit status: 0 success, 1 failure (a file cannot be read), 2 usage error
(not a shard file, shards of different sweeps, a shard missing or given twice).
`

func runMerge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("merge", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	plotPath := fs.String("plot", "", "also draw the merged sweep into this .png or .svg file")
	fs.Usage = func() { fmt.Fprint(stderr, mergeHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *plotPath != "" {
		if err := plot.CheckPath(*plotPath); err != nil {
			return usage(err)
		}
	}
	if fs.NArg() == 0 {
		return usagef("want the shard files to merge, e.g. poolsim merge part*.json; see 'poolsim merge --help'")
	}
	var shards []*report.Shard
	for _, name := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		s, err := report.ReadShard(name, data)
		if err != nil {
			return usage(err)
		}
		shards = append(shards, s)
	}
	// Check before writing anything, so a bad set of shards leaves stdout
	// empty.
	if err := report.CheckShards(shards); err != nil {
		return usage(err)
	}
	rows, err := report.Merge(stdout, shards)
	if err != nil {
		if errors.Is(err, report.ErrShard) {
			return usage(err)
		}
		return err
	}
	if *plotPath == "" {
		return nil
	}
	first := shards[0].Meta
	in := plot.Input{Title: fmt.Sprintf("%s (seed %d)", first.Scenario, first.Seed), Rows: rows}
	if err := plot.Write(*plotPath, in); err != nil {
		return fmt.Errorf("--plot: %w", err)
	}
	return nil
}
