package pooler

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"
)

// Version is what SHOW VERSION and the console's server_version report.
const Version = "poolsim proxy (PgBouncer 1.18 compatible)"

// Column lists of the admin console, exactly as PgBouncer names them, in
// PgBouncer's order.
var (
	poolsColumns = []string{"database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req",
		"sv_active", "sv_active_cancel", "sv_being_canceled", "sv_idle", "sv_used", "sv_tested", "sv_login",
		"maxwait", "maxwait_us", "pool_mode", "load_balance_hosts"}
	statsColumns = []string{"database", "total_server_assignment_count", "total_xact_count", "total_query_count",
		"total_received", "total_sent", "total_xact_time", "total_query_time", "total_wait_time",
		"total_client_parse_count", "total_server_parse_count", "total_bind_count", "total_client_login_count",
		"avg_server_assignment_count", "avg_xact_count", "avg_query_count", "avg_recv", "avg_sent",
		"avg_xact_time", "avg_query_time", "avg_wait_time", "avg_client_parse_count", "avg_server_parse_count",
		"avg_bind_count", "avg_client_login_count"}
	databasesColumns = []string{"name", "host", "port", "database", "force_user", "pool_size", "min_pool_size",
		"reserve_pool", "pool_mode", "max_connections", "current_connections", "paused", "disabled"}
	listsColumns  = []string{"list", "items"}
	configColumns = []string{"key", "value", "default", "changeable"}
	connColumns   = []string{"type", "user", "database", "replication", "state", "addr", "port", "local_addr",
		"local_port", "connect_time", "request_time", "wait", "wait_us", "close_needed", "ptr", "link",
		"remote_pid", "tls", "application_name", "prepared_statements", "id"}
)

// consoleRole is what a console user may do: admin_users run every
// command, stats_users SHOW commands only, anyone else may not log in.
type consoleRole uint8

const (
	roleNone consoleRole = iota
	roleStats
	roleAdmin
)

// adminCommands are PgBouncer 1.18's console commands that need admin
// access (SHOW FDS too).
var adminCommands = map[string]bool{"DISABLE": true, "ENABLE": true, "KILL": true, "PAUSE": true, "RECONNECT": true,
	"RELOAD": true, "RESUME": true, "SET": true, "SHUTDOWN": true, "SUSPEND": true, "WAIT_CLOSE": true}

// consoleUser is the user of one console connection.
type consoleUser struct {
	name string
	role consoleRole
}

// consoleRole looks a user up in admin_users and stats_users.
func (p *Proxy) consoleRole(user string) consoleRole {
	if slices.Contains(p.conf().AdminUsers, user) {
		return roleAdmin
	}
	if slices.Contains(p.conf().StatsUsers, user) {
		return roleStats
	}
	return roleNone
}

// requireAdmin is the one access check of console commands: a command
// that changes anything, or shows more than statistics (PgBouncer 1.18:
// every command but SHOW, and SHOW FDS), calls it first. It answers a
// stats user with PgBouncer's ERROR "admin access needed" and reports
// false; for an admin user it writes nothing and reports true.
func requireAdmin(w io.Writer, u consoleUser) bool {
	if u.role == roleAdmin {
		return true
	}
	writeConsoleError(w, "admin access needed")
	return false
}

// writeConsoleError writes a non-fatal console error (ERROR 08P01) and
// ReadyForQuery, as PgBouncer's admin_error does.
func writeConsoleError(w io.Writer, msg string) {
	b, _ := (&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "08P01",
		Message: msg}).Encode(nil)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	_, _ = w.Write(b)
}

