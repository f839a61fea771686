//go:build !unix

package pgbouncer

import (
	"fmt"
	"syscall"

	"github.com/poolsim/poolsim/lab/pgcluster/childproc"
)

// Signal cannot signal a process off Unix (nor can pgbouncer be started
// there: childproc.ErrUnsupported).
func (p *PgBouncer) Signal(sig syscall.Signal) error {
	return fmt.Errorf("pgbouncer: signal %v: %w", sig, childproc.ErrUnsupported)
}
