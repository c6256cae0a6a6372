package httpapi

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
)

// A route without a rule is refused to everyone, and the server says so
// when it builds its routes.
func TestARouteWithoutARuleIsRefusedToEveryone(t *testing.T) {
	logs := &testenv.LogBuffer{}
	a := New(Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	rec := httptest.NewRecorder()
	a.gate.guard("GET /api/nothing", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a route with no rule was served") })).
		ServeHTTP(rec, httptest.NewRequest("GET", "/api/nothing", nil))
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Contains(t, rec.Body.String(), "GET /api/nothing has no access policy: refused")
	assert.Contains(t, logs.String(), "route has no access policy: refused to everyone")
}
