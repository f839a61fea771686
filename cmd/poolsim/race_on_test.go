//go:build race

package main

// raceEnabled: the race detector is on. It slows the command five- to
// tenfold and adds its own shadow memory, so the tests that bound a whole
// process's time or memory widen or skip those bounds.
const raceEnabled = true
