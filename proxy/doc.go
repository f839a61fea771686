// Package proxy holds no code of its own: it is the map of the live half of
// poolsim, the parts that talk to a real PostgreSQL. Each folder below is a
// package, and an import only ever points down this list or sideways to a
// package listed before it, never back up to its parent:
//
//	proxy/pooler       the pooling proxy itself (poolsim proxy): a
//	                   PgBouncer-style pooler on the wire protocol; it
//	                   imports models/poolmode and proxy/uring and nothing
//	                   else of poolsim
//	proxy/uring        socket sends and receives batched into one system
//	                   call with Linux's io_uring, for the pooler's loop
//	proxy/metrics      the pooler's Prometheus endpoint (poolsim proxy
//	                   --metrics-listen): what its console shows, counters
//	                   and histograms per pool
//	proxy/pgcluster    a throwaway PostgreSQL cluster from the installed
//	                   binaries (initdb, pg_ctl) for tests and validate;
//	                   childproc starts and reaps its processes
//	proxy/pgbouncer    a real PgBouncer with a generated configuration
//	proxy/load         the load driver: real clients running a scenario's
//	                   workload through any target
//	proxy/probe        the live session-feature probes (compat, for real)
//	proxy/validate     poolsim validate: runs a scenario through pooler,
//	                   pgbouncer or directly, and sets the measurement
//	                   beside the model (models/system)
//
// The pooler (with its metrics) is the only one a user runs on its own, on
// uring; the other five are the lab that checks the model against it and
// against PgBouncer.
package proxy
