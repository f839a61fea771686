package childproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FreePort returns a loopback TCP port that was free a moment ago. Another
// process can take it before the server binds it: launchers retry then.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("childproc: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitReady calls ready every interval until it returns nil, ctx ends or
// the child exits. ready gets ctx; it bounds its own attempt. The error
// names what waited (what, e.g. "postgres on port 5432") and, when ctx
// ended, ready's last error.
func (p *Process) WaitReady(ctx context.Context, what string, interval time.Duration, ready func(context.Context) error) error {
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for %s: %w (last error: %w)", what, ctx.Err(), err)
		case <-p.done:
			t.Stop()
			return fmt.Errorf("wait for %s: %s exited: %v", what, p.name, p.err)
		case <-t.C:
		}
	}
}

// LastLines returns the last n lines of b: what a launcher shows of a
// server's log or a tool's output when the server would not start.
func LastLines(b []byte, n int) string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

var digitsRE = regexp.MustCompile(`\d+`)

// CompareVersions compares two version strings by the numbers in them, in
// order ("9.6" < "15" < "15.4", "1.18.0" < "1.21"): -1, 0 or +1. Text
// around the numbers is ignored, so /usr/lib/postgresql/15/bin compares as
// 15, and a missing number counts as 0 ("1.21" = "1.21.0"; a string with
// no number, such as "unknown", is older than any release).
func CompareVersions(a, b string) int {
	na, nb := digitsRE.FindAllString(a, -1), digitsRE.FindAllString(b, -1)
	for i := 0; i < max(len(na), len(nb)); i++ {
		x, y := 0, 0
		if i < len(na) {
			x, _ = strconv.Atoi(na[i])
		}
		if i < len(nb) {
			y, _ = strconv.Atoi(nb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// VersionAtLeast reports whether version v (e.g. "1.18.0") is major.minor
// or later. A v without a number ("unknown") is not.
func VersionAtLeast(v string, major, minor int) bool {
	return digitsRE.MatchString(v) && CompareVersions(v, strconv.Itoa(major)+"."+strconv.Itoa(minor)) >= 0
}
