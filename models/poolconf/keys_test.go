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

// TestEveryKeyRoundTrips: every tagged field is a key PgBouncer knows,
// its default reads back through Set and Text, and Pooling's keys read the
// same through Pooling and through the Settings that embeds it.
func TestEveryKeyRoundTrips(t *testing.T) {
	d := Defaults()
	for key := range fieldIndex {
		if _, ok := LookupKey(key); !ok {
			t.Errorf("tag %s: not a PgBouncer key", key)
		}
		text, _ := d.Text(key)
		s := Defaults()
		if err := s.Set(key, text); err != nil {
			t.Errorf("Set(%s, %q) of its own default text: %v", key, text, err)
		}
		if got, _ := s.Text(key); got != text {
			t.Errorf("Text(%s) after Set(%q) = %q", key, text, got)
		}
	}
	if len(PoolingKeys()) == 0 {
		t.Fatal("no pooling keys")
	}
	for _, key := range PoolingKeys() {
		if PoolingDoc(key) == "" {
			t.Errorf("pooling key %s: no doc tag", key)
		}
		s := Defaults()
		p := &s.Pooling
		want, _ := s.Text(key)
		if got, ok := p.Text(key); !ok || got != want {
			t.Errorf("Pooling.Text(%s) = %q, %v; Settings.Text %q", key, got, ok, want)
		}
	}
	p := DefaultPooling()
	if err := p.Set("query_wait_timeout", "2.5"); err != nil || p.QueryWaitTimeout != 2500*time.Millisecond {
		t.Errorf("Pooling.Set(query_wait_timeout, 2.5): %v, %v", err, p.QueryWaitTimeout)
	}
	if err := p.Set("listen_port", "1"); err == nil {
		t.Error("Pooling.Set(listen_port): no error for a key outside Pooling")
	}
	if err := p.Set("default_pool_size", "x"); err == nil {
		t.Error("Pooling.Set(default_pool_size, x): no error")
	}
}
