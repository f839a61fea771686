package pooler

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

	// loop is the data plane; loopPools and nextTick belong to it.
	loop      *loop
	loopPools []*pool
	nextTick  time.Time
	values    map[string]string // interned setting values (varcache.go)

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
	err := checkListen(ln.Addr().String(), p.cfg.AuthType)
	if err == nil {
		p.loop, err = newLoop(p)
	}
	p.base, p.kill = context.WithCancel(context.WithoutCancel(ctx))
	p.started = time.Now()
	p.nextTick = p.started.Add(janitorPeriod)
	close(p.ready) // what readers of the proxy's state use is set
	if err != nil {
		p.kill()
		_ = ln.Close()
		return fmt.Errorf("proxy serve: %w", err)
	}
	l := p.loop

	acceptErr := make(chan error, 1)
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		l.run()
	}()
	go func() {
		defer p.wg.Done()
		acceptErr <- p.accept(ln)
	}()

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
	deadline := time.Now().Add(p.cfg.ShutdownTimeout)
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
		if busy == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
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

// tick runs on the loop after each batch of events: query_wait_timeout at
// once, server_idle_timeout and pending logins three times a second.
func (p *Proxy) tick(now time.Time) {
	if d := p.cfg.QueryWaitTimeout; d > 0 {
		for _, pl := range p.loopPools {
			pl.expireWaiters(now, d)
		}
	}
	if now.Before(p.nextTick) {
		return
	}
	p.nextTick = now.Add(janitorPeriod)
	for _, pl := range p.loopPools {
		if d := p.cfg.ServerIdleTimeout; d > 0 {
			pl.closeIdle(now, d, "server idle timeout")
		}
		pl.launch() // waiters may need a login (e.g. after a failed one)
	}
}

// nextWaitDeadline is when the longest wait reaches query_wait_timeout, or
// zero. It runs on the loop.
func (p *Proxy) nextWaitDeadline() time.Time {
	d := p.cfg.QueryWaitTimeout
	if d <= 0 {
		return time.Time{}
	}
	var next time.Time
	for _, pl := range p.loopPools {
		if len(pl.waiters) > 0 {
			if t := pl.waiters[0].since.Add(d); next.IsZero() || t.Before(next) {
				next = t
			}
		}
	}
	return next
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
	pl := &pool{px: p, key: k, conf: conf, db: d, servers: map[*server]struct{}{}, waitKey: p.waits.key(k)}
	p.pools[k] = pl
	// Posted under p.mu: before anything a client of the pool posts.
	p.loop.post(func() { p.loopPools = append(p.loopPools, pl) })
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
// pool's. It runs on the loop.
func (p *Proxy) removeClient(c *client) {
	p.mu.Lock()
	_, ok := p.clients[c]
	if ok {
		delete(p.clients, c)
		delete(p.keys, cancelKey(c.pid, c.secret))
		p.nclients--
	}
	p.mu.Unlock()
	if ok && c.pool != nil {
		if c.adopted {
			c.pool.clients--
		}
		c.pool.retired.add(&c.st)
	}
}

// dropClient is removeClient for a client that leaves before the loop
// adopted it.
func (p *Proxy) dropClient(c *client) {
	if !p.loop.post(func() { p.removeClient(c) }) {
		p.mu.Lock()
		if _, ok := p.clients[c]; ok {
			delete(p.clients, c)
			delete(p.keys, cancelKey(c.pid, c.secret))
			p.nclients--
		}
		p.mu.Unlock()
	}
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
