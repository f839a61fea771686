package pooler

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// Version is what SHOW VERSION reports: PgBouncer's console version, so
// tools that read it find 1.18.0, and what answers.
const Version = "PgBouncer 1.18.0 compatible (poolsim proxy)"

// The SHOW views of PgBouncer 1.18 (src/admin.c, src/stats.c): each with
// exactly its columns, in its order and with its types, and NULL where
// PgBouncer sends NULL. The rows are the proxy's own state; where the
// proxy has no such thing (DNS cache, slab allocator, SSL) the view says
// so with empty or zero rows, as a PgBouncer without it would.

type showView struct {
	table  func(p *Proxy) *table
	notice func() []byte
	admin  bool // SHOW FDS: admin_users only
}

var showViews map[string]showView

func init() {
	showViews = map[string]showView{
		"help":           {notice: showHelp},
		"version":        {table: showVersion},
		"config":         {table: (*Proxy).showConfig},
		"databases":      {table: (*Proxy).showDatabases},
		"pools":          {table: (*Proxy).showPools},
		"clients":        {table: func(p *Proxy) *table { return p.showSockets(showClients) }},
		"servers":        {table: func(p *Proxy) *table { return p.showSockets(showServers) }},
		"sockets":        {table: func(p *Proxy) *table { return p.showSockets(showAllSockets) }},
		"active_sockets": {table: func(p *Proxy) *table { return p.showSockets(showActiveSockets) }},
		"users":          {table: (*Proxy).showUsers},
		"lists":          {table: (*Proxy).showLists},
		"peers":          {table: (*Proxy).showPeers},     // PgBouncer 1.19 (peering.go)
		"peer_pools":     {table: (*Proxy).showPeerPools}, // PgBouncer 1.19
		"state":          {table: (*Proxy).showState},     // PgBouncer 1.19
		"mem":            {table: (*Proxy).showMem},
		"fds":            {table: (*Proxy).showFDs, admin: true},
		"dns_hosts":      {table: func(*Proxy) *table { return newTable("sqs", "hostname", "ttl", "addrs") }},
		"dns_zones":      {table: func(*Proxy) *table { return newTable("sqi", "zonename", "serial", "count") }},
		"stats":          {table: (*Proxy).showStats},
		"stats_totals":   {table: func(p *Proxy) *table { return p.showStatsPart(false) }},
		"stats_averages": {table: func(p *Proxy) *table { return p.showStatsPart(true) }},
		"totals":         {table: (*Proxy).showTotals},
	}
}

func showHelp() []byte {
	return commandReady(consoleNotice(nil, "Console usage", consoleHelp), "SHOW")
}

func showVersion(*Proxy) *table {
	t := newTable("s", "version")
	t.row(Version)
	return t
}

// showState is SHOW STATE (PgBouncer 1.19): whether the pooler is
// active, paused (PAUSE of everything) or suspended, yes or no each.
func (p *Proxy) showState() *table {
	var paused, suspended bool
	p.loop.call(func() { paused, suspended = p.pause.on, p.pause.suspend })
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	t := newTable("ss", "key", "value")
	t.row("active", yes(!paused && !suspended))
	t.row("paused", yes(paused))
	t.row("suspended", yes(suspended))
	return t
}

// sortBy sorts s by key.
func sortBy[T any, K cmp.Ordered](s []T, key func(T) K) {
	slices.SortStableFunc(s, func(a, b T) int { return cmp.Compare(key(a), key(b)) })
}

// netAddr splits an address as PgBouncer shows it: the host, and the port
// as a number ("unix" and 0 for a Unix socket).
func netAddr(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	if a.Network() == "unix" {
		return "unix", 0
	}
	h, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	n, _ := strconv.Atoi(port)
	return h, n
}

// clientAddr is a client's address (ap, its remote or local one) in the
// socket views: a Unix socket client's is "unix" and listen_port, as
// PgBouncer shows it.
func clientAddr(c *client, ap netip.AddrPort) (string, int) {
	if c.unix {
		return "unix", c.px.conf().listenPort()
	}
	return ipAddr(ap)
}

