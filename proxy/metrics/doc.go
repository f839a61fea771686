// Package metrics is the pooling proxy's Prometheus endpoint (poolsim proxy
// --metrics-listen), built with the ecosystem's client library
// (github.com/prometheus/client_golang).
//
// It exposes what the proxy's PgBouncer 1.18 console shows, read from the
// console's own views at each scrape (pooler.Proxy.Show), and what users
// ask of PgBouncer and it lacks:
//
//   - gauges from SHOW POOLS (per database, user and pool_mode: clients
//     active and waiting, servers active, idle, used, tested and logging
//     in, the oldest wait), SHOW DATABASES (pool_size, reserve_pool,
//     max_connections, current_connections, paused, disabled) and SHOW
//     LISTS (items per list);
//   - counters, not averages, per pool (database and user) where SHOW
//     STATS has them per database and averages them: transactions,
//     requests, bytes each way, server assignments, client logins, the
//     seconds spent in transactions, requests and waits, and the
//     prepared-statement counts of PgBouncer 1.21 (pooler.Proxy.Stats);
//   - histograms per pool of client wait (request reached the proxy ->
//     server linked, one per assignment), transaction time and request
//     time (first message -> ReadyForQuery), with pooler.HistogramBounds
//     as buckets.
//
// Every name starts with poolsim_proxy_; times are in seconds, sizes in
// bytes. The counters and histograms count since each pool was made: a
// pool dropped by autodb_idle_timeout takes its series with it.
//
// Cost: nothing is done per message for this package. The proxy's event
// loop keeps the counters and the histograms' bucket counts (a few integer
// comparisons per transaction, request and assignment, no lock, no
// allocation); a scrape copies them on the loop, as a console SHOW does.
package metrics
