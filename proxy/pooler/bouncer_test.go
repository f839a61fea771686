package pooler

import (
	"context"
	"github.com/poolsim/poolsim/models/poolmode"
	"os"
	"strconv"
	"testing"

	"github.com/poolsim/poolsim/lab/pgbouncer"
)

// startBouncer starts a real PgBouncer (transaction mode, pool 20) in front
// of the shared cluster and returns libpq environment pointing at it.
func startBouncer(ctx context.Context, t *testing.T) ([]string, int) {
	t.Helper()
	b, err := pgbouncer.Start(ctx, pgbouncer.Config{
		UpstreamPort: cluster.Port(),
		Pooling:      pgbouncer.Pool(poolmode.Transaction, 20),
	})
	if err != nil {
		t.Skipf("pgbouncer: %v", err)
	}
	t.Cleanup(func() { _ = b.Stop() })
	return append(os.Environ(), "PGHOST="+b.Host(), "PGPORT="+strconv.Itoa(b.Port()), "PGUSER=poolsim",
		"PGPASSWORD=poolsim", "PGDATABASE=poolsim", "PGSSLMODE=disable"), b.Pid()
}