// ipAddr is netAddr for a client's address ("" and 0 for none).
func ipAddr(ap netip.AddrPort) (string, int) {
	if !ap.IsValid() {
		return "", 0
	}
	return ap.Addr().String(), int(ap.Port())
}

func ptr(id uint64) string { return fmt.Sprintf("0x%x", id) }

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// consolePool is the console's own pool in SHOW POOLS and the socket
// views, as PgBouncer lists its admin pool among the others.
var consolePool = poolKey{adminDB, adminDB}

// poolKeys lists the pools with the console's, in PgBouncer's order
// (database, then user). It runs on the loop.
func (p *Proxy) poolKeys() ([]poolKey, map[poolKey]*pool) {
	pools := map[poolKey]*pool{}
	keys := []poolKey{consolePool}
	for _, pl := range p.poolList() {
		pools[pl.key] = pl
		keys = append(keys, pl.key)
	}
	slices.SortStableFunc(keys, func(a, b poolKey) int {
		return cmp.Or(cmp.Compare(a.db, b.db), cmp.Compare(a.user, b.user))
	})
	return keys, pools
}

// showPools is SHOW POOLS.
func (p *Proxy) showPools() *table {
	t := newTable("ssiiiiiiiiiiiiis", "database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req",
		"cl_waiting_cancel_req", "sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used",
		"sv_tested", "sv_login", "maxwait", "maxwait_us", "pool_mode")
	consoles := len(p.consoleList())
	p.loop.call(func() {
		keys, pools := p.poolKeys()
		now := p.loop.now
		for _, k := range keys {
			pl := pools[k]
			if pl == nil {
				t.row(k.db, k.user, consoles, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "statement")
				continue
			}
			st := pl.state(now)
			us := st.maxWait.Microseconds()
			// The proxy forwards a cancel over its own connection at once:
			// no cancel request waits, none is counted as a server.
			t.row(k.db, k.user, st.clActive, st.clWaiting, 0, 0, st.svActive, 0, st.svBeingCanceled,
				st.svIdle, 0, st.svTested, st.svLogin, us/1e6, us%1e6, pl.mode.String())
		}
	})
	return t
}

// Socket views: which rows SHOW CLIENTS, SERVERS, SOCKETS and
// ACTIVE_SOCKETS list.
type socketView uint8

const (
	showClients socketView = iota
	showServers
	showAllSockets
	showActiveSockets
)

