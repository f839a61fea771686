package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/poolsim/poolsim/models/system"
	"github.com/poolsim/poolsim/sim"
)

// Prepared-statement workloads (Spec.Prepared): every statement is one of
// workload.statements fixed texts (Statement.PreparedText), chosen with
// workload.zipf popularity, and runs with the extended protocol as the
// model's driver does: an unnamed Parse, Bind, Execute, Sync every time
// until the text has run workload.prepare_threshold times on the
// connection (0: always), then a named Parse once — in the same round trip
// as its first Bind/Execute, as JDBC does — and Bind/Execute/Sync after
// that. Names are unique per client ("poolsim_<client>_<k>"), as the
// model's pairs of connection and statement are, so two clients never
// collide on a name at a server that does not track them. BEGIN and COMMIT
// of a transaction block travel unnamed in the same round trip as the first
// and last statements, so a transaction still costs stmts_per_txn round
// trips.
//
// A Bind of a statement the server lacks fails with SQLSTATE 26000
// (prepared statement does not exist): the transaction fails — rolled back
// if a block is open — and the client goes on with its next transaction,
// still believing the statement prepared, as the model's driver does.

// sqlStateNoStatement is invalid_sql_statement_name: "prepared statement
// ... does not exist".
const sqlStateNoStatement = "26000"

// PreparedCounts are what the clients' drivers did with prepared
// statements.
type PreparedCounts struct {
	Unnamed     int64 // executions with an unnamed Parse (each a parse at the server)
	NamedParses int64 // named Parses sent (the first prepared execution of a text on a connection)
	Binds       int64 // executions of named statements (Bind), failed ones included
	Hits        int64 // executions of named statements with no Parse of the driver's that succeeded
	Failed      int64 // executions that failed with "prepared statement does not exist"
	FailedTxns  int64 // transactions those failures ended
}

func (a *PreparedCounts) add(b PreparedCounts) {
	a.Unnamed += b.Unnamed
	a.NamedParses += b.NamedParses
	a.Binds += b.Binds
	a.Hits += b.Hits
	a.Failed += b.Failed
	a.FailedTxns += b.FailedTxns
}

// zipfCDF is the cumulative popularity of k statements with skew z, as the
// model draws them.
func zipfCDF(k int, z float64) []float64 {
	cdf := make([]float64, max(1, k))
	var sum float64
	for i := range cdf {
		sum += 1 / math.Pow(float64(i+1), z)
		cdf[i] = sum
	}
	for i := range cdf {
		cdf[i] /= sum
	}
	return cdf
}

// preparedState is one client's driver state.
type preparedState struct {
	rng      *sim.Rand
	execs    []int32
	prepared []bool
	n        PreparedCounts
}

// RoundTrip sends what is queued on conn's frontend and a Sync, and reads
// up to ReadyForQuery: the first error the server reported (a *PgError)
// and the transaction status. A connection error is returned as is.
func RoundTrip(ctx context.Context, conn *pgconn.PgConn) (status byte, pgErr error, err error) {
	f := conn.Frontend()
	f.SendSync(&pgproto3.Sync{})
	if err := f.Flush(); err != nil {
		return 0, nil, fmt.Errorf("load: send: %w", err)
	}
	for {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return 0, pgErr, err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if pgErr == nil {
				pgErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			return m.TxStatus, pgErr, nil
		}
	}
}

// QueueExec queues on conn's frontend an execution of statement name
// ("" = unnamed) with text params: a Parse of sql under that name first
// when parse is set (always, for the unnamed statement), then Bind and
// Execute. RoundTrip sends it.
func QueueExec(conn *pgconn.PgConn, name, sql string, parse bool, params ...string) {
	f := conn.Frontend()
	if parse {
		f.SendParse(&pgproto3.Parse{Name: name, Query: sql})
	}
	var ps [][]byte
	for _, p := range params {
		ps = append(ps, []byte(p))
	}
	f.SendBind(&pgproto3.Bind{PreparedStatement: name, Parameters: ps})
	f.SendExecute(&pgproto3.Execute{})
}

