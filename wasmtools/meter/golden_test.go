package meter_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

var update = flag.Bool("update", false, "rewrite testdata/fuel_golden.json")

// golden is the fuel every fixture call consumes under one cost model.
type golden struct {
	CostModel string            `json:"cost_model"`
	Fuel      map[string]uint64 `json:"fuel"`
}

const goldenFile = "testdata/fuel_golden.json"

// TestFuelMatchesGolden pins the fuel of every fixture call, on whatever
// engine this architecture runs (the compiler on amd64 and arm64, the
// interpreter elsewhere), to counts recorded once. Running it on another
// architecture, for example under qemu-arm-static, checks that the counts
// do not depend on it. A change in the counts is a change of cost model:
// bump CostModelVersion, then rerun with -update.
func TestFuelMatchesGolden(t *testing.T) {
	got := golden{CostModel: meter.CostModelVersion, Fuel: map[string]uint64{}}
	r := newRuntime(t, native)
	for _, call := range guestCalls(t) {
		inst := instrument(t, call.wasm, meter.Options{})
		got.Fuel[call.name] = call.run(t, r, compile(t, r, inst), meter.NewMeter(bigBudget)).Fuel
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(goldenFile), 0o755))
		require.NoError(t, os.WriteFile(goldenFile, append(b, '\n'), 0o644))
		return
	}
	b, err := os.ReadFile(goldenFile)
	require.NoError(t, err)
	var want golden
	require.NoError(t, json.Unmarshal(b, &want))
	require.Equal(t, want.CostModel, got.CostModel,
		"CostModelVersion changed: rerun with -update to record the new model's counts")
	assert.Equal(t, want.Fuel, got.Fuel,
		"fuel counts changed under cost model %s: bump CostModelVersion, then rerun with -update", got.CostModel)
}
