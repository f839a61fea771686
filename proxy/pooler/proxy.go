package pooler

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolconf"
	"github.com/poolsim/poolsim/models/poolmode"
)

// Proxy is a PgBouncer-style pooler. Create it with New, run it with Serve
// or ListenAndServe; it stops when their context is done.
type Proxy struct {
	live     atomic.Pointer[Config]            // the settings in force (Reload swaps them)
	upstream *pgconn.Config                    // Config.Upstream parsed; nil without one
	secrets  atomic.Pointer[map[string]string] // auth_file: user -> password or SCRAM secret
	ignore   []string                          // ignore_startup_parameters, lower case (login goroutines read it under mu)
	tls      atomic.Pointer[tls.Config]        // client TLS (clienttls.go); nil when client_tls_sslmode is disable
	auth     authState                         // SCRAM keys and auth_query secrets for server logins (serverauth.go)
	srvTLS   atomic.Pointer[serverTLS]         // server TLS (servertls.go); nil when server_tls_sslmode is not given
	// upOwnTLS: the Upstream string names its own sslmode, which wins
	// over server_tls_sslmode for the pools it serves (under mu).
	upOwnTLS bool

	observer Observer // Config.Observer, fixed at New; nil: none

	lns []net.Listener // every listener Serve accepts on (TCP and the Unix socket)

	ready    chan struct{} // closed when the listener is known
	addr     net.Addr
	listenFD int           // the listener's descriptor (SHOW FDS); -1 if unknown
	stopping chan struct{} // closed when graceful shutdown starts
	stopOnce sync.Once
	stopReq  chan struct{} // closed by Shutdown
	reqOnce  sync.Once
	hurry    chan struct{} // closed by an immediate Shutdown: no waiting for transactions
	hurryOne sync.Once
	base     context.Context // cancelled when everything must close
	kill     context.CancelFunc
	wg       sync.WaitGroup // every goroutine the proxy starts
	started  time.Time

	// loop is the data plane; loopPools and nextTick belong to it.
	loop      *loop
	loopPools []*pool
	nextTick  time.Time
	values    map[string]string // interned setting values (varcache.go)
	varSets   map[vars]*vars    // interned clients' tracked settings (varcache.go)
	pause     pauseState        // PAUSE, SUSPEND (pause.go)
	handover  handoverState     // online restart: what SHOW FDS passed on or a takeover adopted (takeover_old.go)
	gate      acceptGate        // accepting stops while suspended (takeover_old.go)
	console   consoles          // the console's connections and state (console.go)
	counts    statsState        // SHOW STATS averages (stats.go)

	mu     sync.Mutex
	setMu  sync.Mutex // one console SET at a time (console_config.go)
	pools  map[poolKey]*pool
	dbs    map[string]*dbCount
	users  map[string]*dbCount // server connections per user, for max_user_connections
	keys   map[uint64]*client  // BackendKeyData -> client: every logged-in client, for cancels and SHOW CLIENTS
	served bool

	conns conns     // client connections, for max_client_conn and the descriptor limit
	fds   fdReserve // descriptors kept for when the process runs out (fdreserve.go)
	login sync.Pool // *loginBufs of PktBuf bytes, reused across logins

	// locals: the proxy's ends of client connections, shared by its
	// clients (localaddr.go).
	locals localAddrs

	stats proxyStats

	// peerPools: cancel requests forwarded to each [peers] entry (peering.go).
	peerPools peerPools

	// ps is the proxy-wide registry of prepared statements, used by the
	// pools that track them (pool.psOn).
	ps psRegistry
}

// conf returns the settings in force. Reload replaces them; a caller that
// reads several fields should read them from one conf() result.
func (p *Proxy) conf() *Config { return p.live.Load() }

type proxyStats struct {
	refusedMaxClient, waitTimeouts atomic.Int64
	acceptErrors, refusedFDLimit   atomic.Int64
	loginTimeouts                  atomic.Int64
}

// New checks cfg and builds a proxy. Nothing is opened until Serve.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	p := &Proxy{
		ready:    make(chan struct{}),
		stopping: make(chan struct{}),
		stopReq:  make(chan struct{}),
		hurry:    make(chan struct{}),
		pools:    map[poolKey]*pool{},
		dbs:      map[string]*dbCount{},
		users:    map[string]*dbCount{},
		keys:     map[uint64]*client{},
		observer: cfg.Observer,
		listenFD: -1,
	}
	if err := p.setConfig(&cfg); err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	return p, nil
}

