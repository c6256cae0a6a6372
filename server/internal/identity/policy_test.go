package identity

import (
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The policy is default deny for every surface that asks it, the MCP
// gateway's keys included: a key with no rule is refused even to an
// unscoped admin; a rule holds the role and the scope.
func TestAKeyWithoutARuleIsRefusedToEveryone(t *testing.T) {
	admin := &Caller{Name: BootstrapIdentity, Role: access.Admin}
	var f *Forbidden
	require.ErrorAs(t, Allow(admin, "MCP tools/call"), &f)
	assert.Equal(t, "MCP tools/call has no access policy: refused", f.Error())

	assert.NoError(t, Allow(admin, "POST /api/devices/{id}/token"))
	viewer := &Caller{Name: "v", Role: access.Viewer}
	assert.EqualError(t, Allow(viewer, "POST /api/devices/{id}/token"),
		`identity "v" has role viewer: POST /api/devices/{id}/token needs admin`)
	scoped := &Caller{Name: "s", Role: access.Admin, Scope: access.Scope{Devices: access.Selector{{Key: "site", Value: "lobby"}}}}
	assert.ErrorContains(t, Allow(scoped, "GET /metrics"), "covers the whole fleet")
}
