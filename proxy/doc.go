// Package proxy holds no code of its own: it is the map of the product's
// live half, the pooler a user runs (poolsim proxy). Each folder below is a
// package, and an import only ever points down this list, never back up to
// its parent:
//
//	proxy/pooler       the pooling proxy itself: a PgBouncer-style pooler
//	                   on the wire protocol; it imports models/poolmode,
//	                   models/poolconf, models/poolqueue and proxy/uring and
//	                   nothing else of poolsim
//	proxy/uring        socket sends and receives batched into one system
//	                   call with Linux's io_uring, for the pooler's loop
//	proxy/metrics      the pooler's Prometheus endpoint (poolsim proxy
//	                   --metrics-listen): what its console shows, counters
//	                   and histograms per pool
//
// The lab that checks the model against this pooler and against PgBouncer
// (throwaway clusters, the load driver, the probes, poolsim validate) lives
// in lab/, and nothing here imports it outside tests.
package proxy
