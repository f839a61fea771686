package system

import "github.com/poolsim/poolsim/sim"

// Cost is what one run of a configuration is expected to take, estimated
// from its size before it runs (Estimate). The constants are measured on
// the model (events per statement and per session, bytes per transaction
// kept for percentiles, bytes per client in flight) and err on the high
// side; the time assumes EventsPerSecond on one core.
type Cost struct {
	Txns   float64 // transactions attempted
	Events float64 // simulation events handled
	Bytes  float64 // peak memory of the run
}

// The estimate's constants (measured: a statement costs about 4 events, 6
// on a CPU server, 8 with a pooler thread; a transaction keeps about 11
// samples of 8 bytes up to the recorders' exact limit (sim.ExactLimit),
// plus the requests' and sessions' and the collector's slack, and past it
// their histograms and the copies the steady window cuts hold a few
// megabytes whatever the run's length; a client in flight holds its user,
// connection and pending events).
const (
	EventsPerSecond   = 5e6
	eventsPerStmt     = 4
	eventsPerSession  = 4
	bytesPerTxn       = 300
	bytesPerClient    = 500
	bytesPerRunBase   = 4 << 20
	bytesHistograms   = 16 << 20
	concurrentOpenMin = 1000
)

// Estimate is the expected cost of one run of c (one replication).
func (c Config) Estimate() Cost {
	w := c.Workload
	var sessions, clients float64
	if w.Open() {
		sessions = w.ArrivalRate * w.Duration.Seconds()
		// Sessions in flight: Little's law with a generous session time.
		clients = max(concurrentOpenMin, w.ArrivalRate*1)
	} else {
		sessions = float64(w.Clients)
		clients = sessions
	}
	txns := sessions * w.MeanTxnsPerSession()
	perStmt := float64(eventsPerStmt)
	if c.Server.Cores > 0 {
		perStmt += 2
	}
	if c.Pooler.CPUPerMsg > 0 || c.Pooler.Wakeup > 0 {
		perStmt += 2
	}
	events := txns*float64(w.StmtsPerTxn)*perStmt + sessions*eventsPerSession
	bytes := bytesPerRunBase + min(txns, sim.ExactLimit)*bytesPerTxn + clients*bytesPerClient
	if txns > sim.ExactLimit {
		bytes += bytesHistograms
	}
	return Cost{Txns: txns, Events: events, Bytes: bytes}
}
