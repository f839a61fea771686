//go:build linux

package chaos

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// idleRound is one round of n idle clients on a target: its RSS before
// the logins (settled), right after the last one, and settled again.
type idleRound struct {
	n                      int
	before, right, settled int64
	loginTime              time.Duration
	loginCPU               time.Duration // the pooler's CPU time (user and system) during the logins
}

func (r idleRound) perRight() float64   { return float64(r.right-r.before) / float64(r.n) }
func (r idleRound) perSettled() float64 { return float64(r.settled-r.before) / float64(r.n) }

// cpuTime is the process's CPU time so far, user and system (from
// /proc/pid/stat, in clock ticks of 10 ms); -1 when it cannot be read.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:]) // from field 3 (state): utime is field 14, stime 15
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+k) * 10 * time.Millisecond
}

// loginIdle logs n clients in on tg and returns their connections.
func loginIdle(t *testing.T, tg *target, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := loginRaw(tg.addr(), 20*time.Second)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			t.Fatalf("client %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	return conns
}

// heapDump saves the proxy's /proc smaps and status as stage under
// POOLSIM_CHAOS_SMAPS or POOLSIM_CHAOS_HEAP, when either names a folder
// (which mappings grew: the heap's arena, the runtime's own, the binary's
// pages); under POOLSIM_CHAOS_HEAP also its heap profile (with the
// runtime's memory statistics): where an idle client's bytes go. Serving a
// profile allocates and touches code in the proxy, so the RSS measured
// after a stage that saved one is not that of an undisturbed process;
// POOLSIM_CHAOS_SMAPS asks nothing of it.
func heapDump(t *testing.T, tg *target, stage string) {
	dir, profile := os.Getenv("POOLSIM_CHAOS_HEAP"), true
	if dir == "" {
		dir, profile = os.Getenv("POOLSIM_CHAOS_SMAPS"), false
	}
	if dir == "" || tg.pprof == "" {
		return
	}
	for _, f := range []string{"status", "smaps"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", tg.pid, f))
		_ = os.WriteFile(filepath.Join(dir, stage+"."+f), b, 0o644)
	}
	if !profile {
		return
	}
	cl := http.Client{Timeout: 10 * time.Second}
	for _, p := range []struct{ url, file string }{
		{"/debug/pprof/heap?debug=1", stage + ".txt"},
		{"/debug/pprof/heap", stage + ".pb.gz"},
	} {
		resp, err := cl.Get("http://" + tg.pprof + p.url)
		if err != nil {
			t.Logf("heap profile %s: %v", stage, err)
			return
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, p.file), b, 0o644)
		}
		if err != nil {
			t.Logf("heap profile %s: %v", stage, err)
		}
	}
}

// idleClientsRound measures one round of n idle clients on tg. With
// settle (the full run) the RSS before and after is taken once it has
// settled; without, as it is (settled is then the RSS right after).
func idleClientsRound(t *testing.T, tg *target, n int, stage string, settle bool) (idleRound, []net.Conn) {
	t.Helper()
	r := idleRound{n: n}
	r.before = rss(tg.pid)
	if settle {
		r.before = settledRSS(tg.pid, 60*time.Second)
	}
	heapDump(t, tg, stage+"-before")
	start, cpu := time.Now(), cpuTime(tg.pid)
	conns := loginIdle(t, tg, n)
	r.loginTime, r.loginCPU = time.Since(start), cpuTime(tg.pid)-cpu
	r.right = rss(tg.pid)
	heapDump(t, tg, stage+"-right")
	r.settled = r.right
	if settle {
		r.settled = settledRSS(tg.pid, 60*time.Second)
		heapDump(t, tg, stage+"-settled")
	}
	return r, conns
}

