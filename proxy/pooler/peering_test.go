//go:build linux

package pooler

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/lab/pgcluster/pgclustertest"
	"github.com/poolsim/poolsim/models/poolconf"
)

// Peering is PgBouncer 1.19's; PgBouncer 1.18, the one these tests run
// beside elsewhere, has none (it refuses a [peers] section), so these
// tests are the proxy's only.

// peerSocketPort names the Unix sockets of the peering tests (each proxy
// has a folder of its own).
var peerSocketPort = 40000 + os.Getpid()%20000

// peerDir is a fresh folder for a Unix socket that every account can
// reach.
func peerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// peerAt is a [peers] entry for the proxy whose Unix socket is in dir.
func peerAt(id int, dir string) poolconf.Peer {
	return poolconf.Peer{ID: id, Host: dir, Port: peerSocketPort, PoolSize: poolconf.Unset}
}

// startPeer starts a proxy with peer_id id, its Unix socket in dir, on
// TCP address listen with so_reuseport ("127.0.0.1:0" for a port of its
// own), and the [peers] given.
func startPeer(t *testing.T, id int, dir, listen string, peers []poolconf.Peer, edit func(*Config)) *testProxy {
	t.Helper()
	return startProxy(t, func(c *Config) {
		c.Listen, c.SOReuseport = listen, true
		c.UnixSocketDir, c.ListenPort = dir, peerSocketPort
		c.PeerID, c.Peers = id, peers
		if edit != nil {
			edit(c)
		}
	})
}

// sendCancelKey sends a CancelRequest with the key pid/secret to addr
// (network tcp or unix) and returns the connection, which the proxy
// closes once it has dealt with the request.
func sendCancelKey(t *testing.T, network, addr string, pid, secret uint32) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	b, _ := (&pgproto3.CancelRequest{ProcessID: pid, SecretKey: binary.BigEndian.AppendUint32(nil, secret)}).Encode(nil)
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	return conn
}

// waitEOF waits until the proxy closes conn (EOF), within d.
func waitEOF(t *testing.T, conn net.Conn, d time.Duration) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(d))
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("cancel connection: read %d bytes, %v; want the proxy to close it", n, err)
	}
}

// peerConsoleDSN is the console of the proxy whose Unix socket is in dir.
func peerConsoleDSN(dir string) string {
	return fmt.Sprintf("host=%s port=%d user=poolsim password=poolsim dbname=pgbouncer sslmode=disable", dir, peerSocketPort)
}

// keyFor is a cancel key naming peer id with time-to-live ttl.
func keyFor(id int, ttl uint32) (pid, secret uint32) {
	return uint32(id&0xff)<<24 | uint32(id>>8&0xff)<<16 | 0x1234, 0xabcd00 | ttl
}

// peerPoolRow is SHOW PEER_POOLS' row for peer id (nil: none).
func peerPoolRow(ctx context.Context, t *testing.T, c *console, id int) []string {
	r := c.run(ctx, t, "SHOW PEER_POOLS")
	i := r.find("peer_id", strconv.Itoa(id))
	if i < 0 {
		return nil
	}
	var out []string
	for _, col := range []string{"cl_active_cancel_req", "cl_waiting_cancel_req", "sv_active_cancel", "sv_login"} {
		out = append(out, r.cell(i, col))
	}
	return out
}

