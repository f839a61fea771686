package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneProxyGC: the proxy's collector target is proxyGCPercent when
// GOGC is not set, the environment's when it is, and the one before once
// the proxy returns.
func TestTuneProxyGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	t.Setenv("GOGC", "") // restored when the test ends
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	restore := tuneProxyGC()
	if got := debug.SetGCPercent(proxyGCPercent); got != proxyGCPercent {
		t.Errorf("GOGC unset: collector target %d, want %d", got, proxyGCPercent)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after the proxy: collector target %d, want the 100 before it", got)
	}
	t.Setenv("GOGC", "100")
	restore = tuneProxyGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=100 set: collector target %d, want the environment's 100", got)
	}
	restore()
}
