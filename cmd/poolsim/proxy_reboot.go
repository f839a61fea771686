package main

import (
	"context"
	"fmt"
	"log"
	"net"

	"github.com/poolsim/poolsim/proxy/pooler"
)

// Online restart (-R, PgBouncer's pgbouncer -R): instead of listening, the
// new process takes over the sockets of the proxy running on the Unix
// socket cfg names (pooler.StartTakeover), writes its pidfile once the old
// process has gone, and serves with pooler.Proxy.ServeTakeover.

// listenOrTakeOver opens cfg's listeners, or with reboot suspends the
// running proxy and takes its listeners (the Takeover then holds its
// clients and servers until serveOrTakeOver).
func listenOrTakeOver(ctx context.Context, cfg *pooler.Config, reboot bool) ([]net.Listener, *pooler.Takeover, error) {
	if !reboot {
		lns, err := pooler.Listen(cfg)
		return lns, nil, err
	}
	t, err := pooler.StartTakeover(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("online restart: %w", err)
	}
	if len(t.Listeners()) == 0 {
		_ = t.Abort()
		return nil, nil, fmt.Errorf("online restart: the running process handed over no listening socket")
	}
	return t.Listeners(), t, nil
}

// pidFileAfter writes the pidfile now, or with a takeover once the old
// process (which removes its own as it exits) has gone. remove removes it.
func pidFileAfter(t *pooler.Takeover, path string, logger *log.Logger) (remove func(), err error) {
	if t == nil {
		return writePidFile(path)
	}
	remove = func() {}
	t.AfterShutdown = func() {
		r, err := writePidFile(path)
		if err != nil {
			logger.Printf("ERROR: %v", err)
			return
		}
		remove = r
	}
	return func() { remove() }, nil
}

// serveOrTakeOver serves on lns, or on what t took over.
func serveOrTakeOver(ctx context.Context, p *pooler.Proxy, lns []net.Listener, t *pooler.Takeover) error {
	if t != nil {
		return p.ServeTakeover(ctx, t)
	}
	return p.Serve(ctx, lns[0], lns[1:]...)
}
