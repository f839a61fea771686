// Command poolsim tells which connection-pool mode and pool size fit a
// PostgreSQL workload, and proves it: a deterministic simulator of clients,
// poolers and the server, and a live pooling proxy to check it against.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command is one subcommand. Each lives in its own file with its own
// pflag.FlagSet; run returns an error, and exitCode maps it to the status.
type command struct {
	name  string
	short string
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is filled by the subcommand files' init functions, in the order
// the help lists them.
var commands []command

func register(c command) { commands = append(commands, c) }

// beforeMain are what subcommands need to run before anything else when
// this executable is started again as one of their helper processes (each
// returns at once when it is not).
var beforeMain []func()

func main() {
	for _, f := range beforeMain {
		f() // a helper process of a subcommand (validate's wake-up measurement) runs and exits here
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the process at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const mainUsage = `poolsim - which PostgreSQL pool mode and pool size fit your workload, and proof.

Usage:
  poolsim <command> [arguments]

Commands:
%s
Run 'poolsim <command> --help' for a command's flags and examples.

Exit status: 0 success, 1 failure, 2 usage error (bad flags, bad scenario),
130 interrupted (SIGINT or SIGTERM: what was finished is written, marked
incomplete).
`

func usageText() string {
	var list string
	for _, c := range commands {
		list += fmt.Sprintf("  %-10s %s\n", c.name, c.short)
	}
	return fmt.Sprintf(mainUsage, list)
}

// run dispatches to a subcommand and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText())
		return exitUsage
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		fmt.Fprint(stdout, usageText())
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			err := c.run(ctx, args[1:], stdout, stderr)
			if err != nil && !isHelp(err) {
				fmt.Fprintf(stderr, "poolsim %s: %v\n", name, err)
			}
			return exitCode(err)
		}
	}
	fmt.Fprintf(stderr, "poolsim: unknown command %q\nRun 'poolsim help' for the list of commands.\n", name)
	return exitUsage
}