// admin serves the console on the virtual database "pgbouncer" to a user
// of admin_users or stats_users: simple query protocol only, one command
// per query. Every message must fit in pkt_buf, as in PgBouncer; a longer
// one ends the connection with "incomplete pkt" before anything is
// allocated for it.
func (p *Proxy) admin(c *client, u consoleUser) {
	var b []byte
	b, _ = (&pgproto3.AuthenticationOk{}).Encode(b)
	for _, kv := range [][2]string{{"server_version", "1.18.0/bouncer"}, {"client_encoding", "UTF8"},
		{"server_encoding", "UTF8"}, {"DateStyle", "ISO"}, {"standard_conforming_strings", "on"},
		{"application_name", c.lg.appName}} {
		b, _ = (&pgproto3.ParameterStatus{Name: kv[0], Value: kv[1]}).Encode(b)
	}
	b, _ = (&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: []byte{byte(c.secret >> 24), byte(c.secret >> 16), byte(c.secret >> 8), byte(c.secret)}}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	if _, err := c.lg.w.Write(b); err != nil || c.lg.w.Flush() != nil {
		return
	}
	_ = c.lg.conn.SetDeadline(time.Time{})
	stop := make(chan struct{})
	defer close(stop)
	p.wg.Add(1)
	go func() { // the console is closed at shutdown
		defer p.wg.Done()
		select {
		case <-p.stopping:
			_ = c.lg.conn.Close()
		case <-stop:
		}
	}()
	for {
		typ, n, err := consoleHeader(c.lg.r, p.conf().PktBuf)
		if err != nil {
			if errors.Is(err, errIncompletePkt) {
				sendFatal(c.lg.w, poolerError("incomplete pkt"))
			}
			return
		}
		// The whole message fits in the reader's pkt_buf bytes.
		msg, err := c.lg.r.Peek(n)
		if err != nil {
			return
		}
		body := msg[5:]
		switch typ {
		case 'X':
			return
		case 'Q':
			var q pgproto3.Query
			if q.Decode(body) != nil {
				sendFatal(c.lg.w, poolerError("incomplete query"))
				return
			}
			query := q.String
			_, _ = c.lg.r.Discard(n)
			p.adminQuery(c.lg.w, u, query)
			if c.lg.w.Flush() != nil {
				return
			}
		default:
			sendFatal(c.lg.w, poolerError("admin console supports only the simple query protocol"))
			return
		}
	}
}

// errIncompletePkt is a console message longer than pkt_buf.
var errIncompletePkt = errors.New("incomplete pkt")

// consoleHeader reads the next console message's header and checks its
// length against pktBuf before the body is read.
func consoleHeader(r *bufio.Reader, pktBuf int) (typ byte, n int, err error) {
	h, err := r.Peek(5)
	if err != nil {
		return 0, 0, err
	}
	l := int(int32(binary.BigEndian.Uint32(h[1:])))
	if l < 4 {
		return 0, 0, fmt.Errorf("%w: console message %q with length %d", errProtocol, h[0], l)
	}
	if l+1 > pktBuf || l+1 > r.Size() {
		return 0, 0, fmt.Errorf("%w: console message %q of %d bytes, pkt_buf is %d", errIncompletePkt, h[0], l+1, pktBuf)
	}
	return h[0], l + 1, nil
}

// adminQuery answers one console command from user u.
func (p *Proxy) adminQuery(w interface{ Write([]byte) (int, error) }, u consoleUser, query string) {
	cmd := strings.ToUpper(strings.Join(strings.Fields(strings.TrimRight(strings.TrimSpace(query), "; \t\n")), " "))
	var cols []string
	var rows [][]string
	// The tables are read on the loop, which owns what they show.
	show := func(c []string, f func() [][]string) {
		cols = c
		p.loop.call(func() { rows = f() })
	}
	switch cmd {
	case "SHOW POOLS":
		show(poolsColumns, p.showPools)
	case "SHOW STATS":
		show(statsColumns, p.showStats)
	case "SHOW CLIENTS":
		show(connColumns, p.showClients)
	case "SHOW SERVERS":
		show(connColumns, p.showServers)
	case "SHOW DATABASES":
		show(databasesColumns, p.showDatabases)
	case "SHOW LISTS":
		show(listsColumns, p.showLists)
	case "SHOW CONFIG":
		cols, rows = configColumns, p.showConfig()
	case "SHOW VERSION":
		cols, rows = []string{"version"}, [][]string{{Version}}
	case "SHOW HELP":
		b, _ := (&pgproto3.NoticeResponse{Severity: "NOTICE", SeverityUnlocalized: "NOTICE", Code: "00000",
			Message: "Console usage", Detail: "SHOW HELP|POOLS|STATS|CLIENTS|SERVERS|DATABASES|LISTS|CONFIG|VERSION"}).Encode(nil)
		b, _ = (&pgproto3.CommandComplete{CommandTag: []byte("SHOW")}).Encode(b)
		b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
		_, _ = w.Write(b)
		return
	default:
		// PgBouncer checks admin access first thing in each admin command,
		// so a stats user is refused one the proxy does not have either.
		if f := strings.Fields(cmd); len(f) > 0 && (adminCommands[f[0]] || cmd == "SHOW FDS") && !requireAdmin(w, u) {
			return
		}
		writeConsoleError(w, "invalid command")
		return
	}
	_, _ = w.Write(encodeTable(cols, rows))
}