// showSockets is SHOW CLIENTS, SERVERS, SOCKETS and ACTIVE_SOCKETS: the
// same columns (the last two add PgBouncer's buffer positions), per pool
// in PgBouncer's list order.
func (p *Proxy) showSockets(view socketView) *table {
	debug := view == showAllSockets || view == showActiveSockets
	kinds, names := "sssssisiTTiiississ", []string{"type", "user", "database", "state", "addr", "port", "local_addr",
		"local_port", "connect_time", "request_time", "wait", "wait_us", "close_needed", "ptr", "link",
		"remote_pid", "tls", "application_name"}
	if debug {
		kinds += "iiiiiii"
		names = append(names, "recv_pos", "pkt_pos", "pkt_remain", "send_pos", "send_remain", "pkt_avail", "send_avail")
	}
	t := newTable(kinds, names...)
	consoles := p.consoleList()
	p.console.mu.Lock()
	busy := map[*consoleConn]bool{}
	for _, cc := range consoles {
		busy[cc] = cc.busy
	}
	p.console.mu.Unlock()
	add := func(vals []any, pos [7]int, active bool) {
		if !debug {
			vals = vals[:18]
		} else {
			for _, v := range pos {
				vals = append(vals, v)
			}
		}
		if view != showActiveSockets || active {
			t.row(vals...)
		}
	}
	p.loop.call(func() {
		now := p.loop.now
		keys, pools := p.poolKeys()
		clientState := func(s string) string {
			if debug {
				return "cl_" + s
			}
			return s
		}
		for _, k := range keys {
			pl := pools[k]
			if view != showServers {
				if pl == nil { // the console's connections
					for _, cc := range consoles {
						r, pos := consoleRow(cc, clientState("active"))
						add(r, pos, busy[cc])
					}
					continue
				}
				var active, waiting []*client
				for _, c := range p.clientList() {
					if c.pool != pl || !c.adopted || c.gone {
						continue
					}
					if c.queued {
						waiting = append(waiting, c)
					} else {
						active = append(active, c)
					}
				}
				sortBy(waiting, func(c *client) stamp { return c.waitSince })
				for _, c := range active {
					r, pos := clientRow(c, clientState("active"), now)
					add(r, pos, !c.sk.quiet())
				}
				for _, c := range waiting {
					r, pos := clientRow(c, clientState("waiting"), now)
					add(r, pos, !c.sk.quiet())
				}
			}
			if view == showClients || pl == nil {
				continue
			}
			byState := map[serverState][]*server{}
			for _, s := range pl.allServers() {
				byState[s.state] = append(byState[s.state], s)
			}
			// PgBouncer's lists in its order: active, idle, used, tested,
			// new (logging in), then for SHOW SERVERS the cancel lists.
			order := []struct {
				st   serverState
				name string
			}{{stateActive, "active"}, {stateIdle, "idle"}, {stateTested, "tested"}, {stateLogin, "new"}}
			if view == showServers {
				order = append(order, struct {
					st   serverState
					name string
				}{stateBeingCanceled, "being_canceled"})
			}
			for _, o := range order {
				name := o.name
				if debug {
					name = map[string]string{"active": "sv_active", "idle": "sv_idle", "tested": "sv_tested", "new": "sv_login"}[name]
				}
				for _, s := range byState[o.st] {
					r, pos := serverRow(s, name)
					add(r, pos, !s.sk.quiet())
				}
			}
		}
	})
	return t
}

// clientRow is a client's row of the socket views.
func clientRow(c *client, state string, now time.Time) ([]any, [7]int) {
	var wait time.Duration
	switch {
	case c.queued:
		wait = now.Sub(c.waitSince.time())
	case c.outstanding > 0:
		wait = now.Sub(c.queryStart.time())
	}
	us := max(wait, 0).Microseconds()
	req := c.connectTime
	if c.requestTime != 0 {
		req = c.requestTime
	}
	addr, port := clientAddr(c, c.remote)
	laddr, lport := clientAddr(c, c.localAddr())
	link := ""
	if c.server != nil {
		link = ptr(c.server.id)
	}
	user, db := "(nouser)", "(nodb)"
	if c.pool != nil {
		user, db = c.pool.key.user, c.pool.key.db
	}
	return []any{"C", user, db, state, addr, port, laddr, lport, c.connectTime.time().Format(adminTime),
		req.time().Format(adminTime), us / 1e6, us % 1e6, 0, ptr(c.id), link, int(c.peerPID), c.tlsInfo(),
		c.want.get("application_name")}, sockPos(&c.sk, c.fwdLeft)
}

// serverRow is a server's row of the socket views. remote_pid is the
// backend's process id, as PgBouncer takes it from the cancel key.
func serverRow(s *server, state string) ([]any, [7]int) {
	req := s.idleSince
	if req.IsZero() {
		req = s.connectTime
	}
	link := ""
	if c := s.client; c != nil {
		link = ptr(c.id)
	}
	addr, port := netAddr(s.remote)
	laddr, lport := netAddr(s.local)
	return []any{"S", s.pool.key.user, s.pool.key.db, state, addr, port, laddr, lport,
		s.connectTime.Format(adminTime), req.Format(adminTime), 0, 0, s.closeNeeded, ptr(s.id), link,
		int(s.pid), tlsText(s.tlsVersion, s.tlsSuite), s.have.get("application_name")}, sockPos(&s.sk, s.fwdLeft)
}

