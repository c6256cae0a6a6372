package main

import (
	"errors"
	"net/http"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildParamsMergesJSONAndKeyValues(t *testing.T) {
	p, err := buildParams(`{"path":"/a","n":1}`, []string{"path=/b", "count=3", "flag=true", "name=kiosk 1", `quoted="5"`, "list=[1,2]"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{
		"path": "/b", "n": float64(1), "count": float64(3), "flag": true, "name": "kiosk 1", "quoted": "5", "list": []any{float64(1), float64(2)},
	}, p)

	for _, bad := range []string{`[1]`, `null`, ` null `, `"s"`, `3`} {
		_, err = buildParams(bad, []string{"path=/x"})
		assert.ErrorContains(t, err, "--params: not a JSON object", "--params %s", bad)
	}
	_, _, code := ctl(t, "exec", "k1", "hash_file", "--params", "null", "path=/x")
	assert.Equal(t, exitUsage, code, "refused before asking any server")
	_, err = buildParams("", []string{"novalue"})
	assert.ErrorContains(t, err, `parameter "novalue": want KEY=VALUE`)
}

func TestAPIFailuresMapToExitCodes(t *testing.T) {
	code := func(err error) int {
		var ee *exitError
		require.True(t, errors.As(apiFailure(err), &ee))
		return ee.code
	}
	assert.Equal(t, exitUnreachable, code(api.ErrUnreachable))
	assert.Equal(t, exitUnreachable, code(&api.StatusError{Code: http.StatusUnauthorized}))
	assert.Equal(t, exitUsage, code(&api.StatusError{Code: http.StatusNotFound}))
	assert.Equal(t, exitFailed, code(&api.StatusError{Code: http.StatusServiceUnavailable}))
}
