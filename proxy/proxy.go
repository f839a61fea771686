package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/poolmode"
)

// Proxy is a PgBouncer-style pooler. Create it with New, run it with Serve
// or ListenAndServe; it stops when their context is done.
type Proxy struct {
	cfg      Config
	upstream *pgconn.Config
	secrets  map[string]string // auth_file: user -> password or SCRAM secret

	ready    chan struct{} // closed when the listener is known
	addr     net.Addr
	stopping chan struct{} // closed when graceful shutdown starts
	stopOnce sync.Once
	base     context.Context // cancelled when everything must close
	kill     context.CancelFunc
	wg       sync.WaitGroup // every goroutine the proxy starts
	started  time.Time
	waits    waitLog

	mu       sync.Mutex
	pools    map[poolKey]*pool
	dbs      map[string]*dbCount
	clients  map[*client]struct{}
	keys     map[uint64]*client // BackendKeyData -> client, for cancels
	nclients int                // clients that count against max_client_conn
	served   bool

	stats proxyStats

	// Prepared statements are tracked in transaction and statement mode
	// with MaxPreparedStatements > 0 (PgBouncer's
	// is_prepared_statements_enabled); ps is the proxy-wide registry.
	psOn bool
	ps   psRegistry
}

type proxyStats struct {
	refusedMaxClient, waitTimeouts atomic.Int64
}

// New checks cfg and builds a proxy. Nothing is opened until Serve.
func New(cfg Config) (*Proxy, error) {
	if cfg.WaitLog == 0 {
		cfg.WaitLog = DefaultWaitLog
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("proxy config: %w", err)
	}
	up, err := pgconn.ParseConfig(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("proxy config: upstream: %w", err)
	}
	p := &Proxy{
		cfg:      cfg,
		upstream: up,
		ready:    make(chan struct{}),
		stopping: make(chan struct{}),
		pools:    map[poolKey]*pool{},
		dbs:      map[string]*dbCount{},
		clients:  map[*client]struct{}{},
		keys:     map[uint64]*client{},
		waits:    waitLog{max: cfg.WaitLog},
		psOn:     cfg.MaxPreparedStatements > 0 && cfg.Mode != poolmode.Session,
	}
	if cfg.AuthType == AuthSCRAM {
		if p.secrets, err = loadAuthFile(cfg.AuthFile); err != nil {
			return nil, fmt.Errorf("proxy config: auth_file: %w", err)
		}
	}
	return p, nil
}

// ListenAndServe listens on cfg.Listen and serves until ctx is done.
func (p *Proxy) ListenAndServe(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.cfg.Listen)
	if err != nil {
		return fmt.Errorf("proxy listen: %w", err)
	}
	return p.Serve(ctx, ln)
}

// Serve accepts clients on ln until ctx is done, then shuts down gracefully:
// it stops accepting, lets linked clients finish their transactions for up
// to ShutdownTimeout, closes every connection and returns once every
// goroutine it started has ended. It closes ln. A Proxy serves once.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	p.mu.Lock()
	if p.served {
		p.mu.Unlock()
		return errors.New("proxy serve: already served")
	}
	p.served = true
	p.mu.Unlock()
	p.addr = ln.Addr()
	close(p.ready)
	if err := checkListen(ln.Addr().String(), p.cfg.AuthType); err != nil {
		_ = ln.Close()
		return fmt.Errorf("proxy serve: %w", err)
	}
	p.base, p.kill = context.WithCancel(context.WithoutCancel(ctx))
	p.started = time.Now()

	acceptErr := make(chan error, 1)
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		acceptErr <- p.accept(ln)
	}()
	go p.janitor()

	var err error
	select {
	case <-ctx.Done():
	case err = <-acceptErr:
		err = fmt.Errorf("proxy accept: %w", err)
	}
	_ = ln.Close()
	p.shutdown()
	p.wg.Wait()
	return err
}

// Addr is the listening address. It blocks until Serve has been called.
func (p *Proxy) Addr() net.Addr {
	<-p.ready
	return p.addr
}

