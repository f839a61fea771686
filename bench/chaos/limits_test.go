//go:build linux

package chaos

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// TestFDExhaustion: the pooler runs under `ulimit -n 256` and gets 300 idle
// connections (TCP only, no start-up packet). It must stay up, and serve a
// client once they are gone. The proxy also keeps descriptors for its
// console: SHOW POOLS answers during the flood.
func TestFDExhaustion(t *testing.T) {
	const limit, flood = 256, 300
	eachTarget(t, settings{nofile: limit, maxClientConn: 1000}, func(t *testing.T, tg *target) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := 0; i < flood; i++ {
			c, err := net.DialTimeout("tcp", tg.addr(), 5*time.Second)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
		}
		time.Sleep(time.Second) // let the pooler accept what it can
		if !tg.alive() {
			t.Fatalf("%s died under the flood:\n%s", tg.name, tail(tg.log(), 10))
		}
		console := "no"
		if tg.name == "proxy" {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			adm, err := pgconn.Connect(ctx, tg.adminDSN())
			if err == nil {
				err = sqlExec(ctx, adm, "SHOW POOLS")
				adm.Close(ctx)
			}
			cancel()
			if err != nil {
				t.Errorf("console during the flood: %v", err)
			} else {
				console = "yes"
			}
		}
		figs.add("descriptor exhaustion (ulimit -n 256, 300 idle connections)", "alive / console answers during the flood", tg.name, "yes / %s", console)
		figs.add("descriptor exhaustion (ulimit -n 256, 300 idle connections)", "pooler descriptors during the flood", tg.name, "%d", fds(tg.pid))
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		start := time.Now()
		var err error
		for time.Since(start) < 30*time.Second {
			if _, err = loginError(tg.dsn()); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("no client served after the flood: %v\n%s", err, tail(tg.log(), 10))
		}
		figs.add("descriptor exhaustion (ulimit -n 256, 300 idle connections)", "first client served after the flood ended", tg.name, "%v", time.Since(start).Round(10*time.Millisecond))
		if !tg.alive() {
			t.Fatalf("%s died:\n%s", tg.name, tail(tg.log(), 15))
		}
	})
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// bomb opens a connection, logs in (as user on db) and sends a message
// header of type typ claiming 1 GiB, then follows with trickle bytes; it
// returns the connection (the caller closes it).
func bomb(addr, user, db string, typ byte, trickle int) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	b, _ := (&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersion30,
		Parameters: map[string]string{"user": user, "database": db}}).Encode(nil)
	h := []byte{typ, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(h[1:], 1<<30)
	b = append(b, h...)
	b = append(b, make([]byte, trickle)...)
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write(b)
	return c, nil
}

// TestLengthBombs: under a 3 GiB address-space limit, 8 console
// connections and 8 logged-in clients send headers claiming 1 GiB (the
// clients then 1 MB of it). The pooler must stay up with RSS under 200 MB
// and serve afterwards.
func TestLengthBombs(t *testing.T) {
	const as = 3 << 30
	eachTarget(t, settings{addressSpace: as, maxClientConn: 200}, func(t *testing.T, tg *target) {
		before := rss(tg.pid)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var c net.Conn
				var err error
				if i < 8 {
					c, err = bomb(tg.addr(), "postgres", "pgbouncer", 'Q', 0)
				} else {
					c, err = bomb(tg.addr(), "poolsim", "poolsim", 'Q', 1<<20)
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}()
		}
		wg.Wait()
		// What did the connections get? Read briefly.
		answered := 0
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			b, _ := io.ReadAll(io.LimitReader(c, 1<<16))
			if strings.Contains(string(b), "incomplete pkt") {
				answered++
			}
		}
		time.Sleep(time.Second)
		peak := max(rss(tg.pid), procStatus(tg.pid, "VmHWM")*1024)
		if !tg.alive() {
			t.Fatalf("%s died:\n%s", tg.name, tail(tg.log(), 10))
		}
		figs.add("length bombs (8 console + 8 client headers of 1 GiB, ulimit -v 3 GiB)", "alive / RSS before / peak RSS", tg.name, "yes / %s / %s", mb(before), mb(peak))
		figs.add("length bombs (8 console + 8 client headers of 1 GiB, ulimit -v 3 GiB)", "console bombs answered \"incomplete pkt\"", tg.name, "%d of 8", answered)
		if peak > 200<<20 {
			t.Errorf("peak RSS %s after the bombs, want under 200 MB", mb(peak))
		}
		if answered != 8 {
			t.Errorf("%d of 8 console bombs got \"incomplete pkt\"", answered)
		}
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		if _, err := loginError(tg.dsn()); err != nil {
			t.Errorf("client after the bombs: %v", err)
		}
	})
}

