package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3 description of the operator API, served
// at GET /api/openapi.json. Tests check that it is valid OpenAPI 3, that
// it describes exactly the documented routes of the route table (Routes),
// and that every request and response of the server's tests conforms to
// it (httpapitest.Conformance).
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument is openapi.json, for the tests that hold the server to
// it. It is the served document itself: do not change it.
func OpenAPIDocument() []byte { return openAPIDocument }

// serveOpenAPI is GET /api/openapi.json: openapi.json, as it is.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}
