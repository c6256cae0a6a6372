package server

import _ "embed"

// openAPIDocument is the OpenAPI 3 description of the operator API, served
// at GET /api/openapi.json. Tests check that it is valid OpenAPI 3, that
// it lists exactly the routes the server registers, and that every request
// and response of the server's tests conforms to it.
//
//go:embed openapi.json
var openAPIDocument []byte
