package server

import _ "embed"

// openAPIDocument is the OpenAPI 3 description of the operator API, served
// at GET /api/openapi.json. A test checks that it lists exactly the routes
// the server registers.
//
//go:embed openapi.json
var openAPIDocument []byte
