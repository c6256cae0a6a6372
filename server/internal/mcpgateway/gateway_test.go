package mcpgateway

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A task's link in an answer is on the URL the client reached the
// server by: https behind TLS, or a proxy that says it terminated it.
func TestTaskURLIsWhereTheClientReachedTheServer(t *testing.T) {
	plain := httptest.NewRequest("POST", "http://edge.example:8080/mcp", nil)
	assert.Equal(t, "http://edge.example:8080/api/tasks/t1", taskURL(withBaseURL(context.Background(), plain), "t1"))

	proxied := httptest.NewRequest("POST", "http://edge.example/mcp", nil)
	proxied.Header.Set("X-Forwarded-Proto", "https")
	assert.Equal(t, "https://edge.example/api/tasks/t1", taskURL(withBaseURL(context.Background(), proxied), "t1"))

	direct := httptest.NewRequest("POST", "https://edge.example/mcp", nil)
	direct.TLS = &tls.ConnectionState{}
	assert.Equal(t, "https://edge.example/api/tasks/t1", taskURL(withBaseURL(context.Background(), direct), "t1"))
}
