package load

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/poolsim/poolsim/sim"
)

// Workers (workload.workers), the model's workers live: Workers goroutines,
// each holding one persistent connection, serve Poisson requests from an
// application queue.
//
//   - Before time zero every worker connects (at once, as closed clients
//     do, then Spec.Warm on its connection); a refused worker is counted
//     and starts without a connection. After the barrier and Spec.Settle
//     the workers are idle in index order, the order the model's connect
//     at t = 0.
//   - From time zero requests arrive on the seeded schedule of an open
//     workload (Spec.ArrivalStream: the model's arrivals) for the
//     workload's duration and join a FIFO queue; the longest-idle worker
//     takes the head. A request's transaction count is the model's draw
//     for it (the "requests" stream at SessionBase + its arrival number),
//     its statement and app times are drawn from its own streams, so a
//     request is the same whichever worker runs it.
//   - A request's latency runs from its scheduled arrival, so the queue's
//     wait counts, as in the model; a transaction's from its first
//     statement sent (for a worker that reconnects first, from the
//     connect).
//   - An error fails the request: a refusal or query_wait_timeout (or any
//     other error) closes the worker's connection, and the worker
//     connects again when it takes its next request.
//   - Arrivals are over at the workload's duration (as in the model, not
//     at the last arrival); then the workers finish the queue and each
//     disconnects when it is free and the queue is empty.
//
// Result.Sessions counts the workers' connections that sent a statement;
// Refused every refused connection attempt, WaitTimeouts every
// query_wait_timeout, Failed every request another error ended.

// request is one arrival waiting for a worker.
type request struct {
	n  int       // its arrival number (the model's, in its class)
	at time.Time // its scheduled arrival
}

// worker is one worker goroutine's state; only its goroutine touches it,
// but for work, which the dispatcher sends to while it is idle.
type worker struct {
	c                            *client
	work                         chan request // one request, or closed: disconnect
	refusals, timeouts, failures int64
	firstErr                     error // the first error of another kind
	conns                        int64 // connections that sent a statement
	used                         bool  // the current connection sent a statement
}

// queue is the application queue and the idle workers, longest idle
// first.
type queue struct {
	mu    sync.Mutex
	reqs  []request
	idle  []*worker
	ended bool // arrivals are over
}

// workers runs a workers workload.
func (r *run) workers(ctx context.Context) (*Result, error) {
	w := r.spec.Workload
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ws := make([]*worker, w.Workers)
	var connected, done sync.WaitGroup
	for i := range ws {
		wk := &worker{c: r.newClient(i), work: make(chan request, 1)}
		ws[i] = wk
		connected.Add(1)
		go func() { // owner: workers; ends when the connection attempt does
			defer connected.Done()
			if !(r.connect(runCtx, wk.c) && r.warm(runCtx, wk.c)) {
				wk.count(wk.c.outcome, wk.c.err)
			}
		}()
	}
	connected.Wait()
	if r.spec.Settle > 0 {
		t := time.NewTimer(r.spec.Settle)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := ctx.Err(); err != nil {
		for _, wk := range ws {
			if wk.c.conn != nil {
				closeConn(wk.c.conn)
			}
		}
		return nil, fmt.Errorf("load: %w", err)
	}
	q := &queue{idle: append([]*worker(nil), ws...)}
	if r.spec.Started != nil {
		r.spec.Started()
	}
	t0 := time.Now()
	deadline := time.AfterFunc(r.timeout, cancel)
	defer deadline.Stop()
	for _, wk := range ws {
		done.Add(1)
		go func() { // owner: workers; ends when arrivals are over and the queue empty, or runCtx is done
			defer done.Done()
			r.serve(runCtx, q, wk)
		}()
	}
	r.arrivals(runCtx, t0, func(i int, at time.Time) { q.arrive(request{n: i, at: at}) })
	// Arrivals are over at the workload's duration, as in the model (not
	// at the last arrival): until then a free worker keeps its connection.
	end := time.NewTimer(time.Until(t0.Add(w.Duration.Duration())))
	select {
	case <-end.C:
	case <-runCtx.Done():
		end.Stop()
	}
	q.end()
	done.Wait()
	clients := make([]*client, len(ws))
	for i, wk := range ws {
		clients[i] = wk.c
		wk.c.err = nil // counted per request below, not per client
	}
	res := merge(t0, clients)
	res.Sessions = 0
	for _, wk := range ws {
		res.Sessions += wk.conns
		res.Refused += wk.refusals
		res.WaitTimeouts += wk.timeouts
		res.Failed += wk.failures
		if wk.firstErr != nil && len(res.Errors) < maxErrors && !slices.Contains(res.Errors, wk.firstErr.Error()) {
			res.Errors = append(res.Errors, wk.firstErr.Error())
		}
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("load: %w", err)
	}
	if runCtx.Err() != nil {
		return res, fmt.Errorf("load: run timed out after %v", r.timeout)
	}
	return res, nil
}

// arrive queues req, or hands it to the longest-idle worker.
func (q *queue) arrive(req request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.idle) > 0 {
		wk := q.idle[0]
		q.idle = q.idle[1:]
		wk.work <- req // it was idle: its one-slot channel is empty
		return
	}
	q.reqs = append(q.reqs, req)
}

