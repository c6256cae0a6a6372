// Package identity is who the server's callers are, and what they may
// do: operator tokens and the identities they belong to (Caller), the
// dashboard's logins, devices' tokens and certificates, the access
// policy's table, the limit on failed authentications, revocations and
// the rotation of device tokens' waits, and the server's TLS material.
//
// An Authority holds what finding a caller needs (the store, the cache of
// callers, the certificates); the surfaces (the HTTP API, the WebSocket
// endpoints, the MCP gateway) ask it and answer their clients
// themselves: nothing here writes an HTTP response. See the server's
// RATIONALE.md, "Identities".
package identity
