package poolconf

import (
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// TestSetText: a key set as the file or the console's SET would is read
// back as SHOW CONFIG writes it.
func TestSetText(t *testing.T) {
	s := Defaults()
	for _, c := range []struct{ key, in, want string }{
		{"query_wait_timeout", "1.5", "1.5"},
		{"default_pool_size", "7", "7"},
		{"server_reset_query_always", "1", "1"},
		{"pool_mode", "transaction", "transaction"},
		{"admin_users", "a, b", "a,b"},
		{"log_connections", "0", "0"},
	} {
		if err := s.Set(c.key, c.in); err != nil {
			t.Fatalf("Set(%s, %s): %v", c.key, c.in, err)
		}
		if got, ok := s.Text(c.key); !ok || got != c.want {
			t.Errorf("Text(%s) = %q, %v; want %q", c.key, got, ok, c.want)
		}
	}
	if s.QueryWaitTimeout != 1500*time.Millisecond || s.PoolMode != poolmode.Transaction {
		t.Errorf("fields: query_wait_timeout %v, pool_mode %v", s.QueryWaitTimeout, s.PoolMode)
	}
	if err := s.Set("no_such_key", "1"); err == nil {
		t.Error("Set(no_such_key): no error")
	}
	if err := s.Set("default_pool_size", "abc"); err == nil {
		t.Error("Set(default_pool_size, abc): no error")
	}
	d := Defaults()
	if got, _ := d.Text("tcp_keepalive"); got != "1" {
		t.Errorf("Text(tcp_keepalive) of the defaults = %q, want PgBouncer's 1", got)
	}
	if _, ok := s.Text("no_such_key"); ok {
		t.Error("Text(no_such_key): ok")
	}
	for i, k := range Keys18[1:] {
		if Keys18[i].Name >= k.Name {
			t.Errorf("Keys18 not in SHOW CONFIG's order at %s", k.Name)
		}
	}
}