// setConfig puts cfg in force: the upstream, the auth file and the
// startup parameters to ignore are read from it first, so a bad one leaves
// the old settings in place.
func (p *Proxy) setConfig(cfg *Config) error {
	var up *pgconn.Config
	if cfg.Upstream != "" {
		var err error
		if up, err = parseUpstream(cfg.Upstream); err != nil {
			return fmt.Errorf("upstream: %w", err)
		}
	}
	secrets := map[string]string{}
	if cfg.AuthFile != "" {
		var err error
		var bad []string
		if secrets, bad, err = loadAuthFile(cfg.AuthFile); err != nil {
			return fmt.Errorf("auth_file: %w", err)
		}
		for _, b := range bad {
			if cfg.Logf != nil { // PgBouncer: "broken auth file"; the other users load
				cfg.Logf("%s", b)
			}
		}
	}
	tc, err := cfg.clientTLSConfig()
	if err != nil {
		return err
	}
	hba, err := p.loadAuthHBA(cfg) // auth_type hba (hba.go)
	if err != nil {
		return err
	}
	stc, err := cfg.serverTLSConfig()
	if err != nil {
		return err
	}
	ignore := make([]string, len(cfg.IgnoreStartupParameters))
	for i, n := range cfg.IgnoreStartupParameters {
		ignore[i] = strings.ToLower(n)
	}
	p.mu.Lock()
	p.upstream = up
	p.upOwnTLS = connKeywords(cfg.Upstream)["sslmode"]
	p.ignore = ignore
	p.mu.Unlock()
	p.secrets.Store(&secrets)
	p.auth.hba.Store(&hba)
	p.tls.Store(tc)
	p.srvTLS.Store(stc)
	p.live.Store(cfg)
	return nil
}

// ListenAndServe listens where the settings say (Listen: cfg.Listen,
// ListenMore and the Unix socket) and serves until ctx is done.
func (p *Proxy) ListenAndServe(ctx context.Context) error {
	lns, err := Listen(p.conf())
	if err != nil {
		return fmt.Errorf("proxy %w", err)
	}
	return p.Serve(ctx, lns[0], lns[1:]...)
}

// Serve accepts clients on ln (and on each of more: further TCP addresses,
// the Unix socket) until ctx is done, then shuts down gracefully: it stops
// accepting, lets linked clients finish their transactions for up to
// ShutdownTimeout, closes every connection and returns once every
// goroutine it started has ended. It closes the listeners. A Proxy serves
// once.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener, more ...net.Listener) error {
	return p.serve(ctx, append([]net.Listener{ln}, more...), nil)
}

// serve is Serve; with t, it first takes over the clients and servers of
// the process t connected to (ServeTakeover), accepting nobody until then.
func (p *Proxy) serve(ctx context.Context, lns []net.Listener, t *Takeover) error {
	ln := lns[0]
	closeAll := func() {
		if t != nil && !t.done { // not taken over: the old process serves on
			_ = t.Abort()
			return
		}
		for _, l := range lns {
			_ = l.Close()
		}
	}
	p.mu.Lock()
	if p.served {
		p.mu.Unlock()
		if t != nil {
			_ = t.Abort()
		}
		return errors.New("proxy serve: already served")
	}
	p.served = true
	p.mu.Unlock()
	p.lns = lns
	p.addr = ln.Addr()
	p.listenFD = listenerFD(ln)
	cfg := p.conf()
	p.logFDLimit(cfg) // admission_unix.go
	p.fds.start()
	defer p.fds.close()
	var err error
	for _, l := range lns {
		if err == nil && !isUnixListener(l) {
			err = checkListen(l.Addr().String(), cfg.AuthType)
		}
	}
	if err == nil {
		p.loop, err = newLoop(p)
	}
	p.base, p.kill = context.WithCancel(context.WithoutCancel(ctx))
	p.started = time.Now()
	p.nextTick = p.started.Add(janitorPeriod)
	close(p.ready) // what readers of the proxy's state use is set
	if err != nil {
		p.kill()
		closeAll()
		return fmt.Errorf("proxy serve: %w", err)
	}
	l := p.loop

	acceptErr := make(chan error, len(lns))
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		returnMemory(p.base)
	}()
	go func() {
		defer p.wg.Done()
		l.run()
	}()
	if t != nil {
		if err := p.takeOver(ctx, t); err != nil {
			p.shutdown()
			p.wg.Wait()
			return fmt.Errorf("proxy takeover: %w", err)
		}
	}
	p.wg.Add(len(lns))
	for _, l := range lns {
		go func() {
			defer p.wg.Done()
			acceptErr <- p.accept(l)
		}()
	}

	select {
	case <-ctx.Done():
	case <-p.stopReq:
	case err = <-acceptErr:
		err = fmt.Errorf("proxy accept: %w", err)
	}
	select {
	case <-p.hurry:
		// An immediate shutdown cuts the clients before it refuses new
		// connections, so that a refused connection means the clients are
		// gone too, as when PgBouncer exits on SHUTDOWN or SIGTERM.
		// Connections accepted meanwhile are closed by their logins.
		p.shutdown()
		closeAll()
	default:
		closeAll()
		p.shutdown()
	}
	p.wg.Wait()
	p.auth.conns.closeAll() // auth_query's (authquery.go)
	return err
}

