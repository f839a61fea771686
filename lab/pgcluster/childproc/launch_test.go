//go:build unix

package childproc_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

func TestCompareVersions(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"1.18.0", "1.21", -1},
		{"1.21", "1.21.0", 0},
		{"1.23.1", "1.23", 1},
		{"9.6", "15", -1},
		{"/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin", 1},
		{"/usr/pgsql-9.6/bin", "/usr/pgsql-15/bin", -1},
		{"unknown", "1.0", -1},
		{"10", "9", 1}, // numbers, not text
	} {
		if got := childproc.CompareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := childproc.CompareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tt := range []struct {
		v            string
		major, minor int
		want         bool
	}{
		{"1.18.0", 1, 21, false},
		{"1.21.0", 1, 21, true},
		{"1.21", 1, 21, true},
		{"1.23.1", 1, 21, true},
		{"2.0", 1, 21, true},
		{"0.9", 1, 0, false},
		{"unknown (pgbouncer --version failed)", 0, 0, false},
		{"", 0, 0, false},
	} {
		if got := childproc.VersionAtLeast(tt.v, tt.major, tt.minor); got != tt.want {
			t.Errorf("VersionAtLeast(%q, %d, %d) = %v, want %v", tt.v, tt.major, tt.minor, got, tt.want)
		}
	}
}

func TestLastLines(t *testing.T) {
	if got := childproc.LastLines([]byte("a\nb\nc\nd\n"), 2); got != "c\nd" {
		t.Errorf("LastLines(a..d, 2) = %q, want %q", got, "c\nd")
	}
	if got := childproc.LastLines([]byte("only"), 5); got != "only" {
		t.Errorf("LastLines(only, 5) = %q", got)
	}
}

func TestFreePort(t *testing.T) {
	port, err := childproc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("FreePort gave %d, which cannot be bound: %v", port, err)
	}
	l.Close()
}

// TestWaitReady: ready is polled until it succeeds; a child that exits ends
// the wait with an error naming it, and so does the context.
func TestWaitReady(t *testing.T) {
	p := sh(t, "exec sleep 30")
	calls := 0
	err := p.WaitReady(context.Background(), "thing", time.Millisecond, func(context.Context) error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("WaitReady = %v after %d calls, want nil after 3", err, calls)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = p.WaitReady(ctx, "thing", time.Millisecond, func(context.Context) error { return errors.New("refused") })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "thing") {
		t.Errorf("WaitReady with a cancelled context = %v, want context.Canceled naming thing and the last error", err)
	}

	gone := sh(t, "exit 3")
	err = gone.WaitReady(context.Background(), "thing", time.Millisecond, func(context.Context) error { return errors.New("refused") })
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("WaitReady on a child that exits = %v, want an error saying it exited", err)
	}
}
