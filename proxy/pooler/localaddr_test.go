package pooler

import (
	"net/netip"
	"testing"
)

// TestLocalAddrsIntern: clients of one local address share one copy of
// it; the zero address (a Unix socket) is nil; past maxLocalAddrs an
// address gets a copy of its own and the proxy keeps no more.
func TestLocalAddrsIntern(t *testing.T) {
	var la localAddrs
	if la.intern(netip.AddrPort{}) != nil {
		t.Fatal("the zero address is not nil")
	}
	a := netip.MustParseAddrPort("127.0.0.1:6432")
	x, y := la.intern(a), la.intern(netip.MustParseAddrPort("127.0.0.1:6432"))
	if x == nil || x != y || *x != a {
		t.Fatalf("one address, two copies: %p %p", x, y)
	}
	for i := range 2 * maxLocalAddrs {
		ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 1, byte(i)}), 6432)
		if got := la.intern(ap); got == nil || *got != ap {
			t.Fatalf("address %v: got %v", ap, got)
		}
	}
	if n := len(la.m); n != maxLocalAddrs {
		t.Errorf("kept %d addresses, want %d", n, maxLocalAddrs)
	}
	if la.intern(a) != x {
		t.Error("a kept address lost its copy")
	}
}

// TestPeerUser: a Unix peer's uid keeps all 32 bits of a uid_t; -1 is
// unknown.
func TestPeerUser(t *testing.T) {
	for _, tc := range []struct {
		uid  int32
		want int
		ok   bool
	}{{-1, 0, false}, {0, 0, true}, {1000, 1000, true}, {-2, 1<<32 - 2, true}} {
		c := &client{peerUID: tc.uid}
		uid, ok := c.peerUser()
		if ok != tc.ok || (ok && uid != tc.want) {
			t.Errorf("peerUID %d: got %d, %v; want %d, %v", tc.uid, uid, ok, tc.want, tc.ok)
		}
	}
}