// listenerFD is ln's descriptor, or -1.
func listenerFD(ln net.Listener) int {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(u uintptr) { fd = int(u) })
	return fd
}

// ErrNotServing is the answer of a method that reads or changes the running
// proxy's state (Show, Pause, ...) when Serve has not set it up: called
// before Serve, or after Serve failed to start.
var ErrNotServing = errors.New("proxy is not serving")

// running reports whether Serve has set up the event loop. A public entry
// point that uses the loop asks first: a caller that comes early (a
// metrics scrape or a signal as the proxy starts) gets an answer instead of
// racing Serve. p.loop is written before ready is closed, so reading it
// after is safe.
func (p *Proxy) running() bool {
	select {
	case <-p.ready:
		return p.loop != nil
	default:
		return false
	}
}

// Addr is the listening address. It blocks until Serve has been called.
func (p *Proxy) Addr() net.Addr {
	<-p.ready
	return p.addr
}

// ShutdownMode says how Shutdown ends the clients' work.
type ShutdownMode int

const (
	// SafeShutdown stops accepting clients, closes the clients that are
	// between transactions and lets the others finish their transaction
	// (session clients their session), for up to ShutdownTimeout when it
	// is not 0 - PgBouncer 1.18's SIGINT.
	SafeShutdown ShutdownMode = iota
	// ImmediateShutdown closes every connection at once - PgBouncer 1.18's
	// SIGTERM and the console's SHUTDOWN.
	ImmediateShutdown
)

// Shutdown makes Serve stop as mode says, as if its context were done. An
// ImmediateShutdown also cuts short a SafeShutdown in progress. It does
// not wait; Serve returns when everything is closed.
func (p *Proxy) Shutdown(mode ShutdownMode) {
	if mode == ImmediateShutdown {
		p.hurryOne.Do(func() { close(p.hurry) })
	}
	p.reqOnce.Do(func() { close(p.stopReq) })
}

func (p *Proxy) stoppingNow() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// shutdown closes idle clients at once, lets the others finish their
// transaction up to ShutdownTimeout, then closes everything and stops the
// loop.
func (p *Proxy) shutdown() {
	p.stopOnce.Do(func() { close(p.stopping) })
	l := p.loop
	l.call(func() {
		for _, pl := range p.loopPools {
			pl.failWaiters(func() *pgproto3.ErrorResponse { return poolerError("pgbouncer is shutting down") })
		}
	})
	// ShutdownTimeout 0 waits for every transaction, as PgBouncer does.
	var deadline time.Time
	if d := p.conf().ShutdownTimeout; d > 0 {
		deadline = time.Now().Add(d)
	}
	for {
		busy := 0
		l.call(func() {
			for _, c := range p.clientList() {
				if !c.adopted || c.gone {
					continue // a login ends with the base context
				}
				if c.server == nil || c.clean() {
					c.finish(false)
				} else {
					busy++
				}
			}
		})
		if busy == 0 || (!deadline.IsZero() && time.Now().After(deadline)) {
			break
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-p.hurry:
			t.Stop()
			deadline = time.Unix(0, 0) // past: cut now
		case <-t.C:
		}
	}
	l.call(func() {
		for _, c := range p.clientList() {
			if c.adopted {
				c.finish(true)
			}
		}
	})
	p.kill()
	l.call(func() {
		for _, pl := range p.loopPools {
			for _, s := range pl.allServers() {
				pl.closeServer(s, "proxy shutting down")
			}
		}
	})
	l.stop()
}

// janitorPeriod is how often the loop runs its periodic checks, as
// PgBouncer's janitor does.
const janitorPeriod = time.Second / 3

