// Package importrules holds, as a test, the rules about which of our
// packages may depend on which: rules that keep a layer from reaching up
// (the server's store into the HTTP API's types) or a small binary from
// linking a large one (aipctl and the agent). The rules are a table in
// importrules_test.go; each names the package, what it must not depend on,
// directly or through others, and why. The package has no code of its own.
package importrules
