package pgcluster

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

// Down shuts PostgreSQL down as `pg_ctl stop -m fast` does (SIGINT to the
// postmaster; SIGKILL to its group after 10 s) and keeps its data
// directory and port, so that Up can start it again: meanwhile a
// connection to Port is refused, as from a database server that is down.
// It must not run concurrently with Up, Restart or Stop.
func (c *Cluster) Down() error {
	if err := c.proc.Stop(int(syscall.SIGINT), 10*time.Second); err != nil {
		return fmt.Errorf("pgcluster: down: %w", err)
	}
	c.logf("pgcluster: down 127.0.0.1:%d", c.port)
	return nil
}

// Up starts PostgreSQL again after Down, on the same port and data
// directory, and returns once it accepts connections; its log is appended
// to LogPath. Called while PostgreSQL runs, it does nothing. Bounded by
// ctx.
func (c *Cluster) Up(ctx context.Context) error {
	if !c.proc.Exited() {
		return nil
	}
	acct, err := childproc.ServerAccount()
	if err != nil {
		return fmt.Errorf("pgcluster: up: %w", err)
	}
	if err := c.spawn(ctx, acct, c.port, os.O_APPEND); err != nil {
		log, _ := os.ReadFile(c.LogPath())
		return fmt.Errorf("pgcluster: up: %w\n%s", err, childproc.LastLines(log, 20))
	}
	c.logf("pgcluster: up 127.0.0.1:%d", c.port)
	return nil
}
