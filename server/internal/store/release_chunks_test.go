package store

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A chunk of an agent release is recorded, in its command and in the
// audit log, by its size and hash: not half a megabyte a device, kept
// for days.
func TestAReleaseChunkIsRecordedByItsSizeAndHash(t *testing.T) {
	ctx := context.Background()
	st, err := Open(ctx, filepath.Join(t.TempDir(), "test.db"), Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	chunk := protocol.ReleaseChunk{Release: agentrelease.Release{Version: "1.0.0", OS: "linux", Arch: "arm64",
		SHA256: string(bytes.Repeat([]byte("a"), 64)), Size: 1 << 20}, Total: 1 << 20, Data: bytes.Repeat([]byte{7}, protocol.ReleaseChunkBytes)}
	action := protocol.Command{ToolName: protocol.StageReleaseName, ToolType: protocol.ToolAction, CallID: "c1",
		Parameters: protocol.StageReleaseParams(chunk)}
	require.NoError(t, st.Write(ctx, func(tx *Tx) error {
		return tx.Commands().Insert(Command{ResponseID: "r1", DeviceID: "d1", SessionID: "s1", Actions: []protocol.Command{action}})
	}))
	c, err := st.Commands().Get(ctx, "r1")
	require.NoError(t, err)
	b, err := json.Marshal(c.Actions)
	require.NoError(t, err)
	assert.Less(t, len(b), 4096, "%s", b)
	assert.Contains(t, string(b), `"data":"\u003c524288 bytes, sha256 `)
	assert.IsType(t, []byte{}, action.Parameters["data"], "the command sent keeps its chunk")
}
