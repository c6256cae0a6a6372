package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/server/internal/httpapi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// browser sends requests as the dashboard's page would: with the login
// cookie and the headers a browser adds.
type browser struct {
	t      *testing.T
	client *http.Client
	base   string
	cookie *http.Cookie
}

func (b *browser) do(method, path, body string, header ...string) *http.Response {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	require.NoError(b.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	resp, err := b.client.Do(req)
	require.NoError(b.t, err)
	resp.Body.Close()
	return resp
}

func (b *browser) login(token string) *http.Response {
	b.t.Helper()
	resp := b.do("POST", "/api/login", `{"token":"`+token+`"}`, "Sec-Fetch-Site", "same-origin")
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.LoginCookie {
			b.cookie = c
		}
	}
	return resp
}

func TestTheDashboardLoginIsACookieTheAPIAccepts(t *testing.T) {
	ts := newTestServer(t)
	b := &browser{t: t, client: http.DefaultClient, base: ts.http.URL}

	resp := b.login("aipo_wrong")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Nil(t, b.cookie)

	resp = b.login(ts.api.Token)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotNil(t, b.cookie)
	c := b.cookie
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	assert.False(t, c.Secure, "plain HTTP")
	assert.Equal(t, "/", c.Path)
	assert.InDelta(t, httpapi.LoginTTL.Seconds(), float64(c.MaxAge), 1)
	assert.NotContains(t, c.Value, ts.api.Token, "the cookie is not the token")
	assert.NotContains(t, ts.logs.String(), c.Value, "nor is it logged")

	assert.Equal(t, http.StatusOK, b.do("GET", "/api/devices", "").StatusCode)
	assert.Equal(t, http.StatusOK, b.do("GET", "/metrics", "").StatusCode)

	enroll := func(id string, header ...string) int {
		return b.do("POST", "/api/devices", `{"id":"`+id+`"}`, header...).StatusCode
	}
	assert.Equal(t, http.StatusCreated, enroll("k1", "Sec-Fetch-Site", "same-origin"))
	assert.Equal(t, http.StatusCreated, enroll("k2", "Origin", ts.http.URL))
	assert.Equal(t, http.StatusForbidden, enroll("k3", "Sec-Fetch-Site", "cross-site"))
	assert.Equal(t, http.StatusForbidden, enroll("k4", "Sec-Fetch-Site", "same-site"), "a sibling subdomain is another origin")
	assert.Equal(t, http.StatusForbidden, enroll("k5", "Origin", "http://evil.example"))
	assert.Equal(t, http.StatusForbidden, enroll("k6"), "a cookie alone, with neither header, changes nothing")
	devs, err := ts.api.Devices(t.Context())
	require.NoError(t, err)
	assert.Len(t, devs, 2, "only the same-origin requests enrolled a device")

	// The token in a header needs no origin: it is no ambient credential.
	assert.Equal(t, http.StatusCreated, enroll("k7", "Authorization", "Bearer "+ts.api.Token, "Sec-Fetch-Site", "cross-site"))
	// A wrong token is not rescued by a good cookie.
	assert.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/devices", "", "Authorization", "Bearer aipo_wrong").StatusCode)

	assert.Equal(t, http.StatusForbidden, b.do("POST", "/api/logout", "", "Sec-Fetch-Site", "same-site").StatusCode,
		"a sibling origin cannot log the operator out")
	assert.Equal(t, http.StatusForbidden, b.do("POST", "/api/logout", "", "Origin", "http://evil.example").StatusCode)
	assert.Equal(t, http.StatusOK, b.do("GET", "/api/devices", "").StatusCode, "the login survived")
	assert.Equal(t, http.StatusNoContent, b.do("POST", "/api/logout", "", "Sec-Fetch-Site", "same-origin").StatusCode)
	assert.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/devices", "").StatusCode, "the login is gone from the server")

	b.cookie = &http.Cookie{Name: httpapi.LoginCookie, Value: "made-up"}
	assert.Equal(t, http.StatusUnauthorized, b.do("GET", "/api/devices", "").StatusCode)
}

func TestTheLoginCookieIsSecureOverTLS(t *testing.T) {
	ts := newTestServer(t)
	hs := httptest.NewTLSServer(ts.srv.Handler())
	t.Cleanup(hs.Close)
	b := &browser{t: t, client: hs.Client(), base: hs.URL}
	require.Equal(t, http.StatusOK, b.login(ts.api.Token).StatusCode)
	assert.True(t, b.cookie.Secure)
}

func TestTheLoginCookieIsSecureBehindATLSProxy(t *testing.T) {
	ts := newTestServer(t)
	b := &browser{t: t, client: http.DefaultClient, base: ts.http.URL}
	login := func(header ...string) *http.Cookie {
		resp := b.do("POST", "/api/login", `{"token":"`+ts.api.Token+`"}`, append(header, "Sec-Fetch-Site", "same-origin")...)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Len(t, resp.Cookies(), 1)
		return resp.Cookies()[0]
	}
	assert.True(t, login("X-Forwarded-Proto", "https").Secure)
	assert.True(t, login("X-Forwarded-Proto", "HTTPS, http").Secure, "the first proxy's word counts")
	assert.False(t, login("X-Forwarded-Proto", "http").Secure)

	b.cookie = login()
	logout := b.do("POST", "/api/logout", "", "Sec-Fetch-Site", "same-origin", "X-Forwarded-Proto", "https")
	require.Len(t, logout.Cookies(), 1)
	assert.True(t, logout.Cookies()[0].Secure, "the cookie that clears it matches")

	ts = newTestServer(t, func(c *Config) { c.SecureCookies = true })
	b = &browser{t: t, client: http.DefaultClient, base: ts.http.URL}
	assert.True(t, login().Secure, "--secure-cookies, behind a proxy that says nothing")
}

func TestTheDashboardIsServedAtTheRoot(t *testing.T) {
	ts := newTestServer(t)
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(ts.http.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, `<script src="/static/app.js" defer></script>`)
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")

	resp, body = get("/static/app.js")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "javascript")
	assert.Contains(t, body, `"/api/login"`)
	assert.False(t, bytes.Contains([]byte(body), []byte("innerHTML")), "the page builds elements from text only")

	resp, _ = get("/static/style.css")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = get("/nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get("/api/nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}
