package scenarios

import (
	"errors"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/models/system"
)

// TestAppliedPoolingKeys: every PgBouncer setting the model applies is a
// scenario key, and a value set there lands in the model's Pooling, where
// the validator hands it on; the generated keys refuse bad values.
func TestAppliedPoolingKeys(t *testing.T) {
	for _, key := range system.AppliedPoolingKeys {
		if _, ok := lookup(poolingKey(key)); !ok {
			t.Errorf("applied key %s: no scenario key %s", key, poolingKey(key))
		}
	}
	s, err := Builtin("pgbouncer-modes")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"pooler.max_user_connections", "7"}, {"pooler.query_wait_timeout", "1500ms"},
		{"pooler.mode", "statement"}, {"pooler.default_pool_size", "3"}} {
		if err := s.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	p := s.Base.Pooler.Pooling
	if p.MaxUserConnections != 7 || p.QueryWaitTimeout != 1500*time.Millisecond || p.PoolMode != poolmode.Statement || p.DefaultPoolSize != 3 {
		t.Errorf("Pooling after the sets = %+v", p)
	}
	for _, kv := range [][2]string{{"pooler.max_user_connections", "-1"}, {"pooler.max_user_connections", "x"}} {
		if err := s.Set(kv[0], kv[1]); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("Set(%s, %s) = %v, want ErrInvalid", kv[0], kv[1], err)
		}
	}
}