// TestPeeringCancelAcrossReuseport: two proxies listen on one TCP port
// with so_reuseport, each with a peer_id and [peers] naming both Unix
// sockets (its own entry too, which is ignored, as in PgBouncer 1.19). A
// long query is cancelled by a cancel request on a new connection, which
// the kernel hands to either process: each cancel ends its query with
// query_canceled, until each process has forwarded at least one cancel to
// the other (SHOW PEER_POOLS lists a peer only once a request went to
// it).
func TestPeeringCancelAcrossReuseport(t *testing.T) {
	ctx := testCtx(t, 120*time.Second)
	dir1, dir2 := peerDir(t), peerDir(t)
	peers := []poolconf.Peer{peerAt(1, dir1), peerAt(2, dir2)}
	p1 := startPeer(t, 1, dir1, "127.0.0.1:0", peers, nil)
	startPeer(t, 2, dir2, p1.Addr().String(), peers, nil) // on the same port
	// Each console over its proxy's own Unix socket: the TCP port is either.
	admin := map[int]*console{1: openConsole(ctx, t, peerConsoleDSN(dir1)), 2: openConsole(ctx, t, peerConsoleDSN(dir2))}
	watch, err := pgconn.Connect(ctx, pgclustertest.Need(t, cluster).UserDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.Background())

	forwarded := func() bool {
		return peerPoolRow(ctx, t, admin[1], 2) != nil && peerPoolRow(ctx, t, admin[2], 1) != nil
	}
	ids := map[int]int{}
	rounds := 0
	for ; rounds < 60 && !forwarded(); rounds++ {
		conn, err := pgconn.Connect(ctx, p1.dsn) // either process: so_reuseport
		if err != nil {
			t.Fatal(err)
		}
		id := keyPeerID(conn.PID())
		ids[id]++
		if sk := conn.SecretKey(); len(sk) != 4 || sk[3]&cancelTTLMask != cancelTTLMask || (id != 1 && id != 2) {
			t.Fatalf("cancel key pid %#x secret %x: want peer id 1 or 2 in its first bytes and a full TTL", conn.PID(), sk)
		}
		tag := fmt.Sprintf("peering_round_%d", rounds)
		done := make(chan error, 1)
		go func() {
			_, err := conn.Exec(ctx, "select pg_sleep(30) as "+tag).ReadAll()
			done <- err
		}()
		running := waitFor(ctx, func() bool {
			rs, err := watch.Exec(ctx, "select 1 from pg_stat_activity where state = 'active' and query like '%"+tag+"'").ReadAll()
			return err == nil && len(rs) == 1 && len(rs[0].Rows) == 1
		})
		if !running {
			t.Fatalf("round %d: the query never showed in pg_stat_activity", rounds)
		}
		if err := conn.CancelRequest(ctx); err != nil { // a new connection to the shared port
			t.Fatalf("round %d: cancel request: %v", rounds, err)
		}
		err = <-done
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "57014" {
			t.Fatalf("round %d (client of peer %d): err = %v, want query_canceled (57014)", rounds, id, err)
		}
		_ = conn.Close(ctx)
	}
	if !forwarded() {
		t.Fatalf("after %d rounds (clients per peer %v) no cancel was forwarded both ways: so_reuseport never sent one to the other process", rounds, ids)
	}
	t.Logf("%d rounds, clients per peer %v", rounds, ids)
	// Every forwarded request has ended: the peers' pools are empty.
	for id, other := range map[int]int{1: 2, 2: 1} {
		var row []string
		if !waitFor(ctx, func() bool {
			row = peerPoolRow(ctx, t, admin[id], other)
			return strings.Join(row, " ") == "0 0 0 0"
		}) {
			t.Errorf("peer %d: SHOW PEER_POOLS for %d = %v, want 0 0 0 0 once every cancel has ended", id, other, row)
		}
	}
}

// fakePeer listens on a Unix socket as a peer would and records the
// cancel requests forwarded to it; each connection stays open until the
// test releases it, as a peer keeps it until the cancel has been passed
// on.
type fakePeer struct {
	ln    net.Listener
	conns chan net.Conn
	reqs  chan [2]uint32 // pid, secret
}

func startFakePeer(t *testing.T, dir string) *fakePeer {
	t.Helper()
	ln, err := net.Listen("unix", UnixSocketPath(dir, peerSocketPort))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakePeer{ln: ln, conns: make(chan net.Conn, 8), reqs: make(chan [2]uint32, 8)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var b [16]byte
			if _, err := io.ReadFull(c, b[:]); err == nil && binary.BigEndian.Uint32(b[4:]) == codeCancelRequest {
				f.reqs <- [2]uint32{binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])}
			}
			f.conns <- c
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		close(f.conns)
		for c := range f.conns {
			_ = c.Close()
		}
	})
	return f
}

