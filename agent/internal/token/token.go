// Package token keeps the device token: it reads it at start, from the
// token file or from the copy a rotation left in the data dir, and
// replaces it, durably, when the server rotates it.
//
// A rotated token goes into the token file, replaced whole, when the
// agent may write that file. When it may not (a systemd credential, a
// read-only mount, a file without write permission), it goes into
// DATA/rotated-token.json instead, with the SHA-256 of the token file's
// token it stands in for. At the next start that copy is used as long as
// the token file still holds that token; once someone writes another
// token into the file (a device enrolled again), the file wins and the
// copy is ignored.
package token

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// RotatedFile is the name, in the data dir, of the token a rotation could
// not write into the token file.
const RotatedFile = "rotated-token.json"

// maxTokenBytes bounds a token the server sends: ours are 49 bytes.
const maxTokenBytes = 1024

// rotated is RotatedFile's content.
type rotated struct {
	Token string `json:"token"`
	// Replaces is the hex SHA-256 of the token file's token when the
	// rotation wrote this, or "" if there was no token file.
	Replaces string `json:"replaces"`
}

// Keeper holds the device token. It is safe for concurrent use.
type Keeper struct {
	file    string // the token file; "" if none (a device certificate stands in)
	rotated string // DATA/RotatedFile
	log     *slog.Logger

	mu      sync.Mutex
	current string
}

// Open reads the device token: from file, or from the data dir's copy of
// a rotated token that stands in for file's token. With no token file and
// no copy there is no token, and the device must authenticate otherwise
// (a certificate). A token file that is named but missing or empty is an
// error.
func Open(file, dataDir string, log *slog.Logger) (*Keeper, error) {
	k := &Keeper{file: file, rotated: filepath.Join(dataDir, RotatedFile), log: log}
	fromFile, err := k.readFile()
	if err != nil {
		return nil, err
	}
	k.current = fromFile
	saved, err := k.readRotated()
	switch {
	case err != nil:
		log.Warn("the rotated token in the data dir does not read; using the token file", "path", k.rotated, "err", err)
	case saved == nil:
	case saved.Replaces != digest(fromFile):
		log.Warn("the token file changed since a rotation wrote the data dir's copy; using the token file",
			"token_file", file, "ignored", k.rotated)
	default:
		log.Info("using the token a rotation left in the data dir, since the token file could not take it",
			"path", k.rotated, "token_file", file)
		k.current = saved.Token
	}
	return k, nil
}

// Token is the token to connect with; "" if there is none.
func (k *Keeper) Token() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.current
}

// Replace makes token the device's, durably: in the token file if the
// agent may write it, else in the data dir. It returns the path written.
// The token is used from the next connection on.
func (k *Keeper) Replace(token string) (string, error) {
	if err := check(token); err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	path, err := k.write(token)
	if err != nil {
		return "", err
	}
	k.current = token
	return path, nil
}

// write puts token in the token file, or, if that cannot be written, in
// the data dir.
func (k *Keeper) write(token string) (string, error) {
	var fileErr error
	if k.file != "" {
		if fileErr = k.writeFile(token); fileErr == nil {
			if err := os.Remove(k.rotated); err != nil && !errors.Is(err, fs.ErrNotExist) {
				k.log.Warn("a stale rotated token stays in the data dir; the token file wins over it", "path", k.rotated, "err", err)
			}
			return k.file, nil
		}
		k.log.Info("the token file cannot be written; the new token goes into the data dir", "token_file", k.file, "err", fileErr)
	}
	fromFile, err := k.readFile()
	if err != nil {
		return "", errors.Join(fileErr, err)
	}
	b, _ := json.Marshal(rotated{Token: token, Replaces: digest(fromFile)})
	if err := atomicfile.Write(k.rotated, b); err != nil {
		return "", errors.Join(fileErr, fmt.Errorf("new token: %w", err))
	}
	return k.rotated, nil
}

// writeFile replaces the token file whole, keeping its mode, if the agent
// may write it: a file it may not open for writing is read-only, though
// its directory would let it be replaced.
func (k *Keeper) writeFile(token string) error {
	f, err := os.OpenFile(k.file, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return err
	}
	return atomicfile.WriteMode(k.file, []byte(token+"\n"), fi.Mode().Perm())
}

// readFile reads the token file's token; "" if there is no token file.
func (k *Keeper) readFile() (string, error) {
	if k.file == "" {
		return "", nil
	}
	b, err := os.ReadFile(k.file)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("token file %s is empty", k.file)
	}
	return token, nil
}

// readRotated reads the data dir's copy of a rotated token; nil if there
// is none.
func (k *Keeper) readRotated() (*rotated, error) {
	b, err := os.ReadFile(k.rotated)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r rotated
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	if err := check(r.Token); err != nil {
		return nil, err
	}
	return &r, nil
}

// check refuses a token that could not be written to a file and read back
// as it was: empty, too long, or with a character that is not visible
// ASCII.
func check(token string) error {
	if token == "" || len(token) > maxTokenBytes {
		return fmt.Errorf("token of %d bytes: want 1 to %d", len(token), maxTokenBytes)
	}
	for i := range len(token) {
		if token[i] <= ' ' || token[i] > '~' {
			return fmt.Errorf("token: byte %d is %q: want visible ASCII", i, token[i])
		}
	}
	return nil
}

// digest is the hex SHA-256 of token, "" for no token.
func digest(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