// TestSoak: clients run transactions for the soak's length (15 s; 10 min or
// POOLSIM_CHAOS_SOAK in the full run) while the pooler's RSS, descriptors,
// threads and (proxy) goroutines are sampled. Nothing may fail and none of
// them may grow without bound.
func TestSoak(t *testing.T) {
	dur := pick(15*time.Second, 10*time.Minute)
	if d, err := time.ParseDuration(os.Getenv("POOLSIM_CHAOS_SOAK")); err == nil && full {
		dur = d
	}
	every := pick(time.Second, 5*time.Second)
	eachTarget(t, settings{poolSize: 8}, func(t *testing.T, tg *target) {
		l := newLedger(t, "soak_"+tg.name)
		ctx, cancel := context.WithTimeout(context.Background(), dur)
		defer cancel()
		done := make(chan struct{})
		go func() { l.run(ctx, tg.dsn(), 16); close(done) }()
		type sample struct {
			rss             int64
			fds, thr, gorou int
		}
		var samples []sample
		for {
			sleep(ctx, every)
			if ctx.Err() != nil {
				break // not while the clients are being stopped
			}
			samples = append(samples, sample{rss(tg.pid), fds(tg.pid), int(procStatus(tg.pid, "Threads")), tg.goroutines()})
		}
		<-done
		acked, missing := l.check(t)
		if len(samples) < 3 {
			t.Fatalf("%d samples", len(samples))
		}
		first, last := samples[1], samples[len(samples)-1] // the first is taken while clients connect
		lo, hi := first, first
		for _, s := range samples[1:] {
			lo.rss, hi.rss = min(lo.rss, s.rss), max(hi.rss, s.rss)
			lo.fds, hi.fds = min(lo.fds, s.fds), max(hi.fds, s.fds)
			lo.thr, hi.thr = min(lo.thr, s.thr), max(hi.thr, s.thr)
			lo.gorou, hi.gorou = min(lo.gorou, s.gorou), max(hi.gorou, s.gorou)
		}
		sc := "soak (" + dur.String() + ", 16 clients, pool 8)"
		figs.add(sc, "transactions / failed / acknowledged commits missing", tg.name, "%d / %d / %d", acked, l.failed.Load(), missing)
		figs.add(sc, "RSS first / min / max / last", tg.name, "%s / %s / %s / %s", mb(first.rss), mb(lo.rss), mb(hi.rss), mb(last.rss))
		figs.add(sc, "descriptors min-max / threads min-max", tg.name, "%d-%d / %d-%d", lo.fds, hi.fds, lo.thr, hi.thr)
		if tg.name == "proxy" {
			figs.add(sc, "goroutines min-max", tg.name, "%d-%d", lo.gorou, hi.gorou)
		}
		if n := l.failed.Load(); n != 0 || missing != 0 {
			t.Errorf("%d failed transactions, %d acknowledged commits missing; want 0 and 0", n, missing)
		}
		if last.rss > first.rss*3/2+16<<20 {
			t.Errorf("RSS grew from %s to %s", mb(first.rss), mb(last.rss))
		}
		if hi.fds > lo.fds+8 {
			t.Errorf("descriptors ranged %d-%d: want them steady", lo.fds, hi.fds)
		}
		if tg.name == "proxy" && (lo.gorou < 0 || hi.gorou > lo.gorou+8) {
			t.Errorf("goroutines ranged %d-%d: want them steady", lo.gorou, hi.gorou)
		}
	})
}
