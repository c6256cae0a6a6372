package sandbox

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func requesting(dirs []manifest.Dir, env []string, l manifest.Limits) manifest.Module {
	return manifest.Module{Manifest: manifest.Manifest{
		Name: "t", ToolType: manifest.ToolTypeAction, InputSchema: map[string]any{"type": "object"},
		Capabilities: manifest.Capabilities{Dirs: dirs, Env: env}, Limits: l,
	}}
}

func TestAToolGetsTheIntersectionOfRequestAndGrant(t *testing.T) {
	data := Mount{HostPath: "/srv/data", GuestPath: "/data"}
	logs := Mount{HostPath: "/var/log/kiosk", GuestPath: "/logs", ReadOnly: true}
	pol := Policy{Dirs: []Mount{data, logs}}
	for name, tc := range map[string]struct {
		req  []manifest.Dir
		want []Mount
	}{
		"nothing requested, nothing granted": {nil, []Mount{}},
		"any dir, read-only, narrows rw grants to ro": {
			[]manifest.Dir{{Path: manifest.AnyDir, Mode: manifest.ReadOnly}},
			[]Mount{{HostPath: "/srv/data", GuestPath: "/data", ReadOnly: true}, logs},
		},
		"rw request of a ro grant stays ro": {
			[]manifest.Dir{{Path: "/logs", Mode: manifest.ReadWrite}},
			[]Mount{logs},
		},
		"a request below a grant gets that subtree": {
			[]manifest.Dir{{Path: "/data/kiosk", Mode: manifest.ReadWrite}},
			[]Mount{{HostPath: "/srv/data", Sub: "kiosk", GuestPath: "/data/kiosk"}},
		},
		"a request above a grant gets only the grant": {
			[]manifest.Dir{{Path: "/", Mode: manifest.ReadWrite}},
			[]Mount{data, logs},
		},
		"a request nobody grants gets nothing": {
			[]manifest.Dir{{Path: "/etc", Mode: manifest.ReadOnly}, {Path: "/database", Mode: manifest.ReadOnly}},
			[]Mount{},
		},
	} {
		spec := pol.Spec(requesting(tc.req, nil, manifest.Limits{}), os.LookupEnv)
		assert.Equal(t, tc.want, spec.Mounts, name)
	}
}

func TestEnvIsRequestedAndAllowedAndSet(t *testing.T) {
	host := map[string]string{"TZ": "UTC", "HOME": "/root", "LANG": "C"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	pol := Policy{Env: []string{"TZ", "HOME", "UNSET"}}
	spec := pol.Spec(requesting(nil, []string{"TZ", "LANG", "UNSET"}, manifest.Limits{}), lookup)
	assert.Equal(t, map[string]string{"TZ": "UTC"}, spec.Env)
}

func TestPolicyLimitsOverrideTheManifestsField(t *testing.T) {
	m := requesting(nil, nil, manifest.Limits{Fuel: 10, Timeout: manifest.Duration(time.Second), Memory: 100 << 10})
	spec := Policy{Limits: Limits{Timeout: 5 * time.Second}}.Spec(m, os.LookupEnv)
	assert.Equal(t, Limits{Fuel: 10, Timeout: time.Second, MemoryPages: 2}, spec.Requested, "memory rounds up to pages")
	assert.Equal(t, Limits{Timeout: 5 * time.Second}, spec.Limits)

	sb := newSandbox(t, NewConfig())
	spec.Name, spec.Wasm = "echo", fixture(t, "echo")
	tool, err := sb.Load(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, Limits{Fuel: 10, Timeout: 5 * time.Second, MemoryPages: 2, StdoutBytes: DefaultLimits.StdoutBytes, StderrBytes: DefaultLimits.StderrBytes}, tool.Limits(),
		"policy over manifest over defaults")
}

// A manifest may ask for less than the operator's defaults, not more: only
// policy raises a limit.
func TestAManifestCannotRaiseTheDefaults(t *testing.T) {
	m := requesting(nil, nil, manifest.Limits{Fuel: 1 << 62, Timeout: manifest.Duration(1000 * time.Hour), Memory: 1 << 30})
	sb := newSandbox(t, NewConfig())
	spec := Policy{}.Spec(m, os.LookupEnv)
	spec.Name, spec.Wasm = "echo", fixture(t, "echo")
	tool, err := sb.Load(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, DefaultLimits.Timeout, tool.Limits().Timeout)
	assert.Equal(t, DefaultLimits.Fuel, tool.Limits().Fuel)
	assert.Equal(t, DefaultLimits.MemoryPages, tool.Limits().MemoryPages)

	spec = Policy{Limits: Limits{Timeout: 2 * time.Hour, Fuel: 1 << 40}}.Spec(m, os.LookupEnv)
	spec.Name, spec.Wasm = "echo", fixture(t, "echo")
	tool, err = sb.Load(context.Background(), spec)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, tool.Limits().Timeout, "an operator's policy may")
	assert.Equal(t, uint64(1<<40), tool.Limits().Fuel)
}

func TestTheMostSpecificPolicyApplies(t *testing.T) {
	ps := Policies{
		Default: Policy{Env: []string{"DEFAULT"}},
		ByName:  map[string]Policy{"stock": {Env: []string{"NS"}}, "stock.write_file": {Env: []string{"TOOL"}}},
	}
	assert.Equal(t, []string{"TOOL"}, ps.For("stock", "write_file").Env)
	assert.Equal(t, []string{"NS"}, ps.For("stock", "read_file").Env)
	assert.Equal(t, []string{"DEFAULT"}, ps.For("other", "write_file").Env)
}