// consoleRow is a console connection's row: its pool is "pgbouncer", its
// user the one that logged in.
func consoleRow(cc *consoleConn, state string) ([]any, [7]int) {
	c := cc.c
	addr, port := clientAddr(c, c.remote)
	laddr, lport := clientAddr(c, c.localAddr())
	return []any{"C", cc.u.name, adminDB, state, addr, port, laddr, lport, c.connectTime.time().Format(adminTime),
		cc.since.Format(adminTime), 0, 0, 0, ptr(c.id), "", int(c.peerPID), c.tlsInfo(), c.lg.appName}, [7]int{}
}

// sockPos is SHOW SOCKETS' buffer columns for a loop socket: recv_pos
// (bytes read into the buffer), pkt_pos (bytes handled), pkt_remain (of a
// message still passing through), send_pos (bytes written of the output),
// send_remain, pkt_avail (read, not handled), send_avail (to write).
func sockPos(sk *sock, remain int) [7]int {
	return [7]int{sk.w, sk.r, remain, sk.sent, 0, sk.w - sk.r, sk.pending()}
}

const adminTime = "2006-01-02 15:04:05 MST"

// showDatabases is SHOW DATABASES: every database [databases] names,
// every other one a pool or a console command brought in (PgBouncer's
// auto-databases), and the console's own.
func (p *Proxy) showDatabases() *table {
	t := newTable("ssissiiisiiii", "name", "host", "port", "database", "force_user", "pool_size",
		"min_pool_size", "reserve_pool", "pool_mode", "max_connections", "current_connections", "paused", "disabled")
	cfg := p.conf()
	s := cfg.settings()
	names := map[string]bool{adminDB: true}
	for _, d := range cfg.Databases {
		if d.Name != "*" {
			names[d.Name] = true
		}
	}
	p.mu.Lock()
	current := map[string]int64{}
	for k := range p.pools {
		names[k.db] = true
	}
	for db, n := range p.dbs {
		current[db] = n.n.Load()
	}
	p.mu.Unlock()
	p.console.mu.Lock()
	for db := range p.console.registered {
		names[db] = true
	}
	disabled := copyFlags(p.console.disabled)
	p.console.mu.Unlock()
	paused := map[string]bool{}
	p.loop.call(func() {
		for db := range p.pause.dbs {
			paused[db] = true
		}
	})
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sortBy(sorted, func(s string) string { return s })
	_, lport := netAddr(p.addr)
	if lport == 0 {
		lport = cfg.listenPort() // the first listener is the Unix socket
	}
	for _, name := range sorted {
		if name == adminDB {
			t.row(adminDB, nil, lport, adminDB, adminDB, 2, 0, 0, "statement", 0, 0, 0, 0)
			continue
		}
		ent, _, ok := cfg.poolFor(name, "")
		if !ok {
			continue
		}
		host, port := ent.Host, ent.Port
		if host == upstreamHost {
			host, port = "", 0
			if p.upstream != nil {
				host, port = p.upstream.Host, int(p.upstream.Port)
			}
		}
		dbname := ent.DBName
		if dbname == "" {
			dbname = name
		}
		size := ent.PoolSize
		if size == poolconf.Unset {
			size = s.DefaultPoolSize
		}
		minSize, reserve := ent.MinPoolSize, ent.ReservePool
		if minSize == poolconf.Unset {
			minSize = s.MinPoolSize
		}
		if reserve == poolconf.Unset {
			reserve = s.ReservePoolSize
		}
		var mode any
		if ent.PoolMode != poolmode.Direct {
			mode = ent.PoolMode.String()
		}
		maxConn := ent.MaxDBConnections
		if maxConn == poolconf.Unset {
			maxConn = s.MaxDBConnections
		}
		t.row(name, orNull(host), port, dbname, orNull(ent.User), size, minSize, reserve, mode, maxConn,
			current[name], paused[name], disabled[name])
	}
	return t
}

