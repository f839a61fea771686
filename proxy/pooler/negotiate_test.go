package pooler

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// rawStartup is a start-up packet with protocol version code and the
// given name and value strings, terminated.
func rawStartup(code uint32, kv ...string) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint32(b[4:], code)
	for _, s := range kv {
		b = append(b, s...)
		b = append(b, 0)
	}
	b = append(b, 0)
	binary.BigEndian.PutUint32(b, uint32(len(b)))
	return b
}

// startupReply is what a server answered a start-up packet, summed up:
// "v 196608 [opts]" for a NegotiateProtocolVersion, "ready" once the login
// ended in ReadyForQuery and "select 1" answered 1 on it, "FATAL code
// message" for an ErrorResponse, "v2 text" for an error in the old
// protocol's format, each in turn, space-joined by "; ".
func startupReply(t *testing.T, addr string, packet []byte) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(packet); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var out []string
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return strings.Join(append(out, "eof"), "; ")
		}
		if head, _ := r.Peek(4); typ == 'E' && len(head) == 4 && head[0] != 0 {
			rest, _ := io.ReadAll(r) // the old protocol's error: text to the zero byte
			return strings.Join(append(out, fmt.Sprintf("v2 %q", rest)), "; ")
		}
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return strings.Join(append(out, "eof"), "; ")
		}
		body := make([]byte, binary.BigEndian.Uint32(h[:])-4)
		if _, err := io.ReadFull(r, body); err != nil {
			return strings.Join(append(out, "eof"), "; ")
		}
		switch typ {
		case 'v':
			var m pgproto3.NegotiateProtocolVersion
			if err := m.Decode(body); err != nil {
				t.Fatalf("NegotiateProtocolVersion: %v", err)
			}
			out = append(out, fmt.Sprintf("v %d %v", m.NewestMinorProtocol, m.UnrecognizedOptions))
		case 'E':
			var e pgproto3.ErrorResponse
			if err := e.Decode(body); err != nil {
				t.Fatalf("ErrorResponse: %v", err)
			}
			return strings.Join(append(out, fmt.Sprintf("%s %s %s", e.Severity, e.Code, e.Message)), "; ")
		case 'R':
			if binary.BigEndian.Uint32(body) != 0 {
				return strings.Join(append(out, fmt.Sprintf("auth request %d", binary.BigEndian.Uint32(body))), "; ")
			}
		case 'Z':
			fe := pgproto3.NewFrontend(r, conn)
			fe.Send(&pgproto3.Query{String: "select 1"})
			if err := fe.Flush(); err != nil {
				t.Fatal(err)
			}
			got := ""
			for {
				m, err := fe.Receive()
				if err != nil {
					return strings.Join(append(out, "query: "+err.Error()), "; ")
				}
				switch m := m.(type) {
				case *pgproto3.DataRow:
					got = string(m.Values[0])
				case *pgproto3.ReadyForQuery:
					return strings.Join(append(out, "ready, select 1 = "+got), "; ")
				}
			}
		}
	}
}