// next is the next request the peer received.
func (f *fakePeer) next(t *testing.T) [2]uint32 {
	t.Helper()
	select {
	case r := <-f.reqs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no cancel request reached the peer")
		return [2]uint32{}
	}
}

// TestPeeringForwardsKeyAndPoolSize: a cancel request whose key names
// another peer reaches that peer's Unix socket with the same key, its TTL
// one less (PgBouncer 1.19's forwarding); with pool_size 1 a second
// request waits until the first one's connection has closed, and SHOW
// PEER_POOLS counts both; each request's connection closes once the peer
// has closed its own.
func TestPeeringForwardsKeyAndPoolSize(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	dir, fakeDir := peerDir(t), peerDir(t)
	fake := startFakePeer(t, fakeDir)
	peer2 := peerAt(2, fakeDir)
	peer2.PoolSize = 1
	tp := startPeer(t, 1, dir, "127.0.0.1:0", []poolconf.Peer{peer2}, nil)
	admin := openConsole(ctx, t, tp.adminDSN())
	addr := tp.Addr().String()

	pid, secret := keyFor(2, 3)
	first := sendCancelKey(t, "tcp", addr, pid, secret)
	if got := fake.next(t); got != [2]uint32{pid, secret - 1} {
		t.Fatalf("forwarded key %#x/%#x, want %#x/%#x (the TTL one less)", got[0], got[1], pid, secret-1)
	}
	second := sendCancelKey(t, "tcp", addr, pid, secret-1) // TTL 2, as from another hop
	var row []string
	if !waitFor(ctx, func() bool {
		row = peerPoolRow(ctx, t, admin, 2)
		return strings.Join(row, " ") == "1 1 1 0"
	}) {
		t.Fatalf("SHOW PEER_POOLS for peer 2 = %v, want 1 active, 1 waiting (pool_size 1), 1 server active, 0 in login", row)
	}
	select {
	case r := <-fake.reqs:
		t.Fatalf("a second request %x reached the peer beyond pool_size 1", r)
	default:
	}
	_ = (<-fake.conns).Close() // the peer has passed the first cancel on
	waitEOF(t, first, 10*time.Second)
	if got := fake.next(t); got != [2]uint32{pid, secret - 2} {
		t.Fatalf("second forwarded key %#x/%#x, want %#x/%#x", got[0], got[1], pid, secret-2)
	}
	_ = (<-fake.conns).Close()
	waitEOF(t, second, 10*time.Second)
	if !waitFor(ctx, func() bool {
		row = peerPoolRow(ctx, t, admin, 2)
		return strings.Join(row, " ") == "0 0 0 0"
	}) {
		t.Errorf("SHOW PEER_POOLS for peer 2 = %v after both ended, want 0 0 0 0", row)
	}
}

