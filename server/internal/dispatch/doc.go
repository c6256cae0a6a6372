// Package dispatch is the server's links to devices and the commands it
// sends on them: the Registry of who is linked here, online or between
// links within a grace; the Dispatcher, which records each COMMAND before
// it sends it, decides whether it waits for its device, sends it again on
// a new link, and records its results exactly once; and, in cluster mode,
// the links to devices on other nodes, behind the interface the
// dispatcher holds (ClusterLinks; a single node holds SingleNode). See
// the server's RATIONALE.md, "A link that loses nothing" and "When a
// command waits for its device", and internal/cluster/RATIONALE.md.
package dispatch
