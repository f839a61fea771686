package pooler

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func asPgError(err error, pe **pgconn.PgError) bool { return errors.As(err, pe) }

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// runAdders runs clients pgx connections at once through dsn, each asking
// rounds times for round + client with a parameterized query (so pgx's
// statement cache prepares it), and fails t for every wrong answer.
func runAdders(ctx context.Context, t *testing.T, dsn string, clients, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			for r := range rounds {
				var got int
				if err := conn.QueryRow(ctx, "select $1::int + $2::int", r, i).Scan(&got); err != nil || got != r+i {
					errs <- fmt.Errorf("client %d round %d: %d, %v", i, r, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