// preparedSession runs c's transactions with prepared statements and
// closes its connection.
func (r *run) preparedSession(ctx context.Context, c *client) {
	defer r.hangUp(c)
	w := r.spec.Workload
	st := r.spec.Statement
	blocks := r.spec.Blocks && w.StmtsPerTxn > 1
	ps := c.ps
	for txn := range w.TxnsPerSession {
		var t0 time.Time
		failed := false
		for s := range w.StmtsPerTxn {
			k := min(sort.SearchFloat64s(r.cdf, ps.rng.Float64()), len(r.cdf)-1)
			ps.execs[k]++
			d := w.Query.Sample(c.queryRNG) + w.CPU.Sample(c.queryRNG)
			if blocks && s == 0 {
				QueueExec(c.conn, "", "BEGIN", true)
			}
			named := w.PrepareThreshold > 0 && int(ps.execs[k]) >= w.PrepareThreshold
			name, parse := "", true
			if named {
				name = "poolsim_" + strconv.Itoa(c.index) + "_" + strconv.Itoa(k+1)
				parse = !ps.prepared[k]
				ps.prepared[k] = true
				ps.n.Binds++
				if parse {
					ps.n.NamedParses++
				}
			} else {
				ps.n.Unnamed++
			}
			QueueExec(c.conn, name, r.texts[k], parse, st.Param(d.Duration()))
			if blocks && s == w.StmtsPerTxn-1 {
				QueueExec(c.conn, "", "COMMIT", true)
			}
			t := time.Now()
			if s == 0 {
				t0 = t
			}
			c.ran = true
			status, pgErr, err := RoundTrip(ctx, c.conn)
			end := time.Now()
			if err == nil && pgErr != nil {
				var pe *pgconn.PgError
				if named && !parse && errors.As(pgErr, &pe) && pe.Code == sqlStateNoStatement {
					ps.n.Failed++
					ps.n.FailedTxns++
					if status != 'I' {
						if _, err = c.conn.Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
							c.outcome, c.err = classify(err), err
							return
						}
					}
					failed = true
					break // the transaction failed; the next one starts after the think
				}
				err = pgErr
			}
			if err != nil {
				c.outcome, c.err = classify(err), err
				return
			}
			if named && !parse {
				ps.n.Hits++
			}
			c.statementDone(s, s == w.StmtsPerTxn-1, t0, t, end)
			if s == w.StmtsPerTxn-1 {
				c.okReqs++
				c.reqLat = append(c.reqLat, c.lat[len(c.lat)-1])
			}
			if txn == w.TxnsPerSession-1 && s == w.StmtsPerTxn-1 {
				break
			}
			if !r.pause(ctx, c, r.spec.Workload.Think, &c.think) {
				return
			}
		}
		if failed && txn < w.TxnsPerSession-1 {
			if !r.pause(ctx, c, r.spec.Workload.Think, &c.think) {
				return
			}
		}
	}
}

// preparedSetup fills r's statement texts and popularity when the spec
// runs prepared statements.
func (r *run) preparedSetup() error {
	w := r.spec.Workload
	switch r.spec.Statement.Kind {
	case KindCPU, KindSleep:
	default:
		return fmt.Errorf("load: prepared statements need a sleep or cpu statement, not %q", r.spec.Statement.Kind)
	}
	k := max(1, w.Statements)
	r.cdf = zipfCDF(k, w.Zipf)
	r.texts = make([]string, k)
	for i := range r.texts {
		r.texts[i] = r.spec.Statement.PreparedText(i)
	}
	return nil
}

// PreparedWorkload reports whether w needs the prepared-statement driver:
// several statement texts, a parse cost or a prepare threshold.
func PreparedWorkload(w system.Workload) bool {
	return w.Statements > 1 || w.Parse.MeanValue() > 0 || w.PrepareThreshold > 0
}
