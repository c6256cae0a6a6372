//go:build race

package testenv

// Slowdown is how many times slower code runs in this build: the race
// detector makes it 2–20 times slower, so waits for an agent scale by it.
const Slowdown = 5
