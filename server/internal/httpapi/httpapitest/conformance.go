// Package httpapitest holds the server's HTTP API to its description,
// openapi.json, in tests: the document checked against the OpenAPI 3
// specification, and a handler that checks every request a test makes
// and every response the server gives against it. Only tests import it:
// it links kin-openapi, which the server does not.
package httpapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/stretchr/testify/require"
)

// Router is the served document, checked against the OpenAPI 3
// specification (schemas, references, parameters and responses), made
// into a router that finds the operation a request is for.
func Router(t testing.TB) routers.Router {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPIDocument())
	require.NoError(t, err, "openapi.json does not parse as OpenAPI 3")
	require.NoError(t, doc.Validate(loader.Context), "openapi.json is not a valid OpenAPI 3 document")
	doc.Servers = nil // match any host: the test server's port changes
	r, err := gorillamux.NewRouter(doc)
	require.NoError(t, err)
	return r
}

// conformance wraps a server's handler so that every /api request the
// tests make, and every response the server gives, is checked against
// openapi.json. What does not conform fails the test when it ends.
type conformance struct {
	router routers.Router
	next   http.Handler

	mu       sync.Mutex
	problems []string
}

// Conformance serves next, checking every /api request and its response
// against openapi.json: what does not conform fails t when it ends.
func Conformance(t *testing.T, next http.Handler) http.Handler {
	c := &conformance{router: Router(t), next: next}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.problems {
			t.Errorf("openapi.json does not describe what the server did: %s", p)
		}
	})
	return c
}

func (c *conformance) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/") || strings.HasSuffix(r.URL.Path, "/events") {
		c.next.ServeHTTP(w, r) // the WebSocket, the dashboard, and event streams
		return
	}
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		c.next.ServeHTTP(w, r) // an unrouted path: the route table's test covers the set
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: r.Clone(r.Context()), PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	in.Request.Body = io.NopCloser(bytes.NewReader(body))
	requestErr := openapi3filter.ValidateRequest(r.Context(), in)

	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())

	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code,
		Header: rec.Header(), Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	err = openapi3filter.ValidateResponse(context.Background(), out)
	if err == nil && requestErr != nil && rec.Code < 400 {
		err = fmt.Errorf("the document refuses the request, the server took it: %w", requestErr)
	}
	if err != nil {
		c.mu.Lock()
		c.problems = append(c.problems, fmt.Sprintf("%s %s → %d %s: %v", r.Method, r.URL.Path, rec.Code,
			bytes.TrimSpace(rec.Body.Bytes()), err))
		c.mu.Unlock()
	}
}
