package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/poolsim/poolsim/scenarios"
	"github.com/spf13/pflag"
)

func init() {
	register(command{name: "scenarios", short: "list the built-in scenarios, or print one's YAML", run: runScenarios})
}

const scenariosHelp = `Usage: poolsim scenarios [NAME]

Lists the built-in scenarios with one-line descriptions. With NAME, prints
that scenario's YAML, a starting point for your own:

  poolsim scenarios pgbouncer-modes > my-app.yaml
  poolsim run my-app.yaml

Exit status: 0 success, 1 failure, 2 usage error.
`

func runScenarios(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("scenarios", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, scenariosHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch fs.NArg() {
	case 0:
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, b := range scenarios.Builtins() {
			fmt.Fprintf(tw, "%s\t%s\n", b.Name, b.Description)
		}
		return tw.Flush()
	case 1:
		data, err := scenarios.BuiltinYAML(fs.Arg(0))
		if err != nil {
			return usage(err)
		}
		_, err = stdout.Write(data)
		return err
	}
	return usagef("want at most one scenario name, got %d", fs.NArg())
}
