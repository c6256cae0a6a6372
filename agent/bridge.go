package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"

	"github.com/edgeaip/edgeaip/agent/internal/mcpserve"
	"github.com/edgeaip/edgeaip/internal/version"
)

// LocalEndpoint is where the local MCP endpoint of an agent configured by
// cfg serves (mcp_serve.listen, with a host that reaches it from this
// device), and the file that holds its token.
func LocalEndpoint(cfg Config) (url, tokenFile string, err error) {
	cfg.SetDefaults()
	if cfg.MCPServe.Listen == "" {
		return "", "", errors.New("mcp_serve.listen is not set: the agent serves no MCP endpoint")
	}
	host, port, err := net.SplitHostPort(cfg.MCPServe.Listen)
	if err != nil {
		return "", "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	if cfg.MCPServe.TokenFile == "" {
		return "", "", errors.New("mcp_serve.token_file is not set, nor data_dir, where the agent keeps it")
	}
	return "http://" + net.JoinHostPort(host, port) + mcpserve.Path, cfg.MCPServe.TokenFile, nil
}

// BridgeStdio carries an MCP client's messages, on in and out (stdio),
// to the local MCP endpoint of the running agent at url, presenting the
// token in tokenFile, and the endpoint's back: what aip-agent mcp-stdio
// does, for clients that start their servers as processes. The agent
// runs and reports the calls; the bridge holds no tools and no data dir.
func BridgeStdio(ctx context.Context, url, tokenFile string, in io.Reader, out io.Writer, log *slog.Logger) error {
	token, err := mcpserve.ReadToken(tokenFile)
	if err != nil {
		return err
	}
	return mcpserve.Bridge(ctx, url, token, version.Version(), in, out, log)
}
