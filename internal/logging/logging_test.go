package logging

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func parse(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	var o Options
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.RegisterFlags(fs)
	return o, fs.Parse(args)
}

func TestTextByDefaultAndJSONOnRequest(t *testing.T) {
	o, err := parse(t)
	require.NoError(t, err)
	var buf bytes.Buffer
	o.New(&buf).Info("command sent", "device", "kiosk-1")
	assert.Contains(t, buf.String(), `msg="command sent" device=kiosk-1`)

	o, err = parse(t, "--log-format", "json", "--log-level", "warn")
	require.NoError(t, err)
	buf.Reset()
	log := o.New(&buf)
	log.Info("not shown")
	log.Warn("command failed", "device", "kiosk-1", "call_id", "c1")
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	assert.Equal(t, "command failed", line["msg"])
	assert.Equal(t, "kiosk-1", line["device"])
	assert.Equal(t, "c1", line["call_id"])
}

func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	_, err := parse(t, "--log-format", "yaml")
	assert.ErrorContains(t, err, `want text or json, got "yaml"`)
	_, err = parse(t, "--log-level", "loud")
	assert.Error(t, err)
}
