package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/authlimit"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/edgeaip/edgeaip/server/metrics"
	"github.com/stretchr/testify/require"
)

// BenchmarkAuthenticate is what finding a request's identity costs every
// request: by token, from the cache of callers once one request has read
// it from the store, and by the dashboard's login, from the store.
func BenchmarkAuthenticate(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "edgeaip.db"), store.Options{})
	require.NoError(b, err)
	b.Cleanup(func() { st.Close() })
	a := New(Config{Store: st, Auth: identity.New(identity.Config{Store: st, Logger: log}),
		AuthLimit: authlimit.NewLimiter(nil, time.Now, log), Metrics: metrics.New(metrics.Sources{}), Logger: log,
		WebSocket: http.NotFoundHandler(), MCP: http.NotFoundHandler()})
	token, tok := identity.NewOperatorToken("ci")
	require.NoError(b, st.Write(context.Background(), func(tx *store.Tx) error {
		return tx.Identities().Create(store.Identity{Name: "ci", Role: "operator", Devices: "site=lobby", Tools: []string{"data_collection::*"}}, tok)
	}))
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/api/login", strings.NewReader(`{"token":"`+token+`"}`)))
	require.Equal(b, 200, rec.Code, rec.Body.String())
	cookie := rec.Result().Cookies()[0]

	b.Run("token", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/api/devices", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		for b.Loop() {
			if _, err := a.gate.authenticate(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("login", func(b *testing.B) {
		r := httptest.NewRequest("GET", "/api/devices", nil)
		r.AddCookie(cookie)
		for b.Loop() {
			if _, err := a.gate.authenticate(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
