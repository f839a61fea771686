//go:build !unix

package main

import (
	"errors"
	"io"
	"os"
	osuser "os/user"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// daemonize: -d needs a Unix system.
func daemonize([]string, pooler.Config, io.Writer) error {
	return usagef("-d: a daemon needs a Unix system")
}

func daemonChild() *os.File      { return nil }
func tellParent(*os.File, error) {}

func osUserLookup(name string) (*osuser.User, error) { return osuser.Lookup(name) }

func setIDs(int, int) error { return errors.New("switching user needs a Unix system") }
