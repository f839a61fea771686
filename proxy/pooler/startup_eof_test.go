package pooler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/poolsim/poolsim/lab/pgbouncer"
	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolmode"
)

// startupMutation is one start-up exchange a client sends before it
// half-closes its connection.
type startupMutation struct {
	name string
	data []byte
}

// startupMutations are variations of a valid StartupMessage and of the
// other start-up packets: every truncation, every byte flipped, lengths
// short, long, zero and huge, other protocol codes, missing terminators,
// long parameter lists, requests pipelined or repeated.
func startupMutations() []startupMutation {
	login := []string{"user", "poolsim", "database", "poolsim", "application_name", "mut"}
	base := rawStartup(protocol30, login...)
	withLen := func(b []byte, n uint32) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint32(b, n)
		return b
	}
	withCode := func(b []byte, code uint32) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint32(b[4:], code)
		return b
	}
	special := func(code uint32, extra ...byte) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+len(extra)))
		b = binary.BigEndian.AppendUint32(b, code)
		return append(b, extra...)
	}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	var ms []startupMutation
	add := func(name string, b []byte) { ms = append(ms, startupMutation{name, b}) }
	add("valid", base)
	for i := range len(base) {
		add(fmt.Sprintf("cut at %d", i), base[:i])
	}
	for i := range len(base) {
		b := append([]byte(nil), base...)
		b[i] ^= 0xff
		add(fmt.Sprintf("byte %d flipped", i), b)
	}
	for _, n := range []uint32{0, 1, 3, 4, 7, 8, 9, uint32(len(base)) - 1, uint32(len(base)) + 1, uint32(len(base)) + 100,
		maxStartupLen, maxStartupLen + 1, 1 << 20, 0x7fffffff, 0x80000000, 0xffffffff} {
		add(fmt.Sprintf("length %d", n), withLen(base, n))
	}
	for _, code := range []uint32{0, 1 << 16, 2 << 16, 3<<16 | 1, protocol32, 3<<16 | 0xffff, 4 << 16, 0xffffffff,
		codeCancelRequest, codeSSLRequest, codeGSSENCRequest, 1234<<16 | 5681} {
		add(fmt.Sprintf("code %d.%d", code>>16, code&0xffff), withCode(base, code))
	}
	add("no terminator", withLen(base[:len(base)-1], uint32(len(base)-1)))
	add("no value terminator", withLen(base[:len(base)-2], uint32(len(base)-2)))
	add("only terminator", rawStartup(protocol30))
	add("no user", rawStartup(protocol30, "database", "poolsim"))
	add("empty user", rawStartup(protocol30, "user", "", "database", "poolsim"))
	add("unknown database", rawStartup(protocol30, "user", "poolsim", "database", "mut_nosuchdb"))
	add("replication", rawStartup(protocol30, append(login, "replication", "true")...))
	add("bad setting", rawStartup(protocol30, append(login, "options", "-c no_such_setting=1")...))
	add("bad options switch", rawStartup(protocol30, append(login, "options", "-x")...))
	add("setting to check", rawStartup(protocol30, append(login, "options", "-c work_mem=8MB")...))
	var many, huge []string
	for i := range 400 {
		many = append(many, fmt.Sprintf("mut.p%d", i), "1")
	}
	for i := range 2000 {
		huge = append(huge, fmt.Sprintf("mut.p%d", i), "1")
	}
	add("400 parameters", rawStartup(protocol30, append(login, many...)...))
	add("2000 parameters", rawStartup(protocol30, append(login, huge...)...))
	add("long value", rawStartup(protocol30, append(login, "mut.long", strings.Repeat("x", 9000))...))
	add("ssl request", special(codeSSLRequest))
	add("gss request", special(codeGSSENCRequest))
	add("ssl request, 9 bytes", special(codeSSLRequest, 0))
	add("ssl request then startup", cat(special(codeSSLRequest), base))
	add("ssl request twice", cat(special(codeSSLRequest), special(codeSSLRequest)))
	add("gss then ssl then gss", cat(special(codeGSSENCRequest), special(codeSSLRequest), special(codeGSSENCRequest)))
	add("ssl request, cut", special(codeSSLRequest)[:6])
	add("cancel request", special(codeCancelRequest, 0, 0, 0, 1, 0, 0, 0, 2))
	add("cancel request, short", special(codeCancelRequest, 0, 0, 0, 1))
	add("cancel request, long", special(codeCancelRequest, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3))
	add("cancel request, cut", special(codeCancelRequest, 0, 0, 0, 1, 0, 0, 0, 2)[:12])
	add("startup twice", cat(base, base))
	add("startup then garbage", cat(base, []byte("garbage that is no message")))
	add("startup then terminate", cat(base, []byte{'X', 0, 0, 0, 4}))
	add("startup then long message header", cat(base, []byte{'Q', 0x7f, 0xff, 0xff, 0xff}))
	add("startup then query cut", cat(base, []byte{'Q', 0, 0, 0, 20, 's', 'e'}))
	add("startup then password", cat(base, []byte{'p', 0, 0, 0, 5, 0}))
	return ms
}

