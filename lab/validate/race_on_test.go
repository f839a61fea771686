//go:build race

package validate

// raceEnabled: the race detector is on; see skipUnderRace.
const raceEnabled = true
