// Package e2e holds the end-to-end tests: a real server and real agents on
// loopback, with real WebAssembly tools, driven through the operator API.
package e2e
