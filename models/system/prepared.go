package system

import (
	"math"
	"sort"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

// Prepared statements (seed 004, seed 000's 22%): the workload runs
// Statements distinct statement texts chosen with a Zipf skew; a driver
// switches a text to a named protocol-level prepared statement after
// PrepareThreshold executions on its connection (JDBC's prepareThreshold,
// 5 by default; 0 never). Parsing and planning costs Parse at the server
// whenever the server connection does not hold the statement.
//
// Where the prepared statement lives decides the parses: in direct and
// session mode on the client's own backend; in transaction and statement
// mode, with max_prepared_statements > 0, in the pooler's LRU cache of
// that many statements per server connection (PgBouncer injects a Parse on
// a miss and closes the least recently used); with 0, the statement stays
// on whichever server the client's Parse went to, and a later execution on
// another server fails (prepared statement does not exist).

// stmtCache is one server connection's prepared statements (LRU), or a
// client connection's own (direct, session).
type stmtCache struct {
	used map[int32]int64 // statement -> last use tick
}

// prep is the model's prepared-statement state.
type prep struct {
	on      bool
	cdf     [][]float64 // each class's Zipf popularity, cumulative
	offset  []int32     // each class's first statement number (classes run texts of their own)
	tick    int64
	servers []stmtCache       // per pooler server connection (max_prepared_statements > 0)
	owners  []map[uint64]bool // per pooler server: (connection serial, statement) pairs prepared on it (max_prepared_statements = 0)
	seen    map[int32]bool    // distinct statements prepared anywhere (the pooler's global cache)
	hits    int64             // prepared executions whose server held the statement
	misses  int64             // prepared executions that needed a Parse
	parses  int64             // Parse (and plan) done by the server
	execs   int64             // statements executed
	errors  int64             // executions that failed: statement missing on this server
}

func (p *prep) init(c Config) {
	for _, cl := range c.ClassList() {
		w := cl.Workload
		p.on = p.on || w.Statements > 1 || w.Parse.MeanValue() > 0 || w.PrepareThreshold > 0
	}
	if !p.on {
		return
	}
	var next int32
	for _, cl := range c.ClassList() {
		w := cl.Workload
		cdf := make([]float64, max(1, w.Statements))
		var sum float64
		for i := range cdf {
			sum += 1 / math.Pow(float64(i+1), w.Zipf)
			cdf[i] = sum
		}
		for i := range cdf {
			cdf[i] /= sum
		}
		p.cdf = append(p.cdf, cdf)
		p.offset = append(p.offset, next)
		next += int32(len(cdf))
	}
	p.seen = map[int32]bool{}
}

// driver is a client connection's driver state for prepared statements.
type driver struct {
	execs    map[int32]int32 // executions of each statement, for the threshold
	prepared map[int32]bool  // statements it prepared (it believes they exist)
}

func (d *driver) reset() {
	if d.execs == nil {
		d.execs, d.prepared = map[int32]int32{}, map[int32]bool{}
		return
	}
	clear(d.execs)
	clear(d.prepared)
}

// key names statement k prepared by the connection opened serial-th.
func key(serial int64, k int32) uint64 { return uint64(serial)<<24 | uint64(uint32(k)) }

// parseCost decides what connection c's next statement costs in parsing:
// the parse time, 0 when the server holds it, or fail when it is missing
// from this server (max_prepared_statements = 0 in transaction or
// statement mode).
func (m *model) parseCost(c int32) (parse sim.Time, fail bool) {
	p := &m.prep
	if !p.on {
		return 0, false
	}
	p.execs++
	cn := &m.conns[c]
	us := &m.users[cn.user]
	w := m.wl(cn.user)
	cdf := p.cdf[us.cls]
	r := m.choice.At(us.session, uint64(us.txn)<<32|uint64(uint32(us.stmt)))
	k := int32(sort.SearchFloat64s(cdf, r.Float64()))
	k = min(k, int32(len(cdf)-1)) + p.offset[us.cls]
	d := &cn.driver
	d.execs[k]++
	cost := m.draw(w.Parse, m.parse, cn.user)
	if w.PrepareThreshold == 0 || int(d.execs[k]) < w.PrepareThreshold {
		p.parses++ // an unnamed statement: parsed every time
		return cost, false
	}
	pooled := cn.mode == poolmode.Transaction || cn.mode == poolmode.Statement
	switch {
	case !pooled: // the statement lives on the client's own backend
		if d.prepared[k] {
			p.hits++
			return 0, false
		}
		d.prepared[k] = true
		p.seen[k] = true
		p.misses++
		p.parses++
		return cost, false
	case m.cfg.Pooler.MaxPreparedStatements > 0:
		p.seen[k] = true
		if p.lookup(cn.server, k, m.cfg.Pooler.MaxPreparedStatements) {
			p.hits++
			return 0, false
		}
		p.misses++
		p.parses++
		return cost, false
	default: // the pooler does not track it: it is where the Parse went
		owners := p.ownersOf(cn.server)
		ck := key(cn.serial, k)
		if !d.prepared[k] {
			d.prepared[k] = true
			owners[ck] = true
			p.misses++
			p.parses++
			return cost, false
		}
		if owners[ck] {
			p.hits++
			return 0, false
		}
		p.errors++
		return 0, true
	}
}

// lookup uses statement k on server srv's LRU cache of capacity n and
// reports whether it was there; a miss adds it, evicting the least
// recently used statement when the cache is full.
func (p *prep) lookup(srv, k int32, n int) bool {
	for int(srv) >= len(p.servers) {
		p.servers = append(p.servers, stmtCache{used: map[int32]int64{}})
	}
	c := &p.servers[srv]
	p.tick++
	if _, ok := c.used[k]; ok {
		c.used[k] = p.tick
		return true
	}
	if len(c.used) >= n {
		var oldest int32
		least := int64(math.MaxInt64)
		for s, t := range c.used {
			if t < least || (t == least && s < oldest) {
				oldest, least = s, t
			}
		}
		delete(c.used, oldest)
	}
	c.used[k] = p.tick
	return false
}

func (p *prep) ownersOf(srv int32) map[uint64]bool {
	for int(srv) >= len(p.owners) {
		p.owners = append(p.owners, map[uint64]bool{})
	}
	return p.owners[srv]
}

func (m *model) prepMetrics(mt *Metrics, wall sim.Time) {
	p := &m.prep
	if !p.on {
		return
	}
	mt.StmtExecs = p.execs
	mt.ServerParses = p.parses
	if n := p.hits + p.misses; n > 0 {
		mt.PreparedHitRate = float64(p.hits) / float64(n)
	}
	if wall > 0 {
		mt.ServerParsesPerS = float64(p.parses) / wall.Seconds()
	}
	w := m.classes[0].cfg.Workload // with classes: the first class's parse cost and text size
	saved := float64(p.execs-p.parses-p.errors) * w.Parse.MeanValue().Seconds() * 1e3
	if mt.OKTxns > 0 {
		mt.ParseMsSavedPerTxn = saved / float64(mt.OKTxns)
	}
	tracked := false
	for _, sp := range m.specs {
		tracked = tracked || sp.Mode == poolmode.Transaction || sp.Mode == poolmode.Statement
	}
	if tracked && m.cfg.Pooler.MaxPreparedStatements > 0 {
		mt.PoolerCacheMB = float64(int64(len(p.seen))*w.StmtTextSize) / (1 << 20)
	}
}