func copyFlags(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// users lists PgBouncer's user list: auth_file's users, [users], the
// forced users of [databases], the console's "pgbouncer" and every user
// with a pool.
func (p *Proxy) userNames() []string {
	cfg := p.conf()
	names := map[string]bool{adminDB: true}
	for u := range *p.secrets.Load() {
		names[u] = true
	}
	for _, u := range cfg.Users {
		names[u.Name] = true
	}
	for _, d := range cfg.Databases {
		if d.User != "" {
			names[d.User] = true
		}
	}
	p.mu.Lock()
	for k := range p.pools {
		names[k.user] = true
	}
	p.mu.Unlock()
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sortBy(out, func(s string) string { return s })
	return out
}

// showUsers is SHOW USERS: pool_mode is the [users] entry's, NULL when it
// has none.
func (p *Proxy) showUsers() *table {
	t := newTable("ss", "name", "pool_mode")
	cfg := p.conf()
	for _, u := range p.userNames() {
		var mode any
		for _, e := range cfg.Users {
			if e.Name == u && e.PoolMode != poolmode.Direct {
				mode = e.PoolMode.String()
			}
		}
		t.row(u, mode)
	}
	return t
}

// showLists is SHOW LISTS. The proxy keeps no free lists (Go's allocator
// does), so the free_ counts are 0; it has no DNS cache.
func (p *Proxy) showLists() *table {
	t := newTable("si", "list", "items")
	dbs := p.showDatabases()
	users := len(p.userNames())
	consoles := len(p.consoleList())
	var pools, used, login, servers int
	p.loop.call(func() {
		for _, pl := range p.poolList() {
			pools++
			servers += pl.queue.Servers()
		}
		for _, c := range p.clientList() {
			if c.adopted {
				used++
			} else {
				login++
			}
		}
	})
	for _, r := range [][2]any{{"databases", len(dbs.rows)}, {"users", users}, {"pools", pools + 1},
		{"free_clients", 0}, {"used_clients", used + login + consoles}, {"login_clients", login},
		{"free_servers", 0}, {"used_servers", servers},
		{"dns_names", 0}, {"dns_zones", 0}, {"dns_queries", 0}, {"dns_pending", 0}} {
		t.row(r[0], r[1])
	}
	return t
}

// showMem is SHOW MEM: PgBouncer's slab caches, here the proxy's objects
// of each kind, their Go size (without what they point to) and count; the
// proxy keeps none free, except the loop's read buffers (iobuf_cache).
func (p *Proxy) showMem() *table {
	t := newTable("siiii", "name", "size", "used", "free", "memtotal")
	var pools, clients, servers, bufs, free int
	users := len(p.userNames())
	dbs := len(p.showDatabases().rows)
	clients += len(p.consoleList())
	p.loop.call(func() {
		for _, pl := range p.poolList() {
			pools++
			servers += len(pl.servers)
		}
		for _, c := range p.clientList() {
			clients++
			if c.sk.buf != nil {
				bufs++
			}
		}
		for _, pl := range p.poolList() {
			for s := range pl.servers {
				if s.sk.buf != nil {
					bufs++
				}
			}
		}
		free = len(p.loop.free)
	})
	row := func(name string, size uintptr, used, free int) {
		t.row(name, int(size), used, free, int(size)*(used+free))
	}
	row("user_cache", unsafe.Sizeof(poolconf.User{}), users, 0)
	row("db_cache", unsafe.Sizeof(poolconf.Database{}), dbs, 0)
	row("pool_cache", unsafe.Sizeof(pool{}), pools, 0)
	row("server_cache", unsafe.Sizeof(server{}), servers, 0)
	row("client_cache", unsafe.Sizeof(client{}), clients, 0)
	row("iobuf_cache", sockBufSize, bufs, free)
	return t
}

// showFDs is SHOW FDS (admin_users only): the proxy's listening sockets and
// every logged-in client and server connection, with the cancel keys and
// tracked settings PgBouncer hands to a new process on an online restart.
// Over the Unix socket from the proxy's own OS user the rows carry their
// descriptors (takeover_old.go); here, as over TCP, they are only listed.
func (p *Proxy) showFDs() *table {
	t, _, _ := p.fdTable(false)
	return t
}

// showStats is SHOW STATS: per database, the totals and the averages over
// the last stats_period.
func (p *Proxy) showStats() *table {
	t := newTable("sNNNNNNNNNNNNNN", "database", "total_xact_count", "total_query_count", "total_received",
		"total_sent", "total_xact_time", "total_query_time", "total_wait_time", "avg_xact_count",
		"avg_query_count", "avg_recv", "avg_sent", "avg_xact_time", "avg_query_time", "avg_wait_time")
	p.loop.call(func() {
		names, cur := p.dbCounters()
		for _, db := range names {
			c := cur[db]
			a := p.average(c, p.counts.older[db], p.loop.now)
			t.row(db, c.xacts, c.queries, c.received, c.sent, c.xactTime, c.queryTime, c.waitTime,
				a.xacts, a.queries, a.received, a.sent, a.xactTime, a.queryTime, a.waitTime)
		}
	})
	return t
}

// showStatsPart is SHOW STATS_TOTALS, or SHOW STATS_AVERAGES when avg.
func (p *Proxy) showStatsPart(avg bool) *table {
	t := newTable("sNNNNNNN", "database", "xact_count", "query_count", "bytes_received", "bytes_sent",
		"xact_time", "query_time", "wait_time")
	p.loop.call(func() {
		names, cur := p.dbCounters()
		for _, db := range names {
			c := cur[db]
			if avg {
				c = p.average(c, p.counts.older[db], p.loop.now)
			}
			t.row(db, c.xacts, c.queries, c.received, c.sent, c.xactTime, c.queryTime, c.waitTime)
		}
	})
	return t
}

// showTotals is SHOW TOTALS: the same over every database, as rows.
func (p *Proxy) showTotals() *table {
	t := newTable("sN", "name", "value")
	p.loop.call(func() {
		names, cur := p.dbCounters()
		var tot, old counters
		for _, db := range names {
			c, o := cur[db], p.counts.older[db]
			tot.add(&c)
			old.add(&o)
		}
		a := p.average(tot, old, p.loop.now)
		for _, r := range []struct {
			name string
			v    int64
		}{{"total_xact_count", tot.xacts}, {"total_query_count", tot.queries}, {"total_client_bytes", tot.received},
			{"total_server_bytes", tot.sent}, {"total_xact_time", tot.xactTime}, {"total_query_time", tot.queryTime},
			{"total_wait_time", tot.waitTime}, {"avg_xact_count", a.xacts}, {"avg_query_count", a.queries},
			{"avg_client_bytes", a.received}, {"avg_server_bytes", a.sent}, {"avg_xact_time", a.xactTime},
			{"avg_query_time", a.queryTime}, {"avg_wait_time", a.waitTime}} {
			t.row(r.name, r.v)
		}
	})
	return t
}

// ErrNoSuchView is Show's error for a name that is not a SHOW view with
// rows (HELP answers with a notice only).
var ErrNoSuchView = errors.New("no such SHOW view")

// Show returns what the console's SHOW view (case-insensitive: "POOLS",
// "stats_totals", ...) shows: its columns, in PgBouncer 1.18's order, and
// its rows, each cell a string, an int, an int64, a uint64, a bool, a
// []byte or nil for NULL. The Prometheus endpoint reads the console this
// way.
func (p *Proxy) Show(view string) (columns []string, rows [][]any, err error) {
	v, ok := showViews[strings.ToLower(view)]
	if !ok || v.table == nil {
		return nil, nil, fmt.Errorf("show %s: %w", view, ErrNoSuchView)
	}
	if !p.running() {
		return nil, nil, fmt.Errorf("show %s: %w", view, ErrNotServing)
	}
	t := v.table(p)
	return t.names, t.rows, nil
}