// TestPeeringDropsLostRequests: a cancel request for a peer [peers] does
// not name, or whose TTL is spent, is dropped with PgBouncer 1.19's
// reason; a request for a peer that two proxies each say is the other
// bounces between them three times at most and is dropped, not looped
// forever.
func TestPeeringDropsLostRequests(t *testing.T) {
	dir1, dir2 := peerDir(t), peerDir(t)
	var lg1, lg2 logLines
	lg1.t, lg2.t = t, t
	p1 := startPeer(t, 1, dir1, "127.0.0.1:0", []poolconf.Peer{peerAt(9, dir2)}, func(c *Config) { c.Logf = lg1.logf })
	startPeer(t, 2, dir2, "127.0.0.1:0", []poolconf.Peer{peerAt(9, dir1)}, func(c *Config) { c.Logf = lg2.logf })
	addr := p1.Addr().String()
	ctx := testCtx(t, 30*time.Second)
	// logged waits for a line with every part (PgBouncer's prefix of a
	// client that has not logged in, and the reason).
	logged := func(lg *logLines, parts ...string) bool {
		return waitFor(ctx, func() bool {
			for _, line := range strings.Split(lg.text(), "\n") {
				if !slices.ContainsFunc(parts, func(part string) bool { return !strings.Contains(line, part) }) {
					return true
				}
			}
			return false
		})
	}

	pid, secret := keyFor(7, 3)
	waitEOF(t, sendCancelKey(t, "tcp", addr, pid, secret), 10*time.Second)
	if !logged(&lg1, ": (nodb)/(nouser)@127.0.0.1:", " closing because: could not find peer to forward request to (age=0s)") {
		t.Errorf("a request for peer 7, not in [peers]: no 'could not find peer' line in the log:\n%s", lg1.text())
	}
	pid, secret = keyFor(9, 0)
	waitEOF(t, sendCancelKey(t, "tcp", addr, pid, secret), 10*time.Second)
	if !logged(&lg1, ": (nodb)/(nouser)@127.0.0.1:", " closing because: failed to forward cancel request because its TTL was exhausted (age=0s)") {
		t.Errorf("a request with TTL 0: no 'TTL was exhausted' line in the log:\n%s", lg1.text())
	}

	// 1 -> 2 (TTL 2) -> 1 (TTL 1) -> 2 (TTL 0): dropped by 2.
	pid, secret = keyFor(9, 3)
	waitEOF(t, sendCancelKey(t, "tcp", addr, pid, secret), 20*time.Second)
	if !logged(&lg2, ": (nodb)/(nouser)@unix(", " closing because: failed to forward cancel request because its TTL was exhausted") {
		t.Errorf("a request bouncing between two peers was not dropped by the second one:\n%s", lg2.text())
	}
	if n := strings.Count(lg1.text(), "TTL was exhausted"); n != 1 {
		t.Errorf("proxy 1 dropped %d requests for their TTL, want 1 (the TTL 0 one):\n%s", n, lg1.text())
	}
}

// TestPeeringConsole: SHOW PEERS lists [peers] with PgBouncer 1.19's
// columns and types (pool_size as in force: default_pool_size when not
// given); RELOAD reads [peers] and peer_id again (here from pgbouncer.ini
// text through FromSettings); SHOW CONFIG shows peer_id, SET changes it
// for the next clients' keys within 1.19's bound; SHOW STATE follows
// PAUSE and RESUME. The keys without peering keep a positive process id
// and no layout.
func TestPeeringConsole(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	ini := "[pgbouncer]\npeer_id = 1\n[peers]\n2 = host=/tmp/peer2 port=6000\n1 = host=localhost pool_size=3\n"
	var tp *testProxy
	tp = startProxy(t, func(c *Config) {
		c.Source = func() (Config, error) {
			s, err := poolconf.Parse("peers.ini", []byte(ini))
			if err != nil {
				return Config{}, err
			}
			from, _ := FromSettings(s)
			next := *tp.conf()
			next.PeerID, next.Peers = from.PeerID, from.Peers
			return next, nil
		}
	})
	admin := openConsole(ctx, t, tp.adminDSN())

	if r := admin.run(ctx, t, "SHOW PEERS"); r.err != nil || len(r.rows) != 0 {
		t.Fatalf("SHOW PEERS without peers: %v, %d rows; want none", r, len(r.rows))
	}
	if r := admin.run(ctx, t, "RELOAD"); r.err != nil {
		t.Fatal(r.err)
	}
	r := admin.run(ctx, t, "SHOW PEERS")
	if want := []string{"peer_id:23", "host:25", "port:23", "pool_size:23"}; strings.Join(r.cols, " ") != strings.Join(want, " ") {
		t.Errorf("SHOW PEERS columns %v, want PgBouncer 1.19's %v", r.cols, want)
	}
	var rows []string
	for i := range r.rows {
		rows = append(rows, strings.Join([]string{r.cell(i, "peer_id"), r.cell(i, "host"), r.cell(i, "port"), r.cell(i, "pool_size")}, " "))
	}
	if got, want := strings.Join(rows, "; "), "1 localhost 6432 3; 2 /tmp/peer2 6000 20"; got != want {
		t.Errorf("SHOW PEERS after RELOAD = %q, want %q", got, want)
	}
	if v := showConfigValue(ctx, t, admin, "peer_id"); v != "1" {
		t.Errorf("SHOW CONFIG peer_id = %q after RELOAD, want 1", v)
	}
	conn := connect(ctx, t, tp.dsn)
	if id := keyPeerID(conn.PgConn().PID()); id != 1 {
		t.Errorf("a client's key carries peer id %d, want 1", id)
	}

	if r := admin.run(ctx, t, "SET peer_id = 16384"); r.err == nil || r.err.Message != "SET failed" {
		t.Errorf("SET peer_id = 16384: %v, want SET failed (1.19 allows at most 16383)", r)
	}
	if r := admin.run(ctx, t, "SET peer_id = 300"); r.err != nil {
		t.Fatal(r.err)
	}
	conn = connect(ctx, t, tp.dsn)
	if id, sk := keyPeerID(conn.PgConn().PID()), conn.PgConn().SecretKey(); id != 300 || sk[3]&cancelTTLMask != cancelTTLMask {
		t.Errorf("after SET peer_id = 300 a client's key carries peer id %d, secret %x; want 300 and a full TTL", id, sk)
	}
	if r := admin.run(ctx, t, "SET peer_id = 0"); r.err != nil {
		t.Fatal(r.err)
	}
	for range 20 {
		if pid := connect(ctx, t, tp.dsn).PgConn().PID(); pid>>31 != 0 {
			t.Fatalf("without peering a client's process id %#x is negative", pid)
		}
	}

	state := func() string {
		r := admin.run(ctx, t, "SHOW STATE")
		var kv []string
		for i := range r.rows {
			kv = append(kv, r.cell(i, "key")+"="+r.cell(i, "value"))
		}
		return strings.Join(kv, " ")
	}
	if s := state(); s != "active=yes paused=no suspended=no" {
		t.Errorf("SHOW STATE = %q", s)
	}
	admin.run(ctx, t, "PAUSE")
	if s := state(); s != "active=no paused=yes suspended=no" {
		t.Errorf("SHOW STATE after PAUSE = %q", s)
	}
	admin.run(ctx, t, "RESUME")
	admin.run(ctx, t, "SUSPEND")
	if s := state(); s != "active=no paused=no suspended=yes" {
		t.Errorf("SHOW STATE after SUSPEND = %q", s)
	}
	admin.run(ctx, t, "RESUME")
}