// eofClose sends m to addr, half-closes the connection and reports how
// long after the half-close the peer closed it (read returned EOF or a
// reset), or an error when it had not within limit.
func eofClose(addr string, m startupMutation, limit time.Duration) (time.Duration, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	tc := conn.(*net.TCPConn)
	_ = tc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := tc.Write(m.data); err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		return 0, fmt.Errorf("write: %w", err)
	}
	if err := tc.CloseWrite(); err != nil && !errors.Is(err, syscall.ENOTCONN) {
		return 0, fmt.Errorf("half-close: %w", err)
	}
	eof := time.Now()
	_ = tc.SetReadDeadline(eof.Add(limit))
	_, err = io.Copy(io.Discard, tc) // returns at EOF (nil), a reset or the deadline
	took := time.Since(eof)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return took, fmt.Errorf("still open %v after the client's EOF", limit)
	}
	return took, nil
}

// TestStartupMutationsCloseOnEOF: for every start-up mutation, sent twice
// (the second time, the pools of the mutated user and database names, whose
// server logins failed, wait out server_login_retry), a client that
// half-closes its connection after sending it is closed by the proxy
// within a second, with auth_type trust and md5 (client_login_timeout, the
// only other end, is a minute); a login that was waiting for its pool's
// first server logs "closing because: client unexpected eof". The same
// mutations run against PgBouncer 1.18, whose stragglers are logged as
// what it does (it holds clients waiting for a database whose server login
// failed).
func TestStartupMutationsCloseOnEOF(t *testing.T) {
	c := pgclustertest.Need(t, cluster)
	ctx := testCtx(t, 120*time.Second)
	path := filepath.Join(t.TempDir(), "userlist.txt")
	if err := os.WriteFile(path, []byte(`"poolsim" "poolsim"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := needBouncer(ctx, t, pgbouncer.Config{UpstreamPort: c.Port(), Pooling: pgbouncer.Pool(poolmode.Transaction, 4)})
	ms := startupMutations()
	hostOf := func(tg authTarget) string {
		u, err := url.Parse(tg.dsn("poolsim", "x", "x"))
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}
	trust := proxyTarget(t, AuthTrust, "", nil, nil)
	for _, tg := range []struct {
		name   string
		addr   string
		assert bool
	}{
		{"proxy trust", hostOf(trust), true},
		{"proxy md5", hostOf(proxyTarget(t, AuthMD5, path, nil, nil)), true},
		{"pgbouncer", fmt.Sprintf("127.0.0.1:%d", b.Port()), false},
	} {
		var slow []string
		var worst time.Duration
		for _, m := range append(ms, ms...) {
			took, err := eofClose(tg.addr, m, time.Second)
			worst = max(worst, took)
			if err != nil {
				slow = append(slow, m.name+": "+err.Error())
			}
		}
		t.Logf("%s: %d mutations sent twice, slowest close %v after EOF, %d not closed within 1s", tg.name, len(ms), worst.Round(time.Millisecond), len(slow))
		for _, s := range slow {
			if tg.assert {
				t.Errorf("%s: %s", tg.name, s)
			} else {
				t.Logf("%s: %s", tg.name, s)
			}
		}
	}
	if !strings.Contains(trust.log(), "closing because: "+reasonClientEOF+" (age=") {
		t.Errorf("proxy trust: no %q in the log", "closing because: "+reasonClientEOF)
	}
}
