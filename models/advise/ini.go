package advise

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/poolsim/poolsim/models/poolmode"
)

// ErrNoAnswer is returned by INI for advice without an answer.
var ErrNoAnswer = errors.New("no configuration qualifies, so there is no pgbouncer.ini to write")

// INI is the answer as a pgbouncer.ini: one [databases] entry per database
// with its pools' pool_size and min_pool_size (the largest of them: every
// pool starts open, as advise ran them), pool_mode and max_db_connections
// (their sum: the budget held at the pooler), [users] entries where a
// user's pool differs from its database's (pool_mode, max_user_connections
// as its pool size), and the [pgbouncer] settings the answer rests on
// (max_client_conn, max_prepared_statements, query_wait_timeout). The
// application side - how many connections each class opens - is in
// comments, as are the pools that go direct. Host, port and
// authentication are placeholders to set as deployed.
func INI(a *Advice, scenario string) (string, error) {
	if !a.Answer {
		return "", ErrNoAnswer
	}
	w := &iniWriter{}
	w.header(a, scenario)
	dbs := w.databasesOf(a)
	if len(dbs) == 0 {
		return "", errors.New("every pool of the answer connects directly to PostgreSQL: there is no PgBouncer to configure")
	}
	first := w.databases(dbs)
	w.pgbouncer(a, first)
	return w.b.String(), nil
}

// iniWriter writes a pgbouncer.ini line by line.
type iniWriter struct{ b strings.Builder }

func (w *iniWriter) p(format string, args ...any) { fmt.Fprintf(&w.b, format+"\n", args...) }

// dbEntry is a database and the pooled pools that use it.
type dbEntry struct {
	name  string
	pools []*Pool
}

// header is the comments: the answer, its budget, the application side.
func (w *iniWriter) header(a *Advice, scenario string) {
	w.p(";; pgbouncer.ini written by poolsim advise %s (seed %d)", scenario, a.Final.Seed)
	w.p(";; answer: %s", a.Split())
	w.p(";; budget: max_connections %d - %d superuser_reserved_connections - headroom %d = %d server connections; the pools spend %d",
		a.Budget.MaxConnections, a.Budget.SuperuserReserved, a.Budget.Headroom, a.Budget.Total, a.Spend)
	if a.MaxPrepared > 0 {
		w.p(";; max_prepared_statements needs PgBouncer 1.21 or later (1.18 refuses the key)")
	}
	w.p(";; the application side (client connections each class opens at most):")
	for _, c := range a.Classes {
		name := c.Name
		if name == "" {
			name = "the workload"
		}
		n := "one per arrival"
		if c.Conns > 0 {
			n = fmt.Sprintf("%d", c.Conns)
		}
		w.p(";;   %s -> pool %s: %s", name, c.Pool, n)
	}
}

// databasesOf groups the pooled pools by database, in pool order, and
// notes the direct ones.
func (w *iniWriter) databasesOf(a *Advice) []*dbEntry {
	var dbs []*dbEntry
	for _, pl := range a.Pools {
		if pl.Choice == nil {
			continue
		}
		if pl.Choice.Mode == poolmode.Direct {
			w.p(";; pool %s (database %s, user %s) connects straight to PostgreSQL: %d server connections, not through PgBouncer", pl.Name, pl.Database, pl.User, pl.Choice.Spend)
			continue
		}
		i := slices.IndexFunc(dbs, func(d *dbEntry) bool { return d.name == pl.Database })
		if i < 0 {
			dbs = append(dbs, &dbEntry{name: pl.Database})
			i = len(dbs) - 1
		}
		dbs[i].pools = append(dbs[i].pools, pl)
	}
	return dbs
}

// databases writes [databases] and [users]: each database's own pool_size
// and pool_mode are its largest pool's, and the others differ through
// their users. It returns the first database's largest pool.
func (w *iniWriter) databases(dbs []*dbEntry) *Pool {
	users := map[string][]*Pool{}
	for _, d := range dbs {
		for _, pl := range d.pools {
			users[pl.User] = append(users[pl.User], pl)
		}
	}
	w.p("")
	w.p("[databases]")
	var userLines []string
	var first *Pool
	for _, d := range dbs {
		main, sum := d.pools[0], 0
		for _, pl := range d.pools {
			sum += pl.Choice.Size
			if pl.Choice.Size > main.Choice.Size {
				main = pl
			}
		}
		if first == nil {
			first = main
		}
		size, mode := main.Choice.Size, main.Choice.Mode
		w.p("%s = host=127.0.0.1 port=5432 dbname=%s pool_size=%d min_pool_size=%d pool_mode=%s max_db_connections=%d", d.name, d.name, size, size, mode, sum)
		for _, pl := range d.pools {
			if l := userLine(pl, size, mode, users[pl.User]); l != "" {
				userLines = append(userLines, l)
			}
		}
	}
	slices.Sort(userLines)
	userLines = slices.Compact(userLines)
	if len(userLines) > 0 {
		w.p("")
		w.p("[users]")
		for _, l := range userLines {
			w.p("%s", l)
		}
	}
	return first
}

// userLine is pool pl's [users] entry, where it differs from its
// database's size and mode ("" where it does not): a smaller pool is
// bounded by max_user_connections, the sum of its user's pools.
func userLine(pl *Pool, size int, mode poolmode.Mode, same []*Pool) string {
	var opts []string
	if pl.Choice.Mode != mode {
		opts = append(opts, "pool_mode="+pl.Choice.Mode.String())
	}
	if pl.Choice.Size < size || len(same) > 1 {
		n := 0
		for _, q := range same {
			n += q.Choice.Size
		}
		opts = append(opts, fmt.Sprintf("max_user_connections=%d", n))
	}
	if len(opts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s = %s", pl.User, strings.Join(opts, " "))
}

// pgbouncer writes [pgbouncer]: the listener and authentication as
// placeholders, and the settings the answer rests on.
func (w *iniWriter) pgbouncer(a *Advice, first *Pool) {
	w.p("")
	w.p("[pgbouncer]")
	w.p("listen_addr = 127.0.0.1")
	w.p("listen_port = 6432")
	w.p(";auth_type = scram-sha-256                ; as deployed")
	w.p(";auth_file = /etc/pgbouncer/userlist.txt  ; as deployed")
	w.p("pool_mode = %s", first.Choice.Mode)
	w.p("default_pool_size = %d", first.Choice.Size)
	w.p("max_client_conn = %d", a.MaxClientConn)
	w.p("query_wait_timeout = %g", a.Final.Pooler.QueryWaitTimeout.Seconds())
	if a.MaxPrepared > 0 {
		w.p("max_prepared_statements = %d", a.MaxPrepared)
	}
}