// tick runs on the loop after each batch of events; three times a second
// it runs the janitor's checks, as PgBouncer's janitor does: waiters past
// query_wait_timeout (so a timeout fires at the first check after it, up
// to a third of a second late, exactly as in PgBouncer and in the model's
// pooler.timeout_check), server_idle_timeout and pending logins.
func (p *Proxy) tick(now time.Time) {
	if now.Before(p.nextTick) {
		return
	}
	p.nextTick = now.Add(janitorPeriod)
	p.suspendProgress(now)
	p.statsTick(now)
	if p.pause.suspend {
		return // as PgBouncer's janitor: nothing that may surprise the process taking over
	}
	p.guardClients(now) // janitor.go
	if d := p.conf().QueryWaitTimeout; d > 0 {
		for _, pl := range p.loopPools {
			pl.expireWaiters(now, d)
		}
	}
	for _, pl := range p.loopPools {
		if d := p.conf().ServerIdleTimeout; d > 0 {
			pl.closeIdle(now, d, "server idle timeout")
		}
		// server_lifetime, min_pool_size, server_fast_close (shaping.go)
		pl.maintain(now)
		pl.launch() // waiters may need a login (e.g. after a failed one)
	}
	if d := p.conf().AutodbIdleTimeout; d > 0 {
		p.dropIdleDatabases(now, d)
	}
}

// dropIdleDatabases drops the auto-created databases (those no
// [databases] entry names) whose pools have had no client and no server for
// longer than d (autodb_idle_timeout), with their pools, as PgBouncer drops
// inactive auto-databases. It runs on the loop.
func (p *Proxy) dropIdleDatabases(now time.Time, d time.Duration) {
	if len(p.loopPools) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	busy := map[*dbCount]bool{}
	for _, pl := range p.pools { // a pool the loop does not know yet is held by its client
		if pl.inUse() {
			busy[pl.db] = true
		}
	}
	drop := map[*dbCount]bool{}
	for _, pl := range p.loopPools {
		db := pl.db
		switch {
		case !pl.auto:
		case busy[db]:
			db.idleSince = time.Time{}
		case db.idleSince.IsZero():
			db.idleSince = now
		case now.Sub(db.idleSince) > d:
			drop[db] = true
		}
	}
	if len(drop) == 0 {
		return
	}
	kept := p.loopPools[:0]
	for _, pl := range p.loopPools {
		if !drop[pl.db] {
			kept = append(kept, pl)
			continue
		}
		delete(p.pools, pl.key)
		if p.dbs[pl.key.db] == pl.db {
			delete(p.dbs, pl.key.db)
			p.logf("dropping database %q: inactive auto-database (autodb_idle_timeout %v)", pl.key.db, d)
		}
	}
	clear(p.loopPools[len(kept):])
	p.loopPools = kept
	users := map[*dbCount]bool{}
	for _, pl := range p.pools {
		users[pl.user] = true
	}
	for u, n := range p.users {
		if !users[n] {
			delete(p.users, u)
		}
	}
}

// errNoSuchDatabase refuses a client whose database no [databases] entry
// serves.
var errNoSuchDatabase = errors.New("no such database")

// getPool returns the pool of (db, user), creating it. A [databases] entry
// with a forced user makes one pool of the database for all users.
func (p *Proxy) getPool(db, user string) (*pool, error) {
	cfg := p.conf()
	ent, ps, ok := cfg.poolFor(db, user)
	if !ok {
		return nil, fmt.Errorf("%w: %s", errNoSuchDatabase, db)
	}
	if ent.User != "" {
		user = ent.User
	}
	k := poolKey{db, user}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl := p.pools[k]; pl != nil {
		pl.refs++
		return pl, nil
	}
	conf, err := p.serverConfig(ent, user)
	if err != nil {
		return nil, err
	}
	count := func(m map[string]*dbCount, k string) *dbCount {
		if m[k] == nil {
			m[k] = &dbCount{}
		}
		return m[k]
	}
	// A database no [databases] entry names is auto-created (the upstream
	// or the "*" entry serves it): autodb_idle_timeout may drop it.
	auto := true
	for _, d := range cfg.Databases {
		if d.Name == db {
			auto = false
		}
	}
	pl := &pool{px: p, key: k, conf: conf, db: count(p.dbs, db), user: count(p.users, user),
		servers: map[*server]struct{}{}, entry: ent, refs: 1, auto: auto, tlsKey: cfg.serverTLSKey()}
	pl.apply(ps)
	pl.psOn = cfg.MaxPreparedStatements > 0 && pl.mode != poolmode.Session
	pl.psMax = cfg.MaxPreparedStatements
	p.pools[k] = pl
	// Posted under p.mu: before anything a client of the pool posts.
	p.loop.post(func() { p.loopPools = append(p.loopPools, pl) })
	return pl, nil
}