// numeric columns are sent as int8, the rest as text, all in text format.
var textColumns = map[string]bool{"database": true, "user": true, "pool_mode": true, "load_balance_hosts": true,
	"type": true, "replication": true, "state": true, "addr": true, "local_addr": true, "connect_time": true,
	"request_time": true, "ptr": true, "link": true, "tls": true, "application_name": true, "version": true,
	"name": true, "host": true, "force_user": true, "list": true, "key": true, "value": true, "default": true,
	"changeable": true}

func encodeTable(cols []string, rows [][]string) []byte {
	fields := make([]pgproto3.FieldDescription, len(cols))
	for i, c := range cols {
		oid, size := uint32(20), int16(8)
		if textColumns[c] {
			oid, size = 25, -1
		}
		fields[i] = pgproto3.FieldDescription{Name: []byte(c), DataTypeOID: oid, DataTypeSize: size, TypeModifier: -1}
	}
	b, _ := (&pgproto3.RowDescription{Fields: fields}).Encode(nil)
	for _, r := range rows {
		vals := make([][]byte, len(r))
		for i, v := range r {
			vals[i] = []byte(v)
		}
		b, _ = (&pgproto3.DataRow{Values: vals}).Encode(b)
	}
	b, _ = (&pgproto3.CommandComplete{CommandTag: []byte("SHOW")}).Encode(b)
	b, _ = (&pgproto3.ReadyForQuery{TxStatus: 'I'}).Encode(b)
	return b
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (p *Proxy) showPools() [][]string {
	var rows [][]string
	now := time.Now()
	for _, pl := range p.poolList() {
		var active, idle, tested, canceling int64
		for s := range pl.servers {
			switch s.state {
			case stateActive:
				active++
			case stateIdle:
				idle++
			case stateTested:
				tested++
			case stateBeingCanceled:
				canceling++
			}
		}
		waiting := int64(len(pl.waiters))
		var maxwait time.Duration
		if len(pl.waiters) > 0 {
			maxwait = now.Sub(pl.waiters[0].since.time())
		}
		login := int64(0)
		if pl.login {
			login = 1
		}
		clActive := int64(pl.clients) - waiting
		us := maxwait.Microseconds()
		rows = append(rows, []string{pl.key.db, pl.key.user, itoa(clActive), itoa(waiting), "0", "0",
			itoa(active), "0", itoa(canceling), itoa(idle), "0", itoa(tested), itoa(login),
			itoa(us / 1e6), itoa(us % 1e6), pl.mode.String(), ""})
	}
	return rows
}

func (p *Proxy) showStats() [][]string {
	type agg struct{ v [12]int64 }
	byDB := map[string]*agg{}
	var dbs []string
	clients := p.clientList()
	for _, pl := range p.poolList() {
		a := byDB[pl.key.db]
		if a == nil {
			a = &agg{}
			byDB[pl.key.db] = a
			dbs = append(dbs, pl.key.db)
		}
		st := pl.retired
		for _, c := range clients {
			if c.pool == pl {
				st.add(&c.st)
			}
		}
		// The parse and bind counts stay 0 unless prepared statements are
		// tracked (max_prepared_statements > 0, transaction or statement
		// mode), as in PgBouncer.
		for i, v := range []int64{st.assignments, st.xacts, st.queries, st.received, st.sent, st.xactTime,
			st.queryTime, st.waitTime, st.clientParses, st.serverParses, st.binds, st.logins} {
			a.v[i] += v
		}
	}
	secs := int64(time.Since(p.started).Seconds())
	if secs < 1 {
		secs = 1
	}
	per := func(n, d int64) int64 {
		if d == 0 {
			return 0
		}
		return n / d
	}
	var rows [][]string
	for _, db := range dbs {
		v := byDB[db].v
		row := []string{db}
		for _, x := range v {
			row = append(row, itoa(x))
		}
		// Averages over the proxy's uptime (PgBouncer uses stats_period):
		// counts per second, times per transaction, query and assignment.
		row = append(row, itoa(v[0]/secs), itoa(v[1]/secs), itoa(v[2]/secs), itoa(v[3]/secs), itoa(v[4]/secs),
			itoa(per(v[5], v[1])), itoa(per(v[6], v[2])), itoa(per(v[7], v[0])),
			itoa(v[8]/secs), itoa(v[9]/secs), itoa(v[10]/secs), itoa(v[11]/secs))
		rows = append(rows, row)
	}
	return rows
}

const adminTime = "2006-01-02 15:04:05 MST"

func hostPort(a net.Addr) (string, string) {
	if a == nil {
		return "", "0"
	}
	h, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), "0"
	}
	return h, port
}

