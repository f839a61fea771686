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
	BytesPerClient    = 900 // a closed client of 3 transactions: 986 MB of RSS at a million, 2.68 GB at three million
	bytesPerRunBase   = 4 << 20
	bytesHistograms   = 16 << 20
	concurrentOpenMin = 1000
)

// Estimate is the expected cost of one run of c (one replication): the
// sum over its classes.
func (c Config) Estimate() Cost {
	perStmt := float64(eventsPerStmt)
	if c.Server.Cores > 0 {
		perStmt += 2
	}
	if c.Pooler.CPUPerMsg > 0 || c.Pooler.Wakeup > 0 {
		perStmt += 2
	}
	var txns, events, clients float64
	for _, cl := range c.ClassList() {
		w := cl.Workload
		var sessions, inFlight float64
		if w.Open() {
			sessions = w.ArrivalRate * w.Duration.Seconds()
			// Sessions in flight: Little's law with a generous session time.
			inFlight = max(concurrentOpenMin, w.ArrivalRate*1)
		} else {
			sessions = float64(w.Clients)
			inFlight = sessions
		}
		t := sessions * w.MeanTxnsPerSession()
		txns += t
		events += t*float64(w.StmtsPerTxn)*perStmt + sessions*eventsPerSession
		clients += inFlight
	}
	bytes := bytesPerRunBase + min(txns, sim.ExactLimit)*bytesPerTxn + clients*BytesPerClient
	if txns > sim.ExactLimit {
		bytes += bytesHistograms
	}
	return Cost{Txns: txns, Events: events, Bytes: bytes}
}
