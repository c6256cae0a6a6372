package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// releaseKey is a fresh release key.
func releaseKey(t *testing.T) ed25519.PrivateKey {
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	return priv
}

// signedRelease is body released as version for linux/arch, signed
// with priv.
func signedRelease(version, arch string, body []byte, priv ed25519.PrivateKey) agentrelease.Release {
	sum := sha256.Sum256(body)
	return agentrelease.Sign(agentrelease.Release{Version: version, OS: "linux", Arch: arch, SHA256: hex.EncodeToString(sum[:]),
		Size: int64(len(body))}, priv)
}

// releasePath is the path and query that publish r.
func releasePath(r agentrelease.Release) string {
	q := url.Values{"version": {r.Version}, "os": {r.OS}, "arch": {r.Arch}, "size": {strconv.FormatInt(r.Size, 10)}, "key_id": {r.KeyID}}
	if r.Signature != nil {
		q.Set("signature", base64.RawURLEncoding.EncodeToString(r.Signature))
	}
	return "/api/releases/" + r.SHA256 + "?" + q.Encode()
}

// releaseRequest publishes body as version for linux/arm64, signed
// with a fresh key.
func releaseRequest(t *testing.T, version string, body []byte) probeRequest {
	return probeRequest{method: "PUT", path: releasePath(signedRelease(version, "arm64", body, releaseKey(t))), body: body,
		header: http.Header{"Content-Type": {"application/octet-stream"}}}
}

// publish sends r with body as the admin, and returns the status and
// the answer's error, or its body if it has none.
func (ts *testServer) publish(r agentrelease.Release, body []byte) (int, string) {
	ts.t.Helper()
	code, answer := ts.call(ts.api.Token, probeRequest{method: "PUT", path: releasePath(r), body: body,
		header: http.Header{"Content-Type": {"application/octet-stream"}}})
	var e api.Error
	if json.Unmarshal([]byte(answer), &e) == nil && e.Error != "" {
		return code, e.Error
	}
	return code, answer
}