// end tells the queue that arrivals are over: the idle workers leave.
func (q *queue) end() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ended = true
	for _, wk := range q.idle {
		close(wk.work)
	}
	q.idle = nil
}

// next is worker wk's next request: the queue's head, else one handed to
// it once it has waited at the tail of the idle workers; false when
// arrivals are over and the queue is empty, or ctx is done. A worker
// already among the idle (at time zero) only waits.
func (q *queue) next(ctx context.Context, wk *worker, idle bool) (request, bool) {
	if !idle {
		q.mu.Lock()
		if len(q.reqs) > 0 {
			req := q.reqs[0]
			q.reqs = q.reqs[1:]
			q.mu.Unlock()
			return req, true
		}
		if q.ended {
			q.mu.Unlock()
			return request{}, false
		}
		q.idle = append(q.idle, wk)
		q.mu.Unlock()
	}
	select {
	case req, ok := <-wk.work:
		return req, ok
	case <-ctx.Done():
		return request{}, false
	}
}

// serve is worker wk's life: request after request, then disconnect.
func (r *run) serve(ctx context.Context, q *queue, wk *worker) {
	defer func() {
		if wk.c.conn != nil {
			closeConn(wk.c.conn)
			wk.c.conn = nil
		}
	}()
	for idle := true; ; idle = false { // every worker starts idle, in index order
		req, ok := q.next(ctx, wk, idle)
		if !ok {
			return
		}
		r.request(ctx, wk, req)
	}
}

// request runs one request on worker wk's connection, opening a new one
// first if the worker has none.
func (r *run) request(ctx context.Context, wk *worker, req request) {
	w := r.spec.Workload
	c := wk.c
	_, per := w.Requests()
	n := r.txnsOf(r.spec.SessionBase+uint64(req.n), 0, per)
	// The request's own streams: the same draws whichever worker runs it.
	rng := sim.NewRand(r.spec.Seed, fmt.Sprintf("load query %d", req.n))
	c.thkRNG = sim.NewRand(r.spec.Seed, fmt.Sprintf("load think %d", req.n))
	blocks := r.spec.Blocks && w.StmtsPerTxn > 1
	var t0 time.Time
	if c.conn == nil {
		t0 = time.Now() // the first transaction waits for the connection
		if !r.connect(ctx, c) {
			wk.fail(c.outcome, c.err)
			return
		}
		wk.used = false
	}
	for txn := range n {
		for s := range w.StmtsPerTxn {
			sql := r.statementSQL(rng, txn, n, s, blocks)
			t := time.Now()
			if s == 0 && (txn > 0 || t0.IsZero()) {
				t0 = t
			}
			if !wk.used {
				wk.used, c.ran = true, true
				wk.conns++
			}
			_, err := c.conn.Exec(ctx, sql).ReadAll()
			end := time.Now()
			if err != nil {
				closeConn(c.conn)
				c.conn = nil
				wk.fail(classify(err), err)
				return
			}
			last := s == w.StmtsPerTxn-1
			c.statementDone(s, last, t0, t, end)
			if last && txn == n-1 {
				c.okReqs++
				c.reqLat = append(c.reqLat, sim.FromDuration(end.Sub(req.at)))
				return
			}
			if !r.pause(ctx, c, w.AppPause(), &c.app) {
				return
			}
		}
	}
}

// count records a failed connection attempt or statement of outcome o.
func (wk *worker) count(o outcome, err error) {
	switch o {
	case refused:
		wk.refusals++
	case waitTimeout:
		wk.timeouts++
	default:
		wk.failures++
		if wk.firstErr == nil {
			wk.firstErr = err
		}
	}
}

// fail ends worker wk's request with outcome o.
func (wk *worker) fail(o outcome, err error) {
	wk.c.failReqs++
	wk.count(o, err)
}