// addrPortStrings splits a client's address for SHOW CLIENTS.
func addrPortStrings(ap netip.AddrPort) (string, string) {
	if !ap.IsValid() {
		return "", "0"
	}
	return ap.Addr().Unmap().String(), strconv.Itoa(int(ap.Port()))
}

func ptr(id uint64) string { return fmt.Sprintf("0x%x", id) }

func (p *Proxy) showClients() [][]string {
	var rows [][]string
	now := time.Now()
	for _, c := range p.clientList() {
		if !c.adopted {
			continue // still logging in
		}
		link, state := "", "idle"
		if c.server != nil {
			link, state = ptr(c.server.id), "active"
		}
		prepared := len(c.stmts)
		var wait time.Duration
		if c.queued {
			state = "waiting"
			wait = now.Sub(c.wait.since.time())
		}
		req := c.connectTime
		if c.requestTime != 0 {
			req = c.requestTime
		}
		addr, port := addrPortStrings(c.remote)
		laddr, lport := addrPortStrings(c.local)
		us := wait.Microseconds()
		rows = append(rows, []string{"C", c.pool.key.user, c.pool.key.db, "none", state, addr, port, laddr, lport,
			c.connectTime.time().Format(adminTime), req.time().Format(adminTime), itoa(us / 1e6), itoa(us % 1e6), "0",
			ptr(c.id), link, "0", "", c.want.get("application_name"), itoa(int64(prepared)), itoa(int64(c.id))})
	}
	return rows
}

func (p *Proxy) showServers() [][]string {
	var rows [][]string
	for _, pl := range p.poolList() {
		for _, s := range pl.allServers() {
			state := s.state.String()
			req := s.idleSince
			if req.IsZero() {
				req = s.connectTime
			}
			link := ""
			if c := s.client; c != nil {
				link = ptr(c.id)
			}
			addr, port := hostPort(s.remote)
			laddr, lport := hostPort(s.local)
			rows = append(rows, []string{"S", pl.key.user, pl.key.db, "none", state, addr, port, laddr, lport,
				s.connectTime.Format(adminTime), req.Format(adminTime), "0", "0", "0",
				ptr(s.id), link, itoa(int64(s.pid)), "", "", itoa(int64(s.ps.count())), itoa(int64(s.id))})
		}
	}
	return rows
}

// showDatabases lists the console's database and each database a pool
// serves (the proxy's [databases] is PgBouncer's "* = upstream").
func (p *Proxy) showDatabases() [][]string {
	_, lport := hostPort(p.addr)
	rows := [][]string{{adminDB, "", lport, adminDB, adminDB, "2", "0", "0", "statement", "0", "0", "0", "0"}}
	seen := map[string]bool{}
	for _, pl := range p.poolList() {
		db := pl.key.db
		if seen[db] {
			continue
		}
		seen[db] = true
		force := ""
		if pl.entry.User != "" {
			force = pl.entry.User
		}
		rows = append(rows, []string{db, pl.conf.Host, itoa(int64(pl.conf.Port)), pl.conf.Database, force,
			itoa(int64(pl.size)), "0", "0", pl.mode.String(), itoa(int64(pl.maxDB)),
			itoa(pl.db.n.Load()), "0", "0"})
	}
	return rows
}

