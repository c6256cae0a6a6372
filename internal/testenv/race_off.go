//go:build !race

package testenv

// Slowdown is how many times slower code runs in this build: 1 without
// the race detector.
const Slowdown = 1
