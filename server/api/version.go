package api

import (
	"context"
	"net/http"
)

// Version is the body of GET /api/version: the server's build, as
// aip-server --version prints it, and the version of the devices' wire
// it speaks, which decides the agents it accepts.
type Version struct {
	// Version is the release ("1.2.3"), or "dev-" and the commit's first
	// 12 digits for a development build ("-dirty" when built with
	// changes not committed).
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	// Wire is the WebSocket subprotocol of the CBOR wire the server
	// speaks ("aip.cbor.v1"): agents that offer only another version are
	// refused.
	Wire string `json:"wire"`
}

// Version returns the server's version.
func (c *Client) Version(ctx context.Context) (Version, error) {
	var out Version
	err := c.Do(ctx, http.MethodGet, "/api/version", nil, &out)
	return out, err
}