func (p *Proxy) accept(ln net.Listener) error {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if p.stoppingNow() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return err
		}
		p.wg.Add(1)
		go p.handle(conn)
	}
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
// transaction up to ShutdownTimeout, then closes everything.
func (p *Proxy) shutdown() {
	p.stopOnce.Do(func() { close(p.stopping) })
	for _, pl := range p.poolList() {
		pl.failWaiters(func() *pgproto3.ErrorResponse { return poolerError("pgbouncer is shutting down") })
	}
	deadline := time.NewTimer(p.cfg.ShutdownTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := 0
		for _, c := range p.clientList() {
			c.mu.Lock()
			clean := c.server == nil || c.cleanLocked()
			c.mu.Unlock()
			if clean {
				_ = c.conn.Close()
			}
			n++
		}
		if n == 0 {
			break
		}
		select {
		case <-deadline.C:
			for _, c := range p.clientList() {
				_ = c.conn.Close()
			}
			n = 0
		case <-tick.C:
		}
		if n == 0 {
			break
		}
	}
	p.kill()
	for _, pl := range p.poolList() {
		for _, s := range pl.allServers() {
			pl.closeServer(s, "proxy shutting down")
		}
	}
}

// janitor closes servers idle for longer than server_idle_timeout, checking
// three times a second as PgBouncer does.
func (p *Proxy) janitor() {
	defer p.wg.Done()
	t := time.NewTicker(time.Second / 3)
	defer t.Stop()
	for {
		select {
		case <-p.stopping:
			return
		case <-t.C:
		}
		for _, pl := range p.poolList() {
			if d := p.cfg.ServerIdleTimeout; d > 0 {
				pl.closeIdle(d, "server idle timeout")
			}
			pl.kick() // waiters may need a login (e.g. after a failed one)
		}
	}
}

// getPool returns the pool of (db, user), creating it.
func (p *Proxy) getPool(db, user string) *pool {
	k := poolKey{db, user}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl := p.pools[k]; pl != nil {
		return pl
	}
	d := p.dbs[db]
	if d == nil {
		d = &dbCount{}
		p.dbs[db] = d
	}
	conf := p.upstream.Copy()
	conf.Database = db
	conf.User = user
	pl := &pool{px: p, key: k, conf: conf, db: d, servers: map[*server]struct{}{}}
	p.pools[k] = pl
	return pl
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

// kickDB lets the other pools of from's database launch logins once a server
// of the database has closed (max_db_connections).
func (p *Proxy) kickDB(from *pool) {
	if p.cfg.MaxDBConnections == 0 {
		return
	}
	for _, pl := range p.poolList() {
		if pl != from && pl.key.db == from.key.db {
			pl.kick()
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

// addClient registers a logged-in client; it fails when max_client_conn
// clients are connected (the admin console is exempt).
func (p *Proxy) addClient(c *client, counted bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if counted {
		if p.nclients >= p.cfg.MaxClientConn {
			p.stats.refusedMaxClient.Add(1)
			return false
		}
		p.nclients++
		p.clients[c] = struct{}{}
		p.keys[cancelKey(c.pid, c.secret)] = c
	}
	return true
}

// removeClient forgets a client that has left and adds its counters to its
// pool's.
func (p *Proxy) removeClient(c *client) {
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	p.mu.Lock()
	if _, ok := p.clients[c]; ok {
		delete(p.clients, c)
		delete(p.keys, cancelKey(c.pid, c.secret))
		p.nclients--
		if c.pool != nil {
			c.pool.mu.Lock()
			c.pool.clients--
			c.pool.retired.add(&st)
			c.pool.mu.Unlock()
		}
	}
	p.mu.Unlock()
}

func (p *Proxy) clientList() []*client {
	p.mu.Lock()
	out := make([]*client, 0, len(p.clients))
	for c := range p.clients {
		out = append(out, c)
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func cancelKey(pid, secret uint32) uint64 { return uint64(pid)<<32 | uint64(secret) }

func (p *Proxy) logf(format string, args ...any) {
	if p.cfg.Logf != nil {
		p.cfg.Logf(format, args...)
	}
}

func (p *Proxy) debugf(format string, args ...any) {
	if p.cfg.Verbose {
		p.logf(format, args...)
	}
}
