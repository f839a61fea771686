package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
)

// Exit statuses, documented in every command's help.
const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT, as a shell reports a command stopped by Ctrl-C
)

// usageError marks an error caused by the command line or the scenario
// (exit status 2) rather than by the run itself (exit status 1).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usage wraps err as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// usagef formats a usage error.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func isHelp(err error) bool { return errors.Is(err, pflag.ErrHelp) }

// exitCode is the one place that maps errors to exit statuses.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, isHelp(err):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	default:
		return exitFail
	}
}

// parseFlags parses args with fs, turning flag errors into usage errors.
// Help (-h, --help) returns pflag.ErrHelp after printing the usage.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || isHelp(err) {
		return err
	}
	return usage(err)
}
