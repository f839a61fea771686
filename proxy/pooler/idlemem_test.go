package pooler

import (
	"bytes"
	"testing"
	"unsafe"
)

// TestIdleClientSize: a logged-in idle client is its client struct (with
// its socket), a cancel-key map entry and a descriptor slot; the struct
// stays within Go's 320-byte size class (it was 584 bytes, allocated as
// 640, before its counters went to its pool and its tracked settings
// became a shared set; 384 before its local address became a shared copy,
// its extra settings a pointer, its peer's uid and pid 32 bits and its
// flags one block). A field added here is a field every idle client
// carries: if this fails, keep the new state off the client (a pointer to
// what is needed only sometimes) or raise the bound knowingly.
func TestIdleClientSize(t *testing.T) {
	if got := unsafe.Sizeof(client{}); got > 320 {
		t.Errorf("client is %d bytes, more than the 320-byte size class", got)
	}
}

// TestPoolWelcomeFor: the pool's cached ParameterStatus set is what
// welcomeFor builds for every kind of client: one that asks for nothing,
// one whose tracked setting or extra setting replaces a server value, one
// whose value equals the server's; and the cache follows a new params map.
func TestPoolWelcomeFor(t *testing.T) {
	params := map[string]string{"client_encoding": "UTF8", "DateStyle": "ISO, MDY", "TimeZone": "UTC",
		"IntervalStyle": "postgres", "server_version": "15.18", "application_name": ""}
	p := &pool{}
	same := varsFrom(params)
	own := same
	own[trackedIndex("TimeZone")] = "Europe/Paris"
	for _, tc := range []struct {
		name  string
		want  vars
		extra settings
	}{
		{"nothing of its own", same, nil},
		{"a tracked setting", own, nil},
		{"an extra setting the server reports", same, settings{{name: "intervalstyle", value: "iso_8601"}}},
		{"an extra setting the server does not report", same, settings{{name: "search_path", value: "x"}}},
		{"the server's value", same, nil},
	} {
		want := welcomeFor(params, &tc.want, tc.extra)
		if got := p.welcomeFor(params, &tc.want, tc.extra); !bytes.Equal(got, want) {
			t.Errorf("%s: pool's welcome differs from welcomeFor's:\n%q\n%q", tc.name, got, want)
		}
	}
	if w := p.welcome.Load(); w == nil {
		t.Fatal("no welcome cached for the clients that ask for nothing")
	}
	first := p.welcome.Load().b
	if got := p.welcomeFor(params, &same, nil); &got[0] != &first[0] {
		t.Error("a second client asking for nothing got a new encoding, not the cached one")
	}
	params2 := map[string]string{"client_encoding": "UTF8", "server_version": "16.1"}
	same2 := varsFrom(params2)
	if got, want := p.welcomeFor(params2, &same2, nil), encodeWelcome(params2); !bytes.Equal(got, want) {
		t.Errorf("after the pool's welcome changed: %q, want %q", got, want)
	}
}

// TestInternVars: clients with the same tracked settings share one set;
// a changed setting gives the client another set and leaves the shared
// one as it was.
func TestInternVars(t *testing.T) {
	px := &Proxy{}
	a := vars{"UTF8", "ISO, MDY", "UTC", "on", "app"}
	b := a
	pa, pb := px.internVars(&a), px.internVars(&b)
	if pa != pb {
		t.Fatal("two clients with the same settings hold two sets")
	}
	if pn := px.internVars(nil); pn == nil || *pn != (vars{}) {
		t.Errorf("no settings: %v, want an empty set", pn)
	}
	c := &client{px: px, want: pa}
	body := append(append([]byte("TimeZone\x00"), "Europe/Paris"...), 0)
	c.noteParameterStatus(body)
	if c.want == pa || c.want[trackedIndex("TimeZone")] != "Europe/Paris" {
		t.Errorf("after a ParameterStatus: %v (shared %p, own %p)", *c.want, pa, c.want)
	}
	if pa[trackedIndex("TimeZone")] != "UTC" {
		t.Errorf("the shared set changed: %v", *pa)
	}
	for i := range maxVarSets + 10 { // bounded: the memory starts again, sets stay valid
		v := vars{string(rune('a' + i%26)), string(rune(i))}
		px.internVars(&v)
	}
	if len(px.varSets) > maxVarSets || *pa != a {
		t.Errorf("%d sets interned (at most %d), shared set %v", len(px.varSets), maxVarSets, *pa)
	}
}
