package store

import "github.com/google/uuid"

// NewRowID is a fresh id for a row the store keys by it: a session's id
// or a command's response_id. It is a UUID, version 7: its first 48 bits
// are the time in milliseconds, so that ids made one after another sort
// one after another, and each new row goes at the end of its key's
// index, on a page the last commit already wrote, rather than on a page
// of its own at random (version 4), which cost every commit a page per
// index per row. The remaining 74 bits are random: no two servers of a
// cluster make the same id.
func NewRowID() string { return uuid.Must(uuid.NewV7()).String() }
