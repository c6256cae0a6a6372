// Package dashboard is aip-server's web dashboard: one HTML page, a style
// sheet and a script in plain JavaScript, embedded in the binary, with no
// build step. The page calls the operator API with the login cookie that
// POST /api/login sets; everything it shows comes from that API.
package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// contentSecurityPolicy lets the page load only its own script and style
// sheet, talk only to its own server, and not be framed: data the page
// shows (tool output, error messages) can never run as script.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Handler serves the page at / and its files under /static/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	index, _ := fs.ReadFile(files, "static/index.html") // embedded: it is there
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(index)
	})
	mux.Handle("GET /static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// The files change with the binary, which sets no modification
		// time on them: always revalidate.
		h.Set("Cache-Control", "no-cache")
		mux.ServeHTTP(w, r)
	})
}
