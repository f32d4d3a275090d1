//go:build race

package xxljob_test

// raceDetector reports a build with the race detector, which makes the
// executor several times slower: bounds on wall time widen under it.
const raceDetector = true
