package access

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRolesAreOrderedAndReadByName(t *testing.T) {
	for _, r := range Roles() {
		got, err := ParseRole(r.String())
		require.NoError(t, err)
		assert.Equal(t, r, got)
	}
	assert.True(t, Admin.Covers(Deployer))
	assert.True(t, Deployer.Covers(Operator))
	assert.True(t, Operator.Covers(Viewer))
	assert.True(t, Operator.Covers(Operator))
	assert.False(t, Viewer.Covers(Operator))
	assert.False(t, Deployer.Covers(Admin))
	_, err := ParseRole("superuser")
	assert.EqualError(t, err, `"superuser": want viewer, operator, deployer or admin`)
	_, err = ParseRole("")
	assert.Error(t, err)
}

func TestASelectorPicksDevicesByTheirLabels(t *testing.T) {
	lobby := map[string]string{"site": "lobby", "floor": "2"}
	depot := map[string]string{"site": "depot"}
	bare := map[string]string{}
	for _, tc := range []struct {
		text               string
		lobby, depot, bare bool
		normal             string
	}{
		{"", true, true, true, ""},
		{"site=lobby", true, false, false, "site=lobby"},
		{" site == lobby ", true, false, false, "site=lobby"},
		{"site!=lobby", false, true, true, "site!=lobby"},
		{"site=lobby,floor=2", true, false, false, "floor=2,site=lobby"},
		{"site=lobby,floor=3", false, false, false, "floor=3,site=lobby"},
		{"floor!=9,site=lobby,site=lobby", true, false, false, "floor!=9,site=lobby"},
	} {
		s, err := ParseSelector(tc.text)
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.lobby, s.Matches(lobby), "%q on lobby", tc.text)
		assert.Equal(t, tc.depot, s.Matches(depot), "%q on depot", tc.text)
		assert.Equal(t, tc.bare, s.Matches(bare), "%q on a device without labels", tc.text)
		assert.Equal(t, tc.normal, s.String(), tc.text)
		again, err := ParseSelector(s.String())
		require.NoError(t, err)
		assert.Equal(t, s, again, "String reads back")
	}
}

func TestASelectorThatDoesNotParseSaysWhy(t *testing.T) {
	for text, want := range map[string]string{
		"site":         `"site": want KEY=VALUE or KEY!=VALUE`,
		"site=lobby,":  `"": want KEY=VALUE or KEY!=VALUE`,
		"=lobby":       `"=lobby": label key "": want 1-63`,
		"site=":        `"site=": label value "": want 1-63`,
		"si te=lobby":  `label key "si te"`,
		"site=lob;by":  `label value "lob;by"`,
		"site=lobby=2": `label value "lobby=2"`,
		"-site=lobby":  `label key "-site"`,
	} {
		_, err := ParseSelector(text)
		require.Error(t, err, text)
		assert.Contains(t, err.Error(), want, text)
	}
}

func TestSelectorsCombineAndImply(t *testing.T) {
	lobby, _ := ParseSelector("site=lobby")
	fleet := LabelSelector(map[string]string{"role": "kiosk"}).And(lobby)
	assert.Equal(t, "role=kiosk,site=lobby", fleet.String())
	assert.True(t, fleet.Implies(lobby), "a fleet of lobby kiosks is within site=lobby")
	assert.True(t, fleet.Implies(nil), "everything implies the empty selector")
	assert.False(t, lobby.Implies(fleet))
	assert.False(t, Selector(nil).Implies(lobby))
}

func TestToolPatternsAllowByTypeAndName(t *testing.T) {
	for _, tc := range []struct {
		pattern   string
		typ, name string
		want      bool
	}{
		{"data_collection::*", "data_collection", "read_file", true},
		{"data_collection::*", "action", "write_file", false},
		{"data_collection::*", "", "read_file", false},
		{"hash_*", "data_collection", "hash_file", true},
		{"hash_*", "action", "hash_file", true},
		{"hash_*", "", "hash_file", true},
		{"hash_*", "action", "read_file", false},
		{"*::echo", "action", "echo", true},
		{"action::browser_[a-n]*", "action", "browser_navigate", true},
		{"action::browser_[a-n]*", "action", "browser_take_screenshot", false},
	} {
		p, err := ParseToolPattern(tc.pattern)
		require.NoError(t, err, tc.pattern)
		assert.Equal(t, tc.want, p.Matches(tc.typ, tc.name), "%s on %s::%s", tc.pattern, tc.typ, tc.name)
	}
	for text, want := range map[string]string{
		"":          "no tool name pattern",
		"action::":  "no tool name pattern",
		"sensor::*": `tool type "sensor": want action, data_collection or *`,
		"hash_[":    `name pattern "hash_["`,
	} {
		_, err := ParseToolPattern(text)
		require.Error(t, err, text)
		assert.Contains(t, err.Error(), want, text)
	}
}

func TestAScopeNamesTheFieldAtFaultAndIsNeverEmpty(t *testing.T) {
	s, err := ParseScope("site=lobby", []string{"data_collection::*", "echo"})
	require.NoError(t, err)
	assert.True(t, s.Device(map[string]string{"site": "lobby"}))
	assert.False(t, s.Device(map[string]string{"site": "depot"}))
	assert.True(t, s.Tool("data_collection", "read_file"))
	assert.True(t, s.Tool("action", "echo"))
	assert.False(t, s.Tool("action", "write_file"))
	assert.Equal(t, "devices site=lobby, tools data_collection::*,echo", s.String())
	assert.Equal(t, "unscoped", Scope{}.String())
	assert.True(t, Scope{}.Tool("action", "anything"), "no tool list: every tool")

	_, err = ParseScope("site", nil)
	assert.ErrorContains(t, err, `field "devices": "site": want KEY=VALUE`)
	_, err = ParseScope("", []string{"echo", "nope::x"})
	assert.ErrorContains(t, err, `field "tools[1]": "nope::x"`)
	_, err = ParseScope(" ", nil)
	assert.ErrorContains(t, err, "empty")
}
