package main

import (
	"os"
	"runtime/debug"
)

// proxyGCPercent is the Go collector's target for `poolsim proxy` when the
// environment does not set GOGC: a collection starts once the heap has
// grown by a quarter of what was live after the last one (Go's default is
// the whole of it, GOGC=100). The proxy's live heap is small and follows
// its connections (an idle client is a few hundred bytes; buffers are
// lent only while bytes wait), while a storm of logins makes garbage of a
// few KB each: at GOGC=100 the heap may then hold as much garbage as live
// data, and the RSS stays there until Go's scavenger (or the proxy's own
// memoryCheck in proxy/pooler) gives the free pages back. At 25 the RSS
// right after 5,000 logins stays within a quarter of the live heap, for
// about four times the collections while logins come in - each one cheap
// on a heap of a few MB - and none more while clients only run queries,
// which the event loop forwards without allocating per message.
//
// GOMEMLIMIT is left as the environment has it (no limit unless set): a
// limit helps only where the machine's or container's memory is known,
// and one below the live heap would make the collector run all the time.
// Operators who know it set GOMEMLIMIT (and GOGC) in the environment;
// either one set there is kept as it is.
const proxyGCPercent = 25

// tuneProxyGC sets the collector's target to proxyGCPercent unless GOGC is
// set, and returns a func that puts back the one before (runProxy runs in
// the tests' own process too).
func tuneProxyGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(proxyGCPercent)
	return func() { debug.SetGCPercent(old) }
}
