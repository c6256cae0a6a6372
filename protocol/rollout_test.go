package protocol

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	greetSHA = strings.Repeat("a1", 32)
	hashSHA  = strings.Repeat("b2", 32)
)

func TestApplyRevisionParamsRoundTripThroughBothWires(t *testing.T) {
	want := Revision{Rollout: "kiosk-tools", Number: 3, Tools: map[string]string{"greet": greetSHA, "hash_file": hashSHA}}
	for _, enc := range []Encoding{CBOR, JSON} {
		cmd := Command{ToolName: ApplyRevisionName, Parameters: ApplyRevisionParams(want)}
		b, err := enc.Marshal(cmd)
		require.NoError(t, err)
		var got Command
		require.NoError(t, enc.UnmarshalValue(b, &got))
		r, err := ParseApplyRevision(got.Parameters)
		require.NoError(t, err, enc)
		assert.Equal(t, want, r, enc)
	}
	none, err := ParseApplyRevision(ApplyRevisionParams(Revision{Rollout: "kiosk-tools", Number: 4}))
	require.NoError(t, err)
	assert.Empty(t, none.Tools, "no tools: the rollout's tools are removed")
}

func TestParseApplyRevisionRefusesWhatCouldNotBeApplied(t *testing.T) {
	valid := func() map[string]any {
		return ApplyRevisionParams(Revision{Rollout: "r", Number: 1, Tools: map[string]string{"greet": greetSHA}})
	}
	for name, c := range map[string]struct {
		change func(map[string]any)
		want   string
	}{
		"no rollout":       {func(p map[string]any) { delete(p, "rollout") }, `parameter "rollout"`},
		"revision 0":       {func(p map[string]any) { p["revision"] = int64(0) }, `parameter "revision": 0 is not a whole number from 1`},
		"fractional":       {func(p map[string]any) { p["revision"] = 1.5 }, `parameter "revision": 1.5`},
		"no tools":         {func(p map[string]any) { delete(p, "tools") }, `parameter "tools": missing`},
		"a path as digest": {func(p map[string]any) { p["tools"] = map[string]any{"greet": "../../etc/passwd"} }, `tool "greet": ../../etc/passwd is not a module's hex SHA-256`},
		"upper-case hex":   {func(p map[string]any) { p["tools"] = map[string]any{"greet": strings.ToUpper(greetSHA)} }, `is not a module's hex SHA-256`},
	} {
		p := valid()
		c.change(p)
		_, err := ParseApplyRevision(p)
		assert.ErrorContains(t, err, c.want, name)
	}
	p := valid()
	p["revision"] = float64(2) // as encoding/json decodes it
	r, err := ParseApplyRevision(p)
	require.NoError(t, err)
	assert.Equal(t, 2, r.Number)
}

// The server reads a device's rollouts from its registration, which it
// decodes from either wire and then through encoding/json into a
// SystemInfo (wsgateway's systemInfoOf), or from the JSON a store kept.
func TestRolloutsFromMetadataReadsWhatTheServerDecodes(t *testing.T) {
	rollouts := map[string]RolloutReport{
		"kiosk-tools": {Revision: 3, Tools: map[string]string{"greet": greetSHA, "hash_file": hashSHA},
			PreviousRevision: 2, Overrides: map[string]string{"greet": hashSHA}},
		"fresh": {Revision: 1, Tools: map[string]string{"hash_file": hashSHA}, Overrides: map[string]string{}},
	}
	modules := []string{hashSHA, greetSHA}
	info := SystemInfo{DeviceID: "kiosk-1", CustomMetadata: map[string]any{}}
	AddRolloutMetadata(info.CustomMetadata, rollouts, modules)
	for _, enc := range []Encoding{CBOR, JSON} {
		b, err := enc.Marshal(&ClientMessage{Type: ClientRegister, Status: StatusOK, ClientID: "kiosk-1", Timestamp: Now(),
			Metadata: map[string]any{MetadataSystemInfo: info}})
		require.NoError(t, err)
		var reg ClientMessage
		require.NoError(t, enc.Unmarshal(b, &reg), enc)
		raw := reg.Metadata[MetadataSystemInfo].(map[string]any)

		gotRollouts, gotModules := RolloutsFromMetadata(raw["custom_metadata"].(map[string]any))
		assert.Equal(t, rollouts, gotRollouts, "%s, as decoded", enc)
		assert.Equal(t, []string{greetSHA, hashSHA}, gotModules, "sorted")

		js, err := json.Marshal(raw)
		require.NoError(t, err)
		var kept SystemInfo
		require.NoError(t, json.Unmarshal(js, &kept))
		gotRollouts, gotModules = RolloutsFromMetadata(kept.CustomMetadata)
		assert.Equal(t, rollouts, gotRollouts, "%s, through encoding/json", enc)
		assert.Equal(t, []string{greetSHA, hashSHA}, gotModules)
	}
}

func TestRolloutsFromMetadataLeavesOutWhatItCannotRead(t *testing.T) {
	rollouts, modules := RolloutsFromMetadata(map[string]any{
		"rollouts": map[string]any{"bad": map[string]any{"revision": "three"}, "good": map[string]any{"revision": int64(1), "tools": map[string]any{}}},
		"modules":  []any{"../x", greetSHA},
	})
	assert.Equal(t, map[string]RolloutReport{"good": {Revision: 1, Tools: map[string]string{}}}, rollouts)
	assert.Equal(t, []string{greetSHA}, modules)

	rollouts, modules = RolloutsFromMetadata(map[string]any{})
	assert.Empty(t, rollouts, "an agent that predates rollouts reports none")
	assert.Empty(t, modules)
}