// TestPeeringReloadDropsPeer: a reload whose [peers] no longer names a
// peer logs PgBouncer 1.19's "dropping peer N as it does not exist
// anymore" and ends the requests in flight to it ("peer removed") at once,
// not at the cancel's time limit.
func TestPeeringReloadDropsPeer(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	dir, fakeDir := peerDir(t), peerDir(t)
	fake := startFakePeer(t, fakeDir)
	var lg logLines
	lg.t = t
	tp := startPeer(t, 1, dir, "127.0.0.1:0", []poolconf.Peer{peerAt(2, fakeDir), peerAt(3, fakeDir)}, func(c *Config) { c.Logf = lg.logf })

	pid, secret := keyFor(2, 3)
	conn := sendCancelKey(t, "tcp", tp.Addr().String(), pid, secret)
	fake.next(t) // in flight: the fake peer keeps its connection open
	next := *tp.conf()
	next.Peers = []poolconf.Peer{peerAt(3, fakeDir)}
	if _, _, err := tp.Reload(next); err != nil {
		t.Fatal(err)
	}
	waitEOF(t, conn, cancelTimeout/2)
	text := func() string { return lg.text() }
	if !waitFor(ctx, func() bool { return strings.Contains(text(), " closing because: peer removed (age=0s)") }) {
		t.Errorf("no 'closing because: peer removed' line:\n%s", text())
	}
	if !strings.Contains(text(), "WARNING: dropping peer 2 as it does not exist anymore") || strings.Contains(text(), "dropping peer 3") {
		t.Errorf("want peer 2 (only) logged as dropped:\n%s", text())
	}
	admin := openConsole(ctx, t, tp.adminDSN())
	if row := peerPoolRow(ctx, t, admin, 2); row != nil {
		t.Errorf("SHOW PEER_POOLS still lists the removed peer 2: %v", row)
	}
}