// TestProtocolNegotiation: raw start-up packets asking for protocol 3.1,
// 3.2 and 3.99 or carrying unknown "_pq_." options get the same answer
// from the proxy as from PostgreSQL 15 (NegotiateProtocolVersion 3.0 with
// the options in the client's order, then a login at 3.0 that runs a
// query); major versions 2 and 4 and a parameter list without its
// terminator are refused with PostgreSQL's texts. PgBouncer 1.18's own
// answers are checked as what it does: it takes 3.1 and a list without its
// terminator silently and refuses 3.2 and "_pq_." options.
func TestProtocolNegotiation(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 60*time.Second)
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 4)})
	tp := startProxy(t, nil)
	login := []string{"user", "poolsim", "database", "poolsim"}
	noTerminator := rawStartup(protocol30, login...)
	noTerminator = noTerminator[:len(noTerminator)-1]
	binary.BigEndian.PutUint32(noTerminator, uint32(len(noTerminator)))
	const ready = "ready, select 1 = 1"
	for _, tc := range []struct {
		name    string
		packet  []byte
		want    string // PostgreSQL's answer, and the proxy's
		bouncer string // PgBouncer 1.18's
	}{
		{"3.1", rawStartup(3<<16|1, login...), "v 196608 []; " + ready, ready},
		{"3.2", rawStartup(protocol32, login...), "v 196608 []; " + ready, "FATAL 08P01 bad packet header: '0000002700030002'"},
		{"3.99", rawStartup(3<<16|99, login...), "v 196608 []; " + ready, "FATAL 08P01 bad packet header: '0000002700030063'"},
		{"3.0 with _pq_ options", rawStartup(protocol30, append(login, "_pq_.zeta", "1", "_pq_.alpha", "x")...),
			"v 196608 [_pq_.zeta _pq_.alpha]; " + ready, "FATAL 08P01 unsupported startup parameter: _pq_.zeta"},
		{"3.2 with a _pq_ option", rawStartup(protocol32, append(login, "_pq_.foo", "1")...),
			"v 196608 [_pq_.foo]; " + ready, "FATAL 08P01 bad packet header: '0000003200030002'"},
		{"2.0", rawStartup(2<<16, login...), `v2 "FATAL:  unsupported frontend protocol 2.0: server supports 3.0 to 3.0\n\x00"`,
			"FATAL 08P01 old V2 protocol not supported"},
		{"4.0", rawStartup(4<<16, login...), "FATAL 0A000 unsupported frontend protocol 4.0: server supports 3.0 to 3.0",
			"FATAL 08P01 bad packet header: '0000002700040000'"},
		{"no terminator", noTerminator, "FATAL 08P01 invalid startup packet layout: expected terminator as last byte", ready},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, tg := range []struct{ name, addr, want string }{
				{"postgres", fmt.Sprintf("127.0.0.1:%d", c.Port()), tc.want},
				{"proxy", tp.Addr().String(), tc.want},
				{"pgbouncer", fmt.Sprintf("127.0.0.1:%d", b.Port()), tc.bouncer},
			} {
				if got := startupReply(t, tg.addr, tc.packet); got != tg.want {
					t.Errorf("%s: %s, want %s", tg.name, got, tg.want)
				}
			}
		})
	}
}

// TestDecodeStartup: the start-up parameter list is read as PostgreSQL
// reads it.
func TestDecodeStartup(t *testing.T) {
	body := func(s string) []byte { return append([]byte{0, 3, 0, 0}, s...) }
	for _, tc := range []struct {
		in   string
		want map[string]string
		opts []string
		bad  bool
	}{
		{"user\x00u\x00\x00", map[string]string{"user": "u"}, nil, false},
		{"\x00", map[string]string{}, nil, false},
		{"user\x00a\x00user\x00b\x00\x00", map[string]string{"user": "b"}, nil, false},
		{"_pq_.b\x001\x00_pq_.a\x002\x00_pq_.b\x003\x00\x00", map[string]string{"_pq_.b": "3", "_pq_.a": "2"}, []string{"_pq_.b", "_pq_.a"}, false},
		{"", nil, nil, true},
		{"user\x00u\x00", nil, nil, true},
		{"user\x00u", nil, nil, true},
		{"user\x00", nil, nil, true},
		{"user\x00u\x00\x00x", nil, nil, true},
		{"user\x00u\x00\x00\x00", nil, nil, true},
	} {
		params, opts, bad := decodeStartup(body(tc.in))
		if (bad != "") != tc.bad || !tc.bad && (!equalMaps(params, tc.want) || !slices.Equal(opts, tc.opts)) {
			t.Errorf("%q: %v %v %q, want %v %v bad=%v", tc.in, params, opts, bad, tc.want, tc.opts, tc.bad)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
