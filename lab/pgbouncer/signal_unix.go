//go:build unix

package pgbouncer

import "syscall"

// Signal sends sig to the pgbouncer process (SIGHUP reloads, SIGUSR1
// pauses, SIGUSR2 resumes).
func (p *PgBouncer) Signal(sig syscall.Signal) error {
	return syscall.Kill(p.proc.Pid(), sig)
}
