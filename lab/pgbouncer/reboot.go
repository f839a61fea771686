package pgbouncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

// Reboot is PgBouncer's online restart: a new pgbouncer -R on the same
// pgbouncer.ini takes over the running process's sockets (clients, servers
// and listeners) over its Unix socket, and the old process exits. Reboot
// returns once the old process has exited and the port accepts
// connections; the new process is the one Stop stops. Its output is
// appended to LogPath. ctx bounds the wait (30 s if it has no deadline).
func (p *PgBouncer) Reboot(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	acct, err := childproc.ServerAccount()
	if err != nil {
		return fmt.Errorf("pgbouncer: reboot: %w", err)
	}
	logFile, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgbouncer: reboot: %w", err)
	}
	proc, err := childproc.Start(childproc.Spec{Path: p.path, Args: []string{"-R", p.ini}, Dir: p.dir, Output: logFile, Account: acct})
	logFile.Close()
	if err != nil {
		return fmt.Errorf("pgbouncer: reboot: %w", err)
	}
	old := p.proc
	select {
	case <-old.Done():
	case <-proc.Done():
		log, _ := os.ReadFile(p.LogPath())
		return fmt.Errorf("pgbouncer: reboot: the new process exited: %v\n%s", proc.Err(), childproc.LastLines(log, 20))
	case <-ctx.Done():
		_ = proc.Stop(int(p.stopSig), 3*time.Second)
		return fmt.Errorf("pgbouncer: reboot: the old process did not exit: %w", ctx.Err())
	}
	p.proc = proc
	if err := p.waitReady(ctx, false); err != nil {
		return errors.Join(fmt.Errorf("pgbouncer: reboot: %w", err), proc.Stop(int(p.stopSig), 3*time.Second))
	}
	return nil
}
