package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// PgBouncer's own command line, beside the proxy's flags, so that a
// one-line wrapper named pgbouncer (or a symlink) stands where pgbouncer
// stood: pgbouncer [-d] [-R] [-q] [-v] [-u USER] [-V] [-h] pgbouncer.ini.
// -v is --verbose and the positional file is --config.

// pgbOptions are PgBouncer's switches.
type pgbOptions struct {
	daemon, reboot, quiet, version *bool
	user                           *string
}

// addPgBouncerFlags defines PgBouncer's switches on fs.
func addPgBouncerFlags(fs *pflag.FlagSet) pgbOptions {
	return pgbOptions{
		daemon:  fs.BoolP("daemon", "d", false, "run in the background, as pgbouncer -d: needs logfile and pidfile (the daemon's stdout and stderr go to /dev/null); exits 0 once it serves"),
		reboot:  fs.BoolP("reboot", "R", false, "online restart, as pgbouncer -R: take over the listening sockets, clients and servers of the proxy running on unix_socket_dir's socket, which then exits"),
		quiet:   fs.BoolP("quiet", "q", false, "nothing to stderr (the log still goes to logfile)"),
		version: fs.BoolP("version", "V", false, "print the version (as SHOW VERSION on the console has it) and exit"),
		user:    fs.StringP("user", "u", "", "user: when started as root, switch to this OS user once the sockets are bound (pgbouncer.ini's user key)"),
	}
}

// configArg takes PgBouncer's positional pgbouncer.ini as --config.
func (o *proxyOptions) configArg() error {
	switch o.fs.NArg() {
	case 0:
		return nil
	case 1:
		if *o.configFile != "" {
			return usagef("both --config %s and the file %q: give one", *o.configFile, o.fs.Arg(0))
		}
		*o.configFile = o.fs.Arg(0)
		return nil
	}
	return usagef("unexpected argument %q (one pgbouncer.ini only)", o.fs.Arg(1))
}

// printVersion is -V: the first line is SHOW VERSION's, as PgBouncer's
// suite compares them.
func printVersion(stdout io.Writer) {
	fmt.Fprintln(stdout, pooler.Version)
}

// lookupUser resolves -u/user to uid and gid.
func lookupUser(name string) (uid, gid int, err error) {
	u, err := osUserLookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: %w", name, err)
	}
	uid, err = strconv.Atoi(u.Uid)
	if err == nil {
		gid, err = strconv.Atoi(u.Gid)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: uid %s gid %s: %w", name, u.Uid, u.Gid, err)
	}
	return uid, gid, nil
}

// switchUser is -u (and the user key): once the sockets are bound, a
// proxy started as root becomes user, handing it what it must reopen or
// remove later (the log file, the Unix socket file). Not root: the user
// must be the current one, as PgBouncer's change_user insists.
func switchUser(name string, owned []string) error {
	if name == "" {
		return nil
	}
	uid, gid, err := lookupUser(name)
	if err != nil {
		return err
	}
	if os.Getuid() != 0 {
		if os.Getuid() == uid {
			return nil
		}
		return fmt.Errorf("user %s: could not switch user: only root can (running as uid %d)", name, os.Getuid())
	}
	for _, f := range owned {
		if f != "" && !strings.HasPrefix(f, "@") {
			if err := os.Lchown(f, uid, gid); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("user %s: chown %s: %w", name, f, err)
			}
		}
	}
	return setIDs(uid, gid)
}