// TestIdleClients: N logged-in idle clients (3,000; 5,000 in the full run)
// on each pooler, each started fresh for the test; memory per client is the
// growth of the pooler's RSS divided by N, measured the same way for both
// in one run, twice: from the fresh process (its first N clients), and
// after a warm-up (with those N still logged in, N more). The fresh round
// counts what a process grows by once (PgBouncer's first slab pages; the
// Go runtime's first collections' metadata outside the heap - the sweep's
// span sets, mark bits - 0.6-1 MB, and 0.2-0.4 MB of the binary's tables
// they read, by /proc smaps under POOLSIM_CHAOS_SMAPS); the warm one is
// what one more idle client costs.
// The full run takes each round's RSS right after the last login and once
// it has settled (the settling takes most of its two minutes); the short
// one (CI, a few seconds per pooler) only right after.
//
// Bounds, against PgBouncer's figure of the same run: the proxy's idle
// client must cost no more than PgBouncer's after the warm-up (right after
// the logins as well as settled) and, in the full run, from the fresh
// process once settled; right after the fresh process's logins 1.15x,
// where the runtime's one-time growth is still resident with the last
// collections' garbage. Measured 2026-12-06 at 5,000 (GOGC 25, a client
// of 320 bytes, free memory given back past 256 KB): fresh 0.76-0.84 KB
// right after, 0.66-0.69 KB settled; warm 0.56-0.58 KB / 0.41-0.44 KB;
// PgBouncer 0.81-0.83 KB. The short run allows 1.25x after the warm-up and
// 2.5x from the fresh process, where the one-time growth is spread over
// 3,000 clients and nothing settles (1.07 KB against 0.75 KB on a quiet
// machine, 1.44x). Before
// the proxy's idle client shrank and its collector ran at GOGC 25 it
// measured 1.15-1.31 KB right after the warm round's logins, 1.4-1.6x;
// with a 384-byte client, 0.94-0.99 KB from the fresh process.
func TestIdleClients(t *testing.T) {
	n := 3000
	if full {
		n = 5000
	}
	type result struct {
		base        int64
		fresh, warm idleRound
	}
	res := map[string]*result{}
	eachTarget(t, settings{maxClientConn: 2*n + 100}, func(t *testing.T, tg *target) {
		r := &result{}
		res[tg.name] = r
		r.base = rss(tg.pid)
		var first, more []net.Conn
		defer func() {
			for _, c := range append(first, more...) {
				c.Close()
			}
		}()
		r.fresh, first = idleClientsRound(t, tg, n, "fresh", full)
		r.warm, more = idleClientsRound(t, tg, n, "warm", full)
		if !tg.alive() {
			t.Fatalf("%s died:\n%s", tg.name, tail(tg.log(), 15))
		}
		t.Logf("%s: base %s; fresh %s / %s / %s (logins %v, CPU %v); warm %s / %s / %s (logins %v, CPU %v)", tg.name, mb(r.base),
			mb(r.fresh.before), mb(r.fresh.right), mb(r.fresh.settled), r.fresh.loginTime, r.fresh.loginCPU,
			mb(r.warm.before), mb(r.warm.right), mb(r.warm.settled), r.warm.loginTime, r.warm.loginCPU)
		figs.add("idle clients", "idle clients per round", tg.name, "%d", n)
		figs.add("idle clients", "base RSS (started, no client)", tg.name, "%s", mb(r.base))
		figs.add("idle clients", "CPU time of the logins, fresh / after warm-up", tg.name, "%d ms / %d ms",
			r.fresh.loginCPU.Milliseconds(), r.warm.loginCPU.Milliseconds())
		for _, x := range []struct {
			name string
			r    idleRound
		}{{"fresh process", r.fresh}, {fmt.Sprintf("after warm-up (%d clients on)", n), r.warm}} {
			if !full {
				figs.add("idle clients", x.name+": RSS before / right after logins", tg.name, "%s / %s", mb(x.r.before), mb(x.r.right))
				figs.add("idle clients", x.name+": memory per idle client, right after logins", tg.name, "%.2f KB", x.r.perRight()/1024)
				continue
			}
			figs.add("idle clients", x.name+": RSS before / right after logins / settled", tg.name, "%s / %s / %s",
				mb(x.r.before), mb(x.r.right), mb(x.r.settled))
			figs.add("idle clients", x.name+": memory per idle client, right after logins / settled", tg.name,
				"%.2f KB / %.2f KB", x.r.perRight()/1024, x.r.perSettled()/1024)
		}
	})
	p, b := res["proxy"], res["pgbouncer"]
	if p == nil || b == nil {
		return
	}
	t.Logf("memory per idle client, proxy against PgBouncer: fresh %.0f B / %.0f B right after, %.0f B / %.0f B settled; warm %.0f B / %.0f B right after, %.0f B / %.0f B settled",
		p.fresh.perRight(), b.fresh.perRight(), p.fresh.perSettled(), b.fresh.perSettled(),
		p.warm.perRight(), b.warm.perRight(), p.warm.perSettled(), b.warm.perSettled())
	warmBound, freshRightBound, freshBound := 1.0, 1.15, 1.0
	if !full {
		// The fresh round's right-after figure holds the logins' garbage
		// until a collection runs; beside CI's race run the collector lags
		// (1394 B against 695 B once, 2.0x, with a 384-byte client): the
		// short run's fresh bound only catches a gross regression (3.2x
		// before the idle client shrank), the warm one is the real check.
		warmBound, freshRightBound, freshBound = 1.25, 2.5, 2.5
	}
	for _, c := range []struct {
		what      string
		got, peer float64
		bound     float64
	}{
		{"after the warm-up, right after the logins", p.warm.perRight(), b.warm.perRight(), warmBound},
		{"after the warm-up, settled", p.warm.perSettled(), b.warm.perSettled(), warmBound},
		{"from the fresh process, right after the logins", p.fresh.perRight(), b.fresh.perRight(), freshRightBound},
		{"from the fresh process, settled", p.fresh.perSettled(), b.fresh.perSettled(), freshBound},
	} {
		if c.got > c.bound*c.peer {
			t.Errorf("%s: the proxy holds %.0f B per idle client, more than %.2fx PgBouncer's %.0f B", c.what, c.got, c.bound, c.peer)
		}
	}
}
