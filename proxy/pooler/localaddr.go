package pooler

import (
	"net/netip"
	"sync"
)

// maxLocalAddrs bounds the local addresses localAddrs keeps: a proxy
// listening on a wildcard address can be reached at any address of the
// host (on loopback, any of 127.0.0.0/8), so a client could otherwise make
// it keep one per connection for good.
const maxLocalAddrs = 64

// localAddrs gives the clients of one local address one copy of it: a
// client keeps a pointer (8 bytes) where a netip.AddrPort takes 32, and
// the proxy has few ends (a listening address, a few with a wildcard one).
type localAddrs struct {
	mu sync.Mutex
	m  map[netip.AddrPort]*netip.AddrPort
}

// intern returns the shared copy of ap, or a copy of its own once
// maxLocalAddrs are kept; nil for the zero address (a Unix socket).
func (la *localAddrs) intern(ap netip.AddrPort) *netip.AddrPort {
	if !ap.IsValid() {
		return nil
	}
	la.mu.Lock()
	defer la.mu.Unlock()
	if x := la.m[ap]; x != nil {
		return x
	}
	x := &ap
	if len(la.m) < maxLocalAddrs {
		if la.m == nil {
			la.m = map[netip.AddrPort]*netip.AddrPort{}
		}
		la.m[ap] = x
	}
	return x
}
