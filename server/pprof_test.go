package server

import (
	"net/http"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Go's profiles are off unless asked for, and then only admins get them:
// they show everything the server runs.
func TestProfilesAreOffByDefaultAndOperatorOnly(t *testing.T) {
	get := func(ts *testServer, token string) int {
		req, err := http.NewRequest("GET", ts.http.URL+"/debug/pprof/cmdline", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	off := newTestServer(t)
	assert.Equal(t, http.StatusNotFound, get(off, off.api.Token), "off by default")

	on := newTestServer(t, func(c *Config) { c.Pprof = true })
	assert.Equal(t, http.StatusUnauthorized, get(on, ""))
	assert.Equal(t, http.StatusUnauthorized, get(on, on.enroll("kiosk")), "a device token is no identity's")
	assert.Equal(t, http.StatusForbidden, get(on, on.addIdentity("ops", api.RoleOperator, nil)))
	assert.Equal(t, http.StatusForbidden, get(on, on.addIdentity("lobby", api.RoleAdmin, &api.Scope{Devices: "site=lobby"})),
		"a scoped admin does not see the whole fleet")
	assert.Equal(t, http.StatusOK, get(on, on.api.Token))
}
