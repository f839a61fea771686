//go:build !unix

package main

import "os"

// sigPause and sigResume are nil where there is no SIGUSR1 or SIGUSR2:
// the admin console's PAUSE and RESUME remain.
var sigPause, sigResume os.Signal

// processAlive cannot tell here: a pidfile's process counts as alive, so
// a pidfile left behind must be removed by hand.
func processAlive(int) bool { return true }
