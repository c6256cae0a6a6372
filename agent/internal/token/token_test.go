package token

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// setup writes a token file holding token, mode 0640, and returns it with
// a data dir and a log.
func setup(t *testing.T, token string) (file, data string, logs *testenv.LogBuffer) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "device.token")
	require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o640))
	return file, t.TempDir(), &testenv.LogBuffer{}
}

func open(t *testing.T, file, data string, logs *testenv.LogBuffer) *Keeper {
	t.Helper()
	k, err := Open(file, data, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err)
	return k
}

// A rotated token replaces the token file whole, keeping its mode.
func TestARotatedTokenReplacesTheTokenFile(t *testing.T) {
	file, data, logs := setup(t, "aipd_old")
	k := open(t, file, data, logs)
	assert.Equal(t, "aipd_old", k.Token())

	path, err := k.Replace("aipd_new")
	require.NoError(t, err)
	assert.Equal(t, file, path)
	assert.Equal(t, "aipd_new", k.Token())
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "aipd_new\n", string(b))
	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), fi.Mode().Perm())
	assert.NoFileExists(t, filepath.Join(data, RotatedFile))
	assert.Equal(t, "aipd_new", open(t, file, data, logs).Token(), "the next start reads it")
}

// A token file the agent may not write stays as it is; the new token goes
// into the data dir, and the next start uses it while the token file
// still holds the token it replaced.
func TestAReadOnlyTokenFileLeavesTheRotatedTokenInTheDataDir(t *testing.T) {
	file, data, logs := setup(t, "aipd_old")
	testenv.MakeReadOnly(t, file)
	k := open(t, file, data, logs)

	path, err := k.Replace("aipd_new")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(data, RotatedFile), path)
	assert.Equal(t, "aipd_new", k.Token())
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "aipd_old\n", string(b), "the token file is untouched")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	again := open(t, file, data, logs)
	assert.Equal(t, "aipd_new", again.Token())
	assert.Contains(t, logs.String(), "using the token a rotation left in the data dir")

	_, err = again.Replace("aipd_newer")
	require.NoError(t, err, "a second rotation replaces the copy")
	assert.Equal(t, "aipd_newer", open(t, file, data, logs).Token())
}

// Once another token is written into the token file (the device was
// enrolled again), the file wins over the data dir's copy.
func TestATokenFileWrittenSinceTheRotationWins(t *testing.T) {
	file, data, logs := setup(t, "aipd_old")
	saved, _ := json.Marshal(rotated{Token: "aipd_rotated", Replaces: digest("aipd_old")})
	require.NoError(t, os.WriteFile(filepath.Join(data, RotatedFile), saved, 0o600))
	assert.Equal(t, "aipd_rotated", open(t, file, data, logs).Token())

	require.NoError(t, os.WriteFile(file, []byte("aipd_enrolled_again\n"), 0o600))
	assert.Equal(t, "aipd_enrolled_again", open(t, file, data, logs).Token())
	assert.Contains(t, logs.String(), "the token file changed since a rotation wrote the data dir's copy")

	k := open(t, file, data, logs)
	_, err := k.Replace("aipd_next")
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(data, RotatedFile), "the token file took it: the copy is stale")
}

// A device with no token file (a certificate stands in) keeps a token it
// is sent in the data dir, and uses it at the next start.
func TestWithoutATokenFileARotatedTokenIsKeptInTheDataDir(t *testing.T) {
	data, logs := t.TempDir(), &testenv.LogBuffer{}
	k := open(t, "", data, logs)
	assert.Empty(t, k.Token())
	path, err := k.Replace("aipd_new")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(data, RotatedFile), path)
	assert.Equal(t, "aipd_new", open(t, "", data, logs).Token())
}

func TestTokensThatCannotBeKeptAreRefused(t *testing.T) {
	file, data, logs := setup(t, "aipd_old")
	k := open(t, file, data, logs)
	for token, want := range map[string]string{
		"":            "token of 0 bytes: want 1 to 1024",
		"aipd_a\nb":   `token: byte 6 is '\n': want visible ASCII`,
		"aipd_ünï":    "want visible ASCII",
		"aipd_ space": "want visible ASCII",
	} {
		_, err := k.Replace(token)
		require.Error(t, err, "%q", token)
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, "aipd_old", k.Token())
}

func TestAMissingOrEmptyTokenFileIsAnError(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "none"), dir, slog.Default())
	assert.ErrorContains(t, err, "token file: open")
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, err = Open(empty, dir, slog.Default())
	assert.ErrorContains(t, err, "is empty")
}