// serverConfig is how the pool of database entry ent and user logs in to
// PostgreSQL: the upstream URL's settings for the fallback entry, else the
// entry's own host, port and dbname; the entry's forced user and password,
// else the client's user with its auth_file or auth_query secret (or the
// upstream's password), as useServerLogin sets it up.
// It runs under p.mu.
func (p *Proxy) serverConfig(ent poolconf.Database, user string) (*pgconn.Config, error) {
	var conf *pgconn.Config
	if ent.Host == upstreamHost {
		conf = p.upstream.Copy()
	} else {
		var err error
		conf, err = pgconn.ParseConfig(fmt.Sprintf("host=%s port=%d sslmode=disable", connValue(ent.Host), ent.Port))
		if err != nil {
			return nil, fmt.Errorf("database %s: %w", ent.Name, err)
		}
		conf.Password = ""
	}
	conf.Database = ent.Name
	if ent.DBName != "" {
		conf.Database = ent.DBName
	}
	conf.User = user
	if ent.User != "" {
		conf.User, conf.Password = ent.User, ent.Password
	}
	if st := p.srvTLS.Load(); st != nil && (ent.Host != upstreamHost || !p.upOwnTLS) {
		st.apply(conf)
	}
	for k, v := range map[string]string{"client_encoding": ent.ClientEncoding, "datestyle": ent.DateStyle, "timezone": ent.TimeZone} {
		if v != "" {
			conf.RuntimeParams[k] = v
		}
	}
	p.useServerLogin(conf, ent) // the password or the client's credentials (serverauth.go)
	// Out of descriptors, a spare makes room for the dial (fdreserve.go).
	conf.DialFunc = p.spareDial(conf.DialFunc)
	return conf, nil
}

// connValue quotes a keyword/value connection string value.
func connValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// poolList lists the pools in (database, user) order.
func (p *Proxy) poolList() []*pool {
	p.mu.Lock()
	out := make([]*pool, 0, len(p.pools))
	for _, pl := range p.pools {
		out = append(out, pl)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].key.db != out[j].key.db {
			return out[i].key.db < out[j].key.db
		}
		return out[i].key.user < out[j].key.user
	})
	return out
}

// kickDB lets the other pools of from's database, and of its user, launch
// logins once one of its servers has closed (max_db_connections,
// max_user_connections).
func (p *Proxy) kickDB(from *pool) {
	if from.maxDB == 0 && from.maxUser == 0 {
		return
	}
	for _, pl := range p.poolList() {
		if pl != from && (pl.key.db == from.key.db || pl.user == from.user) {
			pl.launch()
		}
	}
}

// evictIdle closes one idle server of another pool of the same database so
// that blocked can grow (PgBouncer's evict_connection).
func (p *Proxy) evictIdle(blocked *pool) {
	for _, pl := range p.poolList() {
		if pl != blocked && pl.key.db == blocked.key.db && pl.evictOldestIdle() {
			return
		}
	}
}

// addClient registers a logged-in client for SHOW CLIENTS and cancels.
func (p *Proxy) addClient(c *client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.keys[cancelKey(c.pid, c.secret)] != nil { // keys name clients: no two alike
		c.secret += cancelTTLMask + 1 // the peering TTL bits stay (peering.go)
	}
	p.keys[cancelKey(c.pid, c.secret)] = c
}

// removeClient forgets a client that has left and adds its counters to its
// pool's. It runs on the loop.
func (p *Proxy) removeClient(c *client) {
	p.mu.Lock()
	k := cancelKey(c.pid, c.secret)
	ok := p.keys[k] == c
	if ok {
		delete(p.keys, k)
		if c.pool != nil {
			c.pool.refs--
		}
	}
	p.mu.Unlock()
	if ok && c.pool != nil {
		if c.adopted {
			c.pool.clients--
		} else {
			c.pool.counts.logins++ // a login that ended before the loop adopted it
		}
	}
}

// dropClient is removeClient for a client that leaves before the loop
// adopted it.
func (p *Proxy) dropClient(c *client) {
	if !p.loop.post(func() { p.removeClient(c) }) {
		p.mu.Lock()
		if k := cancelKey(c.pid, c.secret); p.keys[k] == c {
			delete(p.keys, k)
			if c.pool != nil {
				c.pool.refs--
			}
		}
		p.mu.Unlock()
	}
}

func (p *Proxy) clientList() []*client {
	p.mu.Lock()
	out := make([]*client, 0, len(p.keys))
	for _, c := range p.keys {
		out = append(out, c)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func cancelKey(pid, secret uint32) uint64 { return uint64(pid)<<32 | uint64(secret) }

func (p *Proxy) logf(format string, args ...any) {
	if p.conf().Logf != nil {
		p.conf().Logf(format, args...)
	}
}

func (p *Proxy) debugf(format string, args ...any) {
	if p.conf().Verbose {
		p.logf(format, args...)
	}
}
