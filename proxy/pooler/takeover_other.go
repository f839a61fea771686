//go:build !linux

package pooler

import (
	"context"
	"errors"
	"net"
)

// Online restart needs Linux, as the event loop does: descriptors pass in
// SCM_RIGHTS over the console's Unix socket and the taken-over sockets join
// the epoll set. Elsewhere StartTakeover and ServeTakeover say so and SHOW
// FDS lists nothing.

var errTakeoverNeedsLinux = errors.New("online restart: needs Linux (the event loop's epoll, descriptors passed over the console's Unix socket)")

// handoverState is takeover_old.go's: what SHOW FDS passed on.
type handoverState struct {
	socks []*sock
	unix  []*net.UnixListener
}

// acceptGate is takeover_old.go's: accepting stops while suspended.
type acceptGate struct{}

// Takeover is an online restart in progress (takeover.go); none starts
// here.
type Takeover struct {
	// AfterShutdown runs once the old process has gone (takeover.go).
	AfterShutdown func()
	done          bool
}

// StartTakeover is pgbouncer -R; it needs Linux.
func StartTakeover(ctx context.Context, cfg *Config) (*Takeover, error) {
	return nil, errTakeoverNeedsLinux
}

// Listeners returns the listening sockets taken over: none here.
func (t *Takeover) Listeners() []net.Listener { return nil }

// Abort gives the old process back its clients: nothing to give here.
func (t *Takeover) Abort() error { return nil }

// ServeTakeover serves what t took over; it needs Linux.
func (p *Proxy) ServeTakeover(ctx context.Context, t *Takeover) error {
	return errTakeoverNeedsLinux
}

func (p *Proxy) takeOver(ctx context.Context, t *Takeover) error { return errTakeoverNeedsLinux }

type fdHandout struct{}

func (h *fdHandout) close() {}

func canPassFDs(c *client) bool                         { return false }
func (p *Proxy) handout() (*fdHandout, error)           { return nil, errTakeoverNeedsLinux }
func (p *Proxy) passFDs(lg *loginIO, h *fdHandout) bool { return false }
func (p *Proxy) acceptHeld(err error) bool              { return false }
func (p *Proxy) dropHandedOver(why string)              {}
func (p *Proxy) pauseAccept()                           {}
func (p *Proxy) resumeAccept()                          {}

// fdTable is SHOW FDS: its columns, no rows.
func (p *Proxy) fdTable(pass bool) (*table, []int, error) {
	t := newTable("issssiqisssssbb", "fd", "task", "user", "database", "addr", "port", "cancel", "link",
		"client_encoding", "std_strings", "datestyle", "timezone", "password", "scram_client_key", "scram_server_key")
	return t, nil, nil
}
