package pooler

import (
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Counters are one pool's running totals since the proxy started: what
// PgBouncer's SHOW STATS_TOTALS shows, and more. Times are the sums of
// each request's, transaction's or wait's duration.
type Counters struct {
	// ServerAssignments counts the times a client was linked to a server.
	ServerAssignments int64
	// Xacts counts transactions, Queries requests (each Query, Sync or
	// FunctionCall answered by ReadyForQuery).
	Xacts, Queries int64
	// Received is the bytes clients sent to servers, Sent the bytes
	// servers sent to clients (PgBouncer's client_bytes, server_bytes).
	Received, Sent int64
	// XactTime and QueryTime sum the time from a transaction's (request's)
	// first message to its ReadyForQuery; WaitTime the time clients
	// waited for a server.
	XactTime, QueryTime, WaitTime time.Duration
	// ClientParses, ServerParses and Binds count named prepared
	// statements' Parse messages from clients, Parses sent to servers and
	// Binds, while prepared statements are tracked (max_prepared_statements
	// > 0 in transaction or statement mode), as PgBouncer 1.21 does.
	ClientParses, ServerParses, Binds int64
	// Logins counts client logins.
	Logins int64
}

// counters converts to the exported form.
func (a *counters) export() Counters {
	us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
	return Counters{ServerAssignments: a.assignments, Xacts: a.xacts, Queries: a.queries,
		Received: a.received, Sent: a.sent, XactTime: us(a.xactTime), QueryTime: us(a.queryTime),
		WaitTime: us(a.waitTime), ClientParses: a.clientParses, ServerParses: a.serverParses,
		Binds: a.binds, Logins: a.logins}
}

// PoolStats is one pool's state (SHOW POOLS) and counters.
type PoolStats struct {
	Database, User string
	Mode           poolmode.Mode
	// Clients: linked or idle (ClActive), waiting for a server
	// (ClWaiting).
	ClActive, ClWaiting int
	// Servers: linked (SvActive), idle (SvIdle), running
	// server_reset_query (SvTested), logging in (SvLogin), held while a
	// cancel request for them is in flight (SvBeingCanceled).
	SvActive, SvIdle, SvTested, SvLogin, SvBeingCanceled int
	// MaxWait is how long the oldest waiting client has waited.
	MaxWait  time.Duration
	Counters Counters
	// Wait, Xact and Query are the distributions of the pool's client
	// waits for a server (one per assignment, zero when a server was
	// idle), transaction times and request times (as Counters' WaitTime,
	// XactTime and QueryTime sum them), since the pool was made.
	Wait, Xact, Query Histogram
}

// HistogramBounds are the upper bounds of Histogram's buckets.
var HistogramBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// histBoundsUS are HistogramBounds in microseconds, the loop's unit.
var histBoundsUS = func() [nBounds]int64 {
	var b [nBounds]int64
	for i, d := range HistogramBounds {
		b[i] = d.Microseconds()
	}
	return b
}()

const nBounds = len(HistogramBounds)

// Histogram is a distribution of durations: Buckets[i] counts the
// observations at most HistogramBounds[i] (cumulative, as Prometheus
// counts them); Count and Sum cover every observation.
type Histogram struct {
	Buckets []uint64
	Count   uint64
	Sum     time.Duration
}

// hist is a loop-owned histogram: one bucket per bound plus one for
// larger values, and the sum in microseconds. observe costs a few
// comparisons and no allocation.
type hist struct {
	counts [nBounds + 1]uint64
	sum    int64
}

func (h *hist) observe(us int64) {
	i := 0
	for i < nBounds && us > histBoundsUS[i] {
		i++
	}
	h.counts[i]++
	h.sum += us
}

func (h *hist) export() Histogram {
	out := Histogram{Buckets: make([]uint64, nBounds), Sum: time.Duration(h.sum) * time.Microsecond}
	for i, n := range h.counts {
		out.Count += n
		if i < nBounds {
			out.Buckets[i] = out.Count
		}
	}
	return out
}

// Stats reports every pool, in (database, user) order. The console's own
// database "pgbouncer" is not a pool here. It returns nil once the proxy
// has stopped.
func (p *Proxy) Stats() []PoolStats {
	var out []PoolStats
	if !p.running() {
		return nil
	}
	p.loop.call(func() {
		now := p.loop.now
		for _, pl := range p.poolList() {
			st := pl.state(now)
			c := p.poolCounters(pl)
			out = append(out, PoolStats{Database: pl.key.db, User: pl.key.user, Mode: pl.mode,
				ClActive: st.clActive, ClWaiting: st.clWaiting, SvActive: st.svActive, SvIdle: st.svIdle,
				SvTested: st.svTested, SvLogin: st.svLogin, SvBeingCanceled: st.svBeingCanceled,
				MaxWait: st.maxWait, Counters: c.export(),
				Wait: pl.hist.wait.export(), Xact: pl.hist.xact.export(), Query: pl.hist.query.export()})
		}
	})
	return out
}

// poolState counts a pool's clients and servers by state.
type poolState struct {
	clActive, clWaiting                                         int
	svActive, svIdle, svTested, svLogin, svBeingCanceled, svNew int
	maxWait                                                     time.Duration
}

// state counts the pool's clients and servers. It runs on the loop.
func (p *pool) state(now time.Time) poolState {
	var st poolState
	for s := range p.servers {
		switch s.state {
		case stateActive:
			st.svActive++
		case stateIdle:
			st.svIdle++
		case stateTested:
			st.svTested++
		case stateBeingCanceled:
			st.svBeingCanceled++
		case stateLogin:
			st.svNew++
		}
	}
	if p.queue.LoggingIn() {
		st.svLogin = 1
	}
	st.clWaiting = p.queue.Waiting()
	st.clActive = p.clients - st.clWaiting
	if since, ok := p.queue.Oldest(); ok {
		st.maxWait = max(now.Sub(time.Unix(0, since)), 0)
	}
	return st
}

// poolCounters is a pool's counters, its clients' connected or gone. It
// runs on the loop.
func (p *Proxy) poolCounters(pl *pool) counters {
	return pl.counts
}

// statsState is what SHOW STATS averages over: PgBouncer takes a snapshot
// of every pool's totals each stats_period and averages the change since
// the snapshot before the last one (src/stats.c). It belongs to the loop.
type statsState struct {
	oldStamp, newStamp time.Time
	older, newer       map[string]counters // by database, the console's included
	next               time.Time
}

// dbCounters adds the counters up by database, with the console's
// database "pgbouncer" (each console command is one transaction and one
// query). It runs on the loop.
func (p *Proxy) dbCounters() (names []string, by map[string]counters) {
	by = map[string]counters{}
	p.console.mu.Lock()
	by[adminDB] = counters{xacts: p.console.queries, queries: p.console.queries}
	p.console.mu.Unlock()
	for _, pl := range p.poolList() {
		st := by[pl.key.db]
		c := p.poolCounters(pl)
		st.add(&c)
		by[pl.key.db] = st
	}
	for db := range by {
		names = append(names, db)
	}
	sortBy(names, func(s string) string { return s })
	return names, by
}

// statsTick takes the stats_period snapshot when it is due. It runs on the
// loop from the janitor.
func (p *Proxy) statsTick(now time.Time) {
	s := &p.counts
	if s.newStamp.IsZero() { // PgBouncer's stats_setup
		s.newStamp = p.started
		s.oldStamp = p.started.Add(-time.Second)
		s.next = p.started.Add(p.conf().StatsPeriod)
	}
	if now.Before(s.next) {
		return
	}
	s.next = now.Add(p.conf().StatsPeriod)
	s.oldStamp, s.newStamp = s.newStamp, now
	_, cur := p.dbCounters()
	s.older, s.newer = s.newer, cur
}

// average is PgBouncer's calc_average: counts and bytes per second, times
// per transaction and per query, wait time per second (sic), over the time
// since the snapshot before the last.
func (p *Proxy) average(cur, old counters, now time.Time) counters {
	var avg counters
	dur := now.Sub(p.counts.oldStamp).Microseconds()
	if dur <= 0 {
		return avg
	}
	perSec := func(n int64) int64 { return 1_000_000 * n / dur }
	q, x := cur.queries-old.queries, cur.xacts-old.xacts
	avg.queries, avg.xacts = perSec(q), perSec(x)
	avg.received, avg.sent = perSec(cur.received-old.received), perSec(cur.sent-old.sent)
	if q > 0 {
		avg.queryTime = (cur.queryTime - old.queryTime) / q
	}
	if x > 0 {
		avg.xactTime = (cur.xactTime - old.xactTime) / x
	}
	avg.waitTime = perSec(cur.waitTime - old.waitTime)
	return avg
}
