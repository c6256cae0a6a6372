package sdk

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
)

type params struct {
	N int `json:"n"`
}

func double(p params) (any, error) {
	if p.N < 0 {
		return nil, errors.New("n must not be negative")
	}
	return map[string]int{"n": p.N * 2}, nil
}

func TestRunWritesResultAsJSON(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Invoke(strings.NewReader(`{"n":21}`), &out, &errOut, double)
	assert.Equal(t, 0, code)
	assert.JSONEq(t, `{"n":42}`, out.String())
	assert.Empty(t, errOut.String())
}

func TestRunReportsToolErrorOnStderr(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Invoke(strings.NewReader(`{"n":-1}`), &out, &errOut, double)
	assert.Equal(t, ExitFailed, code)
	assert.Contains(t, errOut.String(), "n must not be negative")
	assert.Empty(t, out.String())
}

func TestRunRejectsUnknownAndMistypedParameters(t *testing.T) {
	for _, in := range []string{`{"m":1}`, `{"n":"x"}`, `[1]`} {
		var out, errOut bytes.Buffer
		code := Invoke(strings.NewReader(in), &out, &errOut, double)
		assert.Equal(t, ExitBadParams, code, in)
		assert.Contains(t, errOut.String(), "parameters:", in)
	}
}

func TestRunAcceptsEmptyStdin(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 0, Invoke(strings.NewReader(""), &out, &errOut, double))
	assert.JSONEq(t, `{"n":0}`, out.String())
}

func TestRunExplainsPathsOutsideGrantedDirs(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Invoke(strings.NewReader(`{}`), &out, &errOut, func(params) (any, error) {
		return nil, &fs.PathError{Op: "open", Path: "/etc/passwd", Err: syscall.EBADF}
	})
	assert.Equal(t, ExitFailed, code)
	assert.Equal(t, "open /etc/passwd: not under a directory this tool was granted\n", errOut.String())
}

func TestRunExplainsRefusedSymlinks(t *testing.T) {
	var out, errOut bytes.Buffer
	code := Invoke(strings.NewReader(`{}`), &out, &errOut, func(params) (any, error) {
		return nil, &fs.PathError{Op: "open", Path: "/data/link", Err: syscall.EPERM}
	})
	assert.Equal(t, ExitFailed, code)
	assert.Equal(t, "open /data/link: refused by the host: it leads out of the directory this tool was granted\n", errOut.String())
}

func TestRunExplainsReadOnlyGrants(t *testing.T) {
	var out, errOut bytes.Buffer
	Invoke(strings.NewReader(`{}`), &out, &errOut, func(params) (any, error) {
		return nil, &fs.PathError{Op: "open", Path: "/data/new.txt", Err: syscall.EROFS}
	})
	assert.Equal(t, "open /data/new.txt: this tool was granted that directory read-only\n", errOut.String())
}
