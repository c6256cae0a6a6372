package tasks

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/tasks/internal/inventory"
	"github.com/stretchr/testify/require"
)

// BenchmarkAdmitACommand is what admission adds to every command: one
// read_file call on a device whose inventory lists the stock tools with
// their schemas.
func BenchmarkAdmitACommand(b *testing.B) {
	var manifest struct {
		InputSchema map[string]any `json:"input_schema"`
	}
	raw, err := os.ReadFile("../wasmtools/tools/read_file/read_file.json")
	require.NoError(b, err)
	require.NoError(b, json.Unmarshal(raw, &manifest))
	read := tool("stock", "read_file", protocol.ToolDataCollection)
	read.InputSchema = manifest.InputSchema
	inv := inventory.Inventory{DeviceID: "kiosk-1", Online: true, Tools: append(inventoryWithSchemas(), read)}
	a := &Admission{limits: Limits{MaxPlanBytes: 1 << 20, MaxParamBytes: 4 << 20}, frameCap: 4 << 20,
		inventory: func(string) inventory.Inventory { return inv }}
	o := CommandOrder(testAdmin, "kiosk-1", []protocol.Command{{ToolName: "read_file", Parameters: map[string]any{"path": "/etc/hostname", "max_bytes": 4096}}})
	require.NoError(b, a.admit(o))
	b.ReportAllocs()
	for b.Loop() {
		if err := a.admit(o); err != nil {
			b.Fatal(err)
		}
	}
}
