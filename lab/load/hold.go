package load

import "strconv"

// WITH HOLD cursors (Spec.Hold), as a report job uses them: each request
// declares a holdable cursor in its first transaction, fetches from it at
// the start of every later transaction of the request, and closes it after
// its last one. A holdable cursor lives in the server session, not in a
// transaction, so it survives the COMMIT only where the client keeps its
// server between transactions: in session pooling, or straight to
// PostgreSQL. Anywhere else the FETCH of a later transaction lands on a
// server without the cursor and fails (SQLSTATE 34000), which ends the
// client as any other error does: the run shows it.
//
// The cursor's query is a generate_series of a few rows: materialising it
// at the COMMIT and fetching one row cost microseconds, small against the
// statements' own times. The extra commands travel in the Query message of
// the statement they go with, so a transaction still costs stmts_per_txn
// round trips, as in the model.

// holdCursor is the cursor's name.
const holdCursor = "poolsim_hold"

// holdClose ends a request's cursor.
const holdClose = "CLOSE " + holdCursor

// holdSQL is statement s of transaction txn of a request of n transactions
// of stmts statements: the first statement of the request's first
// transaction declares the cursor, the first of every later one fetches a
// row from it.
func holdSQL(sql string, txn, n, s, stmts int) string {
	if s != 0 {
		return sql
	}
	if txn == 0 {
		return "DECLARE " + holdCursor + " CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, " + strconv.Itoa(max(1, n)) + ") g; " + sql
	}
	return "FETCH NEXT FROM " + holdCursor + "; " + sql
}