// showLists counts the proxy's objects as PgBouncer's SHOW LISTS does.
// The proxy keeps no free lists, so the free_ counts are 0; there is no
// DNS cache.
func (p *Proxy) showLists() [][]string {
	dbs, users := map[string]bool{adminDB: true}, map[string]bool{}
	pools, servers := 0, 0
	for _, pl := range p.poolList() {
		dbs[pl.key.db] = true
		users[pl.key.user] = true
		pools++
		servers += pl.nservers
	}
	used, login := 0, 0
	for _, c := range p.clientList() {
		if c.adopted {
			used++
		} else {
			login++
		}
	}
	n := func(v int) string { return itoa(int64(v)) }
	return [][]string{{"databases", n(len(dbs))}, {"users", n(len(users))}, {"pools", n(pools)},
		{"free_clients", "0"}, {"used_clients", n(used)}, {"login_clients", n(login)},
		{"free_servers", "0"}, {"used_servers", n(servers)},
		{"dns_names", "0"}, {"dns_zones", "0"}, {"dns_queries", "0"}, {"dns_pending", "0"}}
}

// showConfig lists the settings the proxy has, with PgBouncer's names,
// units (seconds) and defaults. None can be changed while it runs.
func (p *Proxy) showConfig() [][]string {
	def := DefaultConfig()
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'g', -1, 64) }
	n := func(v int) string { return itoa(int64(v)) }
	cfg := p.conf()
	addr, port := "", ""
	if h, pt, err := net.SplitHostPort(cfg.Listen); err == nil {
		addr, port = h, pt
	}
	_, defPort, _ := net.SplitHostPort(def.Listen)
	rows := [][]string{
		{"admin_users", strings.Join(cfg.AdminUsers, ","), ""},
		{"auth_file", cfg.AuthFile, def.AuthFile},
		{"autodb_idle_timeout", secs(cfg.AutodbIdleTimeout), secs(def.AutodbIdleTimeout)},
		{"client_login_timeout", secs(cfg.ClientLoginTimeout), secs(def.ClientLoginTimeout)},
		{"auth_type", cfg.AuthType, def.AuthType},
		{"default_pool_size", n(cfg.PoolSize), n(def.PoolSize)},
		{"listen_addr", addr, ""},
		{"listen_port", port, defPort},
		{"max_client_conn", n(cfg.MaxClientConn), n(def.MaxClientConn)},
		{"max_db_connections", n(cfg.MaxDBConnections), n(def.MaxDBConnections)},
		{"max_packet_size", n(cfg.MaxPacketSize), n(def.MaxPacketSize)},
		{"max_prepared_statements", n(cfg.MaxPreparedStatements), n(def.MaxPreparedStatements)},
		{"pkt_buf", n(cfg.PktBuf), n(def.PktBuf)},
		{"pool_mode", cfg.Mode.String(), def.Mode.String()},
		{"query_wait_timeout", secs(cfg.QueryWaitTimeout), secs(def.QueryWaitTimeout)},
		{"server_connect_timeout", secs(cfg.ServerConnectTimeout), secs(def.ServerConnectTimeout)},
		{"server_idle_timeout", secs(cfg.ServerIdleTimeout), secs(def.ServerIdleTimeout)},
		{"server_lifetime", secs(cfg.ServerLifetime), secs(def.ServerLifetime)},
		{"server_login_retry", secs(cfg.ServerLoginRetry), secs(def.ServerLoginRetry)},
		{"server_reset_query", cfg.ServerResetQuery, def.ServerResetQuery},
		{"stats_users", strings.Join(cfg.StatsUsers, ","), ""},
	}
	for i := range rows {
		rows[i] = append(rows[i], "no")
	}
	return rows
}
