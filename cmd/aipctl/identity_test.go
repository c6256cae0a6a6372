package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// as runs aipctl against the fleet's server with token instead of the
// admin's.
func (f *fleet) as(token string, args ...string) (string, string, int) {
	f.t.Helper()
	file := filepath.Join(f.t.TempDir(), "token")
	require.NoError(f.t, os.WriteFile(file, []byte(token), 0o600))
	return ctl(f.t, append([]string{"--server", f.api.BaseURL, "--token-file", file}, args...)...)
}

func TestAScopedOperatorThroughAipctl(t *testing.T) {
	f := newFleet(t, map[string]map[string]string{"kiosk-1": lobby, "cafe-1": {"site": "cafe"}})

	out, errOut, code := f.ctl("operator", "add", "ci", "--role", "operator", "--devices", "site=lobby", "--tools", "echo")
	require.Equal(t, exitOK, code, errOut)
	ci := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(ci, "aipo_"), "the token alone, for a file: %q", out)

	out, _, code = f.ctl("operator", "list")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^admin\s+admin\s+\*\s+\*\s+[0-9a-f]{16}\s+\S+ ago$`, out)
	assert.Regexp(t, `(?m)^ci\s+operator\s+site=lobby\s+echo\s+[0-9a-f]{16}\s+\S+ ago$`, out)

	// The scope holds: the other site is as if it did not exist, and so
	// is every tool but echo.
	out, _, code = f.as(ci, "devices")
	require.Equal(t, exitOK, code)
	assert.Contains(t, out, "kiosk-1")
	assert.NotContains(t, out, "cafe-1")
	out, _, code = f.as(ci, "tools", "kiosk-1")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^fixtures\s+echo\s`, out)
	assert.NotContains(t, out, "fail")
	out, errOut, code = f.as(ci, "exec", "kiosk-1", "echo", "a=1")
	require.Equal(t, exitOK, code, errOut)
	var results []protocol.Result
	require.NoError(t, json.Unmarshal([]byte(out), &results))
	assert.Equal(t, protocol.ResultSuccess, results[0].Status)
	_, errOut, code = f.as(ci, "exec", "cafe-1", "echo")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "device cafe-1 is not enrolled", errOut, "as one that is not: exec reads its tools first")
	_, errOut, code = f.as(ci, "exec", "kiosk-1", "fail")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "device kiosk-1 has no tool fail", errOut, "a tool outside the scope is one the device does not have")
	_, errOut, code = f.as(ci, "dispatch", "--label", "site=cafe", f.plan("steps: [{tool: echo}]\n"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no enrolled device has the labels site=cafe")
	_, errOut, code = f.as(ci, "operator", "list")
	assert.Equal(t, exitUnreachable, code, "403: an operator manages no identities")
	assert.Contains(t, errOut, `identity "ci" has role operator: GET /api/identities needs admin`)

	// The audit log names ci, and reads by identity, device and time.
	out, _, code = f.ctl("audit", "--identity", "ci")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^\d+\s+\S+ \S+\s+ci\s+[0-9a-f]{16}\s+operator\s+kiosk-1\s+action::echo\s+success\s*$`, out, "its tool_type pinned as it was sent")
	assert.Equal(t, 2, strings.Count(out, "\n"), "a heading and the one call: %s", out)
	out, _, code = f.ctl("audit", "--device", "cafe-1", "--since", "1h")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^\d+\s+.*\s+admin\s+[0-9a-f]{16}\s+operator\s+cafe-1\s+device\.enroll \{"labels":\{"site":"cafe"\}\}\s+success`, out)
	out, _, code = f.ctl("-o", "json", "audit", "--since", time.Now().Add(time.Hour).Format(time.RFC3339))
	require.Equal(t, exitOK, code)
	assert.JSONEq(t, "[]", out, "nothing from the future")
	_, errOut, code = f.ctl("audit", "--since", "yesterday")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--since: "yesterday": want a duration (1h) or an RFC 3339 time`)

	// Rotated, the old token stops; revoked, the new one does.
	out, errOut, code = f.ctl("operator", "rotate", "ci", "--grace", "1h")
	require.Equal(t, exitOK, code)
	rotated := strings.TrimSpace(out)
	assert.Contains(t, errOut, "the old token(s) of ci stop working in 1h0m0s")
	_, _, code = f.as(ci, "devices")
	assert.Equal(t, exitOK, code, "within the grace")
	out, _, code = f.ctl("operator", "list")
	require.Equal(t, exitOK, code)
	assert.Regexp(t, `(?m)^ci\s+.*[0-9a-f]{16} \(ends in \S+\), [0-9a-f]{16}\s`, out)
	_, _, code = f.ctl("operator", "rotate", "ci")
	require.Equal(t, exitOK, code)
	_, errOut, code = f.as(rotated, "devices")
	assert.Equal(t, exitUnreachable, code)
	assert.Contains(t, errOut, "server answered 401: wrong operator token")

	out, _, code = f.ctl("operator", "revoke", "ci")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "revoked ci\n", out)
	_, errOut, code = f.ctl("operator", "revoke", "ci")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `no identity "ci"`)
}

func TestOperatorAddRefusesBadInputNamingTheField(t *testing.T) {
	f := newFleet(t, nil)
	for args, want := range map[string]string{
		"ann --role superuser":                `field "role": "superuser": want viewer, operator, deployer or admin`,
		"ann --role viewer --devices site":    `field "scope.devices": "site": want KEY=VALUE or KEY!=VALUE`,
		"ann --role viewer --tools sensor::*": `field "scope.tools[0]": "sensor::*": tool type "sensor"`,
		".ann --role viewer":                  `field "name": ".ann"`,
		"ann --role viewer --devices=":        `field "scope": empty`,
	} {
		_, errOut, code := f.ctl(append([]string{"operator", "add"}, strings.Fields(args)...)...)
		assert.Equal(t, exitUsage, code, args)
		assert.Contains(t, errOut, "server answered 400: "+want, args)
	}
	_, errOut, code := f.ctl("operator", "add", "ann")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `required flag(s) "role" not set`)
	ids, err := f.api.Identities(t.Context())
	require.NoError(t, err)
	assert.Equal(t, []string{"admin"}, []string{ids[0].Name})
	assert.Len(t, ids, 1)

	viewer, err := f.api.AddIdentity(t.Context(), api.IdentityRequest{Name: "watcher", Role: api.RoleViewer})
	require.NoError(t, err)
	_, errOut, code = f.as(viewer.Token, "operator", "add", "ann", "--role", "admin")
	assert.Equal(t, exitUnreachable, code)
	assert.Contains(t, errOut, "server answered 403")
}

// An admin writes a file on a real agent and reads it back; an operator
// whose tools are hash_* reads the task through aipctl: that each step
// ran, and its own hash_file's result, but neither what write_file was
// given nor what read_file returned, in the task, its events (followed
// with --wait) and the audit log.
func TestAToolScopeHidesAFilesContentsFromAipctl(t *testing.T) {
	files := t.TempDir()
	f := newFleet(t, nil)
	f.startAgent("kiosk-1", lobby, func(c *agent.Config) {
		c.ToolDirs = append(c.ToolDirs, "stock="+testenv.StockToolsDir(t))
		c.Mounts = []sandbox.Mount{{HostPath: files, GuestPath: files}}
	})
	note := filepath.Join(files, "note.txt")
	plan := f.plan(`steps:
  - {tool: stock.write_file, parameters: {path: ` + note + `, content: SECRET-CONTENTS}}
  - actions:
      - {tool: stock.read_file, parameters: {path: ` + note + `}}
      - {tool: hash_file, parameters: {path: ` + note + `}}
`)
	out, errOut, code := f.ctl("dispatch", "kiosk-1", plan)
	require.Equal(t, exitOK, code, errOut)
	id := strings.TrimSpace(out)
	out, errOut, code = f.ctl("-o", "json", "task", id, "--wait")
	require.Equal(t, exitOK, code, errOut)
	require.Contains(t, out, "SECRET-CONTENTS", "the admin sees it all")

	out, errOut, code = f.ctl("operator", "add", "hasher", "--role", "operator", "--devices", "site=lobby", "--tools", "hash_*")
	require.Equal(t, exitOK, code, errOut)
	hasher := strings.TrimSpace(out)
	sum := sha256.Sum256([]byte("SECRET-CONTENTS"))
	shown := map[string]string{}
	for name, args := range map[string][]string{
		"task":              {"task", id},
		"task, json":        {"-o", "json", "task", id},
		"task --wait":       {"task", id, "--wait"},
		"audit":             {"audit", "--session", id},
		"audit, json":       {"-o", "json", "audit", "--session", id},
		"task --wait, json": {"-o", "json", "task", id, "--wait"},
	} {
		out, errOut, code := f.as(hasher, args...)
		require.Equal(t, exitOK, code, "%s: %s", name, errOut)
		assert.NotContains(t, out, "SECRET-CONTENTS", name)
		shown[name] = out
	}
	assert.Contains(t, shown["task, json"], hex.EncodeToString(sum[:]), "hash_file's result is the hasher's to see")
	assert.Contains(t, shown["task, json"], "withheld")
	assert.Regexp(t, `(?m)^2\s+stock\.read_file\+hash_file\s+success\s+1\s*$`, shown["task"], "each step, and how it went")
	assert.Regexp(t, `(?m)\skiosk-1\s+action::write_file\s+success\s*$`, shown["audit"], "that write_file ran")
	assert.Contains(t, shown["audit, json"], `"parameters": "withheld: the tool is outside your scope"`)
}
