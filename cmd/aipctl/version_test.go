package main

import (
	"encoding/json"
	"regexp"
	"testing"

	"github.com/edgeaip/edgeaip/internal/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aipctl version prints its own version, then the server's, which it
// asks GET /api/version for.
func TestVersionPrintsAipctlsAndTheServers(t *testing.T) {
	f := newFleet(t, nil)
	out, errOut, code := f.ctl("version")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "aipctl "+version.Get().String()+"\n"+
		"aip-server "+version.Get().String()+" at "+f.api.BaseURL+", speaking aip.cbor.v1 to devices\n", out)

	out, errOut, code = f.ctl("-o", "json", "version")
	require.Equal(t, exitOK, code, errOut)
	var v versions
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, version.Get(), v.Client)
	require.NotNil(t, v.Server)
	assert.Equal(t, version.Version(), v.Server.Version)
	assert.Equal(t, "aip.cbor.v1", v.Server.Wire)
}

// Without a token aipctl asks no server and says so; a server it cannot
// reach is said so too, with the exit code of an unreachable server.
func TestVersionSaysWhyItHasNoServerVersion(t *testing.T) {
	t.Setenv("AIP_TOKEN", "")
	t.Setenv("AIP_SERVER", "")
	out, errOut, code := ctl(t, "version")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^aipctl `+regexp.QuoteMeta(version.Get().String())+"\naip-server: not asked: no operator token", out)

	t.Setenv("AIP_TOKEN", "aipt_whatever")
	out, _, code = ctl(t, "--server", "http://127.0.0.1:1", "version")
	assert.Equal(t, exitUnreachable, code)
	assert.Regexp(t, `(?m)^aip-server at http://127\.0\.0\.1:1: not reached: .*connection refused`, out)

	out, _, code = ctl(t, "--server", "http://127.0.0.1:1", "version", "--client")
	assert.Equal(t, exitOK, code)
	assert.Equal(t, "aipctl "+version.Get().String()+"\n", out)
}