func TestAPublishedReleaseIsListedNewestFirstAuditedAndKeptAcrossARestart(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	key := releaseKey(t)
	arm, amd := []byte("\x7fELF an arm64 agent"), []byte("\x7fELF an amd64 agent")
	first, second := signedRelease("1.2.3", "arm64", arm, key), signedRelease("1.2.3", "amd64", amd, key)

	got, err := ts.api.PublishRelease(ctx, first, bytes.NewReader(arm))
	require.NoError(t, err)
	assert.False(t, got.Unchanged)
	assert.Equal(t, first.SHA256, got.SHA256)
	assert.Equal(t, "admin", got.PublishedBy)
	code, body := ts.publish(second, amd)
	require.Equal(t, http.StatusCreated, code, body)
	again, err := ts.api.PublishRelease(ctx, first, bytes.NewReader(arm))
	require.NoError(t, err, "the same release again")
	assert.True(t, again.Unchanged)
	assert.Equal(t, got.PublishedAt, again.PublishedAt, "the release first kept")

	audit, err := ts.api.Audit(ctx, api.AuditQuery{Identity: "admin"})
	require.NoError(t, err)
	var published []string
	for _, e := range audit {
		if e.Action == api.ActionReleasePublish {
			published = append(published, string(e.Parameters))
		}
	}
	require.Len(t, published, 2, "each release published once is audited once")
	assert.Contains(t, published[0], first.SHA256)

	ts.srv.Shutdown()
	ts.http.Close()
	require.NoError(t, ts.srv.Close())
	restarted := newTestServer(t, func(c *Config) { c.DataDir, c.Store.URL = ts.dir, ts.srv.cfg.Store.URL })
	list, err := restarted.api.Releases(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for i, want := range []agentrelease.Release{second, first} {
		assert.Equal(t, want, list[i].Release, "newest first")
	}
	kept, err := restarted.srv.store.Rollouts().Module(ctx, first.SHA256)
	require.NoError(t, err)
	assert.Equal(t, arm, kept.Body, "the binary is kept where the rollouts keep their modules")
}

func TestAPublishWhoseBodyIsNotTheReleaseItNamesOrThatIsUnsignedIsRefusedAndKeepsNothing(t *testing.T) {
	ts := newTestServer(t)
	key := releaseKey(t)
	binary := []byte("\x7fELF an arm64 agent")
	good := signedRelease("1.2.3", "arm64", binary, key)
	other := sha256.Sum256([]byte("another build"))

	wrongDigest := good
	wrongDigest.SHA256 = hex.EncodeToString(other[:])
	longer := good
	longer.Size--
	unsigned := good
	unsigned.KeyID, unsigned.Signature = "", nil
	badVersion := signedRelease("1.2.3 beta", "arm64", binary, key)
	for name, c := range map[string]struct {
		r    agentrelease.Release
		body []byte
		want []string
	}{
		"another digest": {wrongDigest, binary, []string{good.SHA256, wrongDigest.SHA256}},
		"a shorter body": {good, binary[:len(binary)-1], []string{strconv.Itoa(len(binary) - 1), strconv.Itoa(len(binary))}},
		"a longer body":  {longer, binary, []string{strconv.Itoa(len(binary)), strconv.Itoa(len(binary) - 1)}},
		"unsigned":       {unsigned, binary, []string{"not signed", "aipctl agent publish --key"}},
		"a bad version":  {badVersion, binary, []string{`version "1.2.3 beta"`}},
	} {
		code, body := ts.publish(c.r, c.body)
		assert.Equal(t, http.StatusBadRequest, code, "%s: %s", name, body)
		for _, w := range c.want {
			assert.Contains(t, body, w, name)
		}
	}

	viewer := ts.addIdentity("watcher", api.RoleViewer, nil)
	code, body := ts.call(viewer, probeRequest{method: "PUT", path: releasePath(good), body: binary})
	assert.Equal(t, http.StatusForbidden, code, body)

	list, err := ts.api.Releases(context.Background())
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestAnotherBinaryUnderAKeptReleasesVersionAndPlatformIsAConflictNamingTheKeptDigest(t *testing.T) {
	ts := newTestServer(t)
	key := releaseKey(t)
	kept := signedRelease("2.0.0", "arm64", []byte("first build"), key)
	code, body := ts.publish(kept, []byte("first build"))
	require.Equal(t, http.StatusCreated, code, body)

	rebuilt := signedRelease("2.0.0", "arm64", []byte("second build"), key)
	code, body = ts.publish(rebuilt, []byte("second build"))
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, kept.SHA256)
	code, body = ts.publish(signedRelease("2.0.0", "arm64", []byte("first build"), releaseKey(t)), []byte("first build"))
	assert.Equal(t, http.StatusConflict, code, "the same binary signed by another key: %s", body)

	list, err := ts.api.Releases(context.Background())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, kept.SHA256, list[0].SHA256)
}

// The bound holds before the body is read: a publish whose size is
// past it is refused while its body has not even been sent. The server
// is served without the tests' OpenAPI check, which reads each body
// whole before the server sees the request.
func TestAReleaseLargerThanTheBoundIsRefusedBeforeItsBodyIsRead(t *testing.T) {
	ts := newTestServer(t)
	hs := httptest.NewServer(ts.srv.Handler())
	t.Cleanup(hs.Close)
	huge := signedRelease("3.0.0", "arm64", []byte("x"), releaseKey(t))
	huge.Size = agentrelease.MaxSize + 1
	body, sender := io.Pipe()
	t.Cleanup(func() { sender.Close() })
	req, err := http.NewRequest("PUT", hs.URL+releasePath(huge), body)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(answer))
	assert.Contains(t, string(answer), strconv.Itoa(agentrelease.MaxSize))

	huge.Size = 1
	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: aip\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n\x7fELF",
		releasePath(huge), ts.api.Token, agentrelease.MaxSize+1)
	require.NoError(t, err)
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a Content-Length past the bound, its body not sent")
}
