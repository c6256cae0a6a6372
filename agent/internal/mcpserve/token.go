package mcpserve

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// tokenPrefix marks a token of the agent's MCP endpoint, so that one
// pasted in the wrong place is recognised.
const tokenPrefix = "aipl_"

// Token reads the endpoint's token from path. A missing file is made,
// with a fresh token, mode 0600: the applications that may call the
// device's tools are those the operator lets read it.
func Token(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		token := tokenPrefix + rand.Text()
		if err := atomicfile.Write(path, []byte(token+"\n")); err != nil {
			return "", fmt.Errorf("mcp_serve.token_file: %w", err)
		}
		return token, nil
	}
	if err != nil {
		return "", fmt.Errorf("mcp_serve.token_file: %w", err)
	}
	return tokenOf(path, b)
}

// ReadToken reads the endpoint's token from path, which the agent made.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("mcp_serve.token_file: %w", err)
	}
	return tokenOf(path, b)
}

// tokenOf is the token in b, read from path.
func tokenOf(path string, b []byte) (string, error) {
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("mcp_serve.token_file %s: empty; delete it to have the agent make a token", path)
	}
	return token, nil
}
