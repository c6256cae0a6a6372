package wsgateway

import (
	"log/slog"
	"testing"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/dispatch"
	"github.com/stretchr/testify/assert"
)

func TestATaskNameOverTheWebSocketIsSanitizedNotRefused(t *testing.T) {
	g := &Gateway{log: slog.Default()}
	c := &constellation{Link: &dispatch.Link{ID: "orch-1", Type: protocol.ClientConstellation}}
	name, original := g.wsTaskName(c, "inventory")
	assert.Equal(t, "inventory", name)
	assert.Empty(t, original, "a valid name is kept as it is")

	name, original = g.wsTaskName(c, "galaxy/task 1/inventory")
	assert.NotEqual(t, "galaxy/task 1/inventory", name)
	assert.NotEmpty(t, name)
	assert.Equal(t, "galaxy/task 1/inventory", original, "the name sent is kept on the task")
}
