package rollouts

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/require"
)

// BenchmarkReleaseOnTheWire measures what sending an arm64 agent, built
// as make cross builds it, costs a device's link: the bytes of every
// stage_release COMMAND frame, with the release raw, gzipped at its best
// (the standard library's, which tool modules use) and as the engine
// compresses it (zstd at its best, a 4 MiB window); and the server's time
// to compress it once.
func BenchmarkReleaseOnTheWire(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "aip-agent")
	cmd := exec.Command(testenv.Go(), "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/aip-agent")
	cmd.Dir = testenv.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "%s", out)
	body, err := os.ReadFile(bin)
	require.NoError(b, err)
	sum := sha256.Sum256(body)
	rel := agentrelease.Release{Version: "1.0.0", OS: "linux", Arch: "arm64", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body)),
		KeyID: "0123456789abcdef", Signature: make([]byte, 64)}
	for _, c := range []struct {
		name     string
		compress func([]byte) []byte
	}{
		{"raw", func(p []byte) []byte { return p }},
		{"gzip-best", gzipBest},
		{"zstd-engine", zstdEngine},
	} {
		b.Run(c.name, func(b *testing.B) {
			var z []byte
			for b.Loop() {
				z = c.compress(body)
			}
			b.ReportMetric(float64(len(body)), "binary-bytes")
			b.ReportMetric(float64(len(z)), "stream-bytes")
			b.ReportMetric(float64(wireBytes(b, rel, z)), "wire-bytes")
		})
	}
}

// wireBytes sums the CBOR COMMAND frames that carry z in chunks.
func wireBytes(b *testing.B, rel agentrelease.Release, z []byte) int {
	total := 0
	for off := 0; off < len(z); off += protocol.ReleaseChunkBytes {
		chunk := protocol.ReleaseChunk{Release: rel, Offset: int64(off), Total: int64(len(z)), Data: z[off:min(off+protocol.ReleaseChunkBytes, len(z))]}
		m := protocol.ServerMessage{Type: protocol.ServerCommand, ResponseID: "01a2522b-0f8a-74cb-8501-4ef213cdd5cf", SessionID: "01a2522b-0f8a-7498-b422-9a1191fea645",
			Actions: []protocol.Command{{ToolName: protocol.StageReleaseName, ToolType: protocol.ToolAction, Parameters: protocol.StageReleaseParams(chunk), CallID: "464c0742-e4f0-49d5-8f06-3a05371eb605"}}}
		frame, err := protocol.CBOR.Marshal(m)
		require.NoError(b, err)
		total += len(frame)
	}
	return total
}

func gzipBest(p []byte) []byte {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	w.Write(p)
	w.Close()
	return buf.Bytes()
}

func zstdEngine(p []byte) []byte {
	z, _ := compressRelease(p)
	return z
}
