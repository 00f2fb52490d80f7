//go:build race

package gateway

// raceEnabled reports a race-detector build.
const raceEnabled = true
