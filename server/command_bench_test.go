package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/benchlat"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/require"
)

// BenchmarkCommand is one command through the whole server, one caller
// at a time: POST /api/devices/{id}/commands, the COMMAND on a device's
// CBOR link, its results and their acknowledgement, the answer. The
// device answers at once, as loadgen's do. The allocations counted are
// the whole process's: the server's, and the caller's and the device's
// few; so is its CPU time, cpu-µs/op.
func BenchmarkCommand(b *testing.B) {
	dir := b.TempDir()
	s, err := New(context.Background(), Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(b, err)
	hs := httptest.NewServer(s.Handler())
	b.Cleanup(func() {
		s.Shutdown()
		hs.Close()
		s.Close()
	})
	admin, err := os.ReadFile(filepath.Join(dir, AdminTokenFile))
	require.NoError(b, err)
	client := &api.Client{BaseURL: hs.URL, Token: strings.TrimSpace(string(admin))}
	enrolled, err := client.Enroll(context.Background(), api.EnrollRequest{ID: "bench-1"})
	require.NoError(b, err)
	conn, _, err := protocol.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http")+"/ws",
		protocol.DialOptions{Header: http.Header{"Authorization": {"Bearer " + enrolled.Token}}, Encoding: protocol.CBOR})
	require.NoError(b, err)
	b.Cleanup(func() { conn.CloseNow() })
	ctx := context.Background()
	require.NoError(b, conn.Send(ctx, &protocol.ClientMessage{Type: protocol.ClientRegister, Status: protocol.StatusOK,
		ClientType: protocol.ClientDevice, ClientID: "bench-1", RequestID: "reg"}))
	go answerCommands(conn)

	body := []byte(`{"actions":[{"tool_name":"echo","tool_type":"action","parameters":{"text":"hi"}}],"timeout":"10s"}`)
	url := hs.URL + "/api/devices/bench-1/commands"
	hc := &http.Client{Timeout: 10 * time.Second}
	b.ReportAllocs()
	defer benchlat.ReportCPU(b)()
	for b.Loop() {
		req, err := http.NewRequest("POST", url, bytes.NewReader(body))
		require.NoError(b, err)
		req.Header.Set("Authorization", "Bearer "+client.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		require.NoError(b, err)
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(b, err)
		require.Equal(b, http.StatusOK, resp.StatusCode, "%s", out)
	}
}

// answerCommands answers every COMMAND on conn with success, until the
// link ends.
func answerCommands(conn *protocol.Conn) {
	ctx := context.Background()
	for {
		var m protocol.ServerMessage
		if conn.Read(ctx, &m) != nil {
			return
		}
		if m.Type != protocol.ServerCommand {
			continue
		}
		results := make([]protocol.Result, len(m.Actions))
		for i, a := range m.Actions {
			results[i] = protocol.Result{Status: protocol.ResultSuccess, Result: map[string]any{"text": "hi"}, CallID: a.CallID}
		}
		err := conn.Send(ctx, &protocol.ClientMessage{Type: protocol.ClientCommandResults, Status: protocol.StatusContinue,
			ClientID: "bench-1", SessionID: m.SessionID, PrevResponseID: m.ResponseID, RequestID: "res-" + m.ResponseID,
			ActionResults: results})
		if err != nil {
			return
		}
	}
}
