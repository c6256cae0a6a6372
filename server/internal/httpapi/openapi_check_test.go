package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/edgeaip/edgeaip/server/internal/httpapi/httpapitest"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTheOpenAPIDocumentIsValid holds openapi.json to the OpenAPI 3
// specification: schemas, references, parameters and responses.
func TestTheOpenAPIDocumentIsValid(t *testing.T) {
	httpapitest.Router(t)
}

// The route table is the one list of what the server serves: the
// document it serves describes exactly its documented routes, each
// undocumented one says why, and each route's policy key has a rule,
// the route's method and pattern (Go's profiles share one), as every
// rule of the policy for a route is some route's.
func TestTheOpenAPIDocumentListsExactlyTheRoutes(t *testing.T) {
	a := httpapi.New(httpapi.Config{WebSocket: http.NotFoundHandler(), MCP: http.NotFoundHandler()})
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/openapi.json", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	assert.True(t, strings.HasPrefix(doc.OpenAPI, "3."))
	assert.Equal(t, httpapi.OpenAPIDocument(), rec.Body.Bytes(), "the served document is openapi.json")

	var documented, served, keys []string
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	seen := map[string]bool{}
	for _, rt := range a.Routes() {
		route := rt.Method + " " + rt.Pattern
		assert.False(t, seen[route], "%s is in the route table twice", route)
		seen[route] = true
		if rt.Undocumented == "" {
			served = append(served, route)
		}
		_, ok := identity.RuleFor(rt.Policy)
		assert.True(t, ok, "%s: its policy key %q has no rule: it would be refused to everyone", route, rt.Policy)
		if !rt.Profile {
			assert.Equal(t, route, rt.Policy, "a route's policy key is its method and pattern")
		}
		keys = append(keys, rt.Policy)
	}
	sort.Strings(documented)
	sort.Strings(served)
	assert.Equal(t, served, documented, "openapi.json describes exactly the documented routes of the table")

	for _, key := range identity.Keys() {
		if strings.HasPrefix(key, "WS ") || strings.HasPrefix(key, "MCP ") {
			continue // message types and MCP tools: their own tests
		}
		assert.True(t, slices.Contains(keys, key), "the policy has a rule for %q, which is no route's", key)
	}
}
