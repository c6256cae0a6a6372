package selfupdate

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/agentrelease"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The test binary doubles as an agent that a supervisor starts: the
// flashed one, or a release that commits its trial. Each says that it
// ran in the file markerEnv names, then waits for SIGTERM.
const markerEnv = "SELFUPDATE_TEST_MARKER"

func TestMain(m *testing.M) {
	if who := os.Getenv(SupervisedEnv); who != "" {
		os.Exit(actAsAgent(who))
	}
	os.Exit(m.Run())
}

func actAsAgent(who string) int {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	if who != flashed {
		dir := Dir(os.Getenv("SELFUPDATE_TEST_DIR"))
		u := &Updater{dir: dir, running: who, log: slog.Default(), restart: func() {}, changed: func() {}}
		u.Registered()
		if _, err := u.endTrial(protocol.EndTrialParams(who, true, "")); err != nil {
			fmt.Fprintln(os.Stderr, "commit:", err)
			return 9
		}
	}
	f, err := os.OpenFile(os.Getenv(markerEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 8
	}
	fmt.Fprintln(f, who)
	f.Close()
	<-term
	return 0
}

// fixture is a data dir's releases, a release key, and a marker file.
type fixture struct {
	t      *testing.T
	dir    Dir
	pub    ed25519.PublicKey
	priv   ed25519.PrivateKey
	marker string
}

func newFixture(t *testing.T) *fixture {
	pub, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	f := &fixture{t: t, dir: DirOf(t.TempDir()), pub: pub, priv: priv, marker: filepath.Join(t.TempDir(), "ran")}
	t.Setenv(markerEnv, f.marker)
	t.Setenv("SELFUPDATE_TEST_DIR", string(f.dir))
	return f
}

// release signs body as version for this platform.
func (f *fixture) release(version string, body []byte) agentrelease.Release {
	sum := sha256.Sum256(body)
	return agentrelease.Sign(agentrelease.Release{Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH,
		SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}, f.priv)
}

// stream is body compressed as the server sends it.
func stream(t *testing.T, body []byte) []byte {
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, zstd.WithWindowSize(4<<20))
	require.NoError(t, err)
	_, err = w.Write(body)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// stageAll sends r's stream in chunks of n bytes, from where the device
// says it is.
func (f *fixture) stageAll(r agentrelease.Release, z []byte, n int) staged {
	s, err := f.dir.stage(protocol.ReleaseChunk{Release: r, Total: int64(len(z))}, []ed25519.PublicKey{f.pub})
	require.NoError(f.t, err)
	for !s.Installed {
		end := min(s.Have+int64(n), int64(len(z)))
		s, err = f.dir.stage(protocol.ReleaseChunk{Release: r, Offset: s.Have, Total: int64(len(z)), Data: z[s.Have:end]}, []ed25519.PublicKey{f.pub})
		require.NoError(f.t, err)
	}
	return s
}

// install installs body as release version and puts it on trial.
func (f *fixture) trial(version string, body []byte, bound time.Duration) agentrelease.Release {
	r := f.release(version, body)
	f.stageAll(r, stream(f.t, body), 1<<20)
	st, err := f.dir.Load()
	require.NoError(f.t, err)
	st.Trial = &Trial{Release: r, Bound: bound}
	require.NoError(f.t, f.dir.Save(st))
	return r
}

// supervise runs a supervisor whose flashed agent is the test binary,
// until the test ends.
func (f *fixture) supervise() {
	self, err := os.Executable()
	require.NoError(f.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := &Supervisor{Dir: f.dir, Flashed: self, Keys: []ed25519.PublicKey{f.pub}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { done <- s.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		assert.NoError(f.t, <-done)
	})
}

// ran waits until the marker names who, and answers every start so far.
func (f *fixture) ran(who string) []string {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(f.marker)
		lines := strings.Fields(string(b))
		for _, l := range lines {
			if l == who {
				return lines
			}
		}
		require.True(f.t, time.Now().Before(deadline), "%s never ran; ran: %v", who, lines)
	}
}

func (f *fixture) state() State {
	st, err := f.dir.Load()
	require.NoError(f.t, err)
	return st
}

func script(body string) []byte { return []byte("#!/bin/sh\n" + body + "\n") }

func TestAReleaseThatExitsAtOnceIsRolledBackToTheFlashedAgentWithTheReason(t *testing.T) {
	f := newFixture(t)
	r := f.trial("2.0.0", script("exit 3"), time.Minute)
	f.supervise()
	f.ran(flashed)
	st := f.state()
	require.NotNil(t, st.Failed)
	assert.Equal(t, r.SHA256, st.Failed.SHA256)
	assert.Equal(t, "exited with status 3 before it was committed", st.Failed.Reason)
	assert.Nil(t, st.Trial)
	assert.NoFileExists(t, f.dir.binary(r.SHA256), "a failed release's binary is removed")
}

func TestACorruptExecutableIsRolledBackWithoutRunningAnyOfItsCode(t *testing.T) {
	f := newFixture(t)
	f.trial("2.0.0", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 1000), time.Minute)
	f.supervise()
	f.ran(flashed)
	assert.Contains(t, f.state().Failed.Reason, "could not be started: ")
	assert.Contains(t, f.state().Failed.Reason, "exec format error")
}

func TestAReleaseThatNeverRegistersIsStoppedAndRolledBackAtItsBound(t *testing.T) {
	f := newFixture(t)
	f.trial("2.0.0", script("exec sleep 600"), time.Second)
	f.supervise()
	f.ran(flashed)
	assert.Equal(t, "not committed within 1s: it never registered", f.state().Failed.Reason)
}

func TestAReleaseThatCommitsItsTrialRunsAndIsStartedFromThenOn(t *testing.T) {
	f := newFixture(t)
	self, err := os.Executable()
	require.NoError(t, err)
	body, err := os.ReadFile(self)
	require.NoError(t, err)
	r := f.trial("2.0.0", body, time.Minute)
	f.supervise()
	lines := f.ran(r.SHA256)
	assert.Equal(t, []string{r.SHA256}, lines, "the release ran, and the flashed agent did not")
	st := f.state()
	assert.Nil(t, st.Trial)
	assert.Nil(t, st.Failed)
	require.Len(t, st.Committed, 1)
	assert.Equal(t, "2.0.0", st.Committed[0].Version)
}

func TestATrialCutByACrashFailsAtTheNextStart(t *testing.T) {
	f := newFixture(t)
	f.trial("2.0.0", script("exec sleep 600"), time.Minute)
	st := f.state()
	st.Trial.Started = true // as a supervisor killed -9 mid-trial left it
	require.NoError(t, f.dir.Save(st))
	f.supervise()
	f.ran(flashed)
	assert.Equal(t, "the device or its supervisor restarted during the trial", f.state().Failed.Reason)
}

func TestACommittedReleaseAlteredOnDiskIsNotStarted(t *testing.T) {
	f := newFixture(t)
	r := f.release("2.0.0", script("exec sleep 600"))
	f.stageAll(r, stream(t, script("exec sleep 600")), 1<<20)
	require.NoError(t, f.dir.Save(State{Committed: []agentrelease.Release{r}}))
	require.NoError(t, os.WriteFile(f.dir.binary(r.SHA256), script("echo evil"), 0o700))
	f.supervise()
	f.ran(flashed)
	st := f.state()
	assert.Empty(t, st.Committed)
	assert.Contains(t, st.Failed.Reason, "its installed binary was altered")
}

func TestADownloadCutMidwayResumesFromTheLastChunkKept(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte("agent binary "), 100_000)
	r, z := f.release("2.0.0", body), stream(t, body)
	keys := []ed25519.PublicKey{f.pub}
	half := int64(len(z) / 2)
	s, err := f.dir.stage(protocol.ReleaseChunk{Release: r, Total: int64(len(z)), Data: z[:half]}, keys)
	require.NoError(t, err)
	require.Equal(t, half, s.Have)
	// The chunk sent again after the cut: answered, not written twice.
	s, err = f.dir.stage(protocol.ReleaseChunk{Release: r, Total: int64(len(z)), Data: z[:half]}, keys)
	require.NoError(t, err)
	assert.Equal(t, staged{Have: half}, s)
	s, err = f.dir.stage(protocol.ReleaseChunk{Release: r, Total: int64(len(z))}, keys)
	require.NoError(t, err)
	assert.Equal(t, staged{Have: half}, s, "a probe says where the next chunk starts")
	s = f.stageAll(r, z, 1000)
	assert.True(t, s.Installed)
	assert.NoError(t, f.dir.installed(r))
	assert.NoFileExists(t, f.dir.incoming(r.SHA256))
}

func TestAReleaseIsRefusedUnsignedUntrustedForeignOrNotWhatItSays(t *testing.T) {
	f := newFixture(t)
	body := []byte("binary")
	good := f.release("2.0.0", body)
	_, other, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	foreign := good
	foreign.Arch = map[string]string{"arm64": "amd64"}[runtime.GOARCH]
	if foreign.Arch == "" {
		foreign.Arch = "arm64"
	}
	unsigned := good
	unsigned.Signature = nil
	for name, c := range map[string]struct {
		r    agentrelease.Release
		body []byte
		want string
	}{
		"unsigned":  {unsigned, body, "release is not signed"},
		"untrusted": {agentrelease.Sign(good, other), body, "signed by a key this device does not trust"},
		"foreign":   {agentrelease.Sign(foreign, f.priv), body, "it is built for linux/" + foreign.Arch},
		"altered":   {good, []byte("BINARY"), "the download is not the release"},
	} {
		z := stream(t, c.body)
		_, err := f.dir.stage(protocol.ReleaseChunk{Release: c.r, Total: int64(len(z)), Data: z}, []ed25519.PublicKey{f.pub})
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), c.want, name)
		assert.NoFileExists(t, f.dir.binary(c.r.SHA256), name)
	}
}

// A disk that fills mid-download: the release is refused, naming the
// full disk, and what was downloaded is removed.
func TestADiskThatFillsMidDownloadRefusesTheReleaseAndKeepsNothing(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	f := newFixture(t)
	f.dir = DirOf(mnt)
	body := make([]byte, 2<<20)
	_, err := io.ReadFull(randReader{}, body) // incompressible
	require.NoError(t, err)
	r, z := f.release("2.0.0", body), stream(t, body)
	keys := []ed25519.PublicKey{f.pub}
	var have int64
	for {
		s, err := f.dir.stage(protocol.ReleaseChunk{Release: r, Offset: have, Total: int64(len(z)), Data: z[have:min(have+64<<10, int64(len(z)))]}, keys)
		if err != nil {
			assert.Contains(t, err.Error(), "the disk is full")
			break
		}
		require.False(t, s.Installed, "2 MiB fit a 256 KiB disk")
		have = s.Have
	}
	assert.NoFileExists(t, f.dir.incoming(r.SHA256))
}

// randReader is a cheap incompressible stream.
type randReader struct{}

func (randReader) Read(p []byte) (int, error) {
	sum := sha256.Sum256([]byte(time.Now().String()))
	for i := range p {
		p[i] = sum[i%32] ^ byte(i*131)
		if i%32 == 31 {
			sum = sha256.Sum256(sum[:])
		}
	}
	return len(p), nil
}

// A crash during the install leaves the whole stream and perhaps a
// temporary binary: the next probe installs the release.
func TestAnInstallCutByACrashFinishesAtTheNextProbe(t *testing.T) {
	f := newFixture(t)
	body := bytes.Repeat([]byte("agent binary "), 10_000)
	r, z := f.release("2.0.0", body), stream(t, body)
	_, err := f.dir.appendChunk(protocol.ReleaseChunk{Release: r, Total: int64(len(z)), Data: z})
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(f.dir.binary(r.SHA256)), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(f.dir.binary(r.SHA256)), ".tmp-"+r.SHA256+"-1"), body[:100], 0o600))

	s, err := f.dir.stage(protocol.ReleaseChunk{Release: r, Total: int64(len(z))}, []ed25519.PublicKey{f.pub})
	require.NoError(t, err)
	assert.True(t, s.Installed)
	assert.NoError(t, f.dir.installed(r))
	f.dir.removeUnused(State{Committed: []agentrelease.Release{r}})
	entries, err := os.ReadDir(filepath.Dir(f.dir.binary(r.SHA256)))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the temporary binary the crash left goes with the next clean-up")
}

// A state file that does not read is set aside, and the flashed agent
// runs: whatever befalls the data dir, the device runs an agent.
func TestAnUnreadableStateIsSetAsideAndTheFlashedAgentRuns(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, os.MkdirAll(string(f.dir), 0o700))
	require.NoError(t, os.WriteFile(f.dir.statePath(), []byte("{not json"), 0o600))
	f.supervise()
	f.ran(flashed)
	assert.FileExists(t, f.dir.statePath()+".unreadable")
}

// A disk too full to record a trial's start starts no trial: the agent
// that ran before runs, and the trial waits.
func TestADiskThatCannotRecordATrialsStartRunsThePreviousAgent(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	f := newFixture(t)
	f.dir = DirOf(mnt)
	f.trial("2.0.0", script("exec sleep 600"), time.Minute)
	fill, err := os.Create(filepath.Join(mnt, "fill"))
	require.NoError(t, err)
	_, err = io.Copy(fill, io.LimitReader(randReader{}, 1<<20))
	require.ErrorIs(t, err, syscall.ENOSPC)
	fill.Close()

	f.supervise()
	f.ran(flashed)
	st := f.state()
	require.NotNil(t, st.Trial, "the trial waits for a disk that takes its start")
	assert.False(t, st.Trial.Started)
}

// The agent is started from the file its check read: one renamed over
// the release's name after the check does not run.
func TestAReleaseRenamedOverAfterItsCheckIsNotTheOneThatRuns(t *testing.T) {
	f := newFixture(t)
	good := script(`echo good >> "$` + markerEnv + `"`)
	r := f.release("2.0.0", good)
	f.stageAll(r, stream(t, good), 1<<20)
	s := &Supervisor{Dir: f.dir, Keys: []ed25519.PublicKey{f.pub}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	checked, err := s.checked(r)
	require.NoError(t, err)
	evil := filepath.Join(string(f.dir), "evil")
	require.NoError(t, os.WriteFile(evil, script(`echo evil >> "$`+markerEnv+`"`), 0o700))
	require.NoError(t, os.Rename(evil, f.dir.binary(r.SHA256)))

	c, err := s.start(f.dir.binary(r.SHA256), checked, r.SHA256)
	require.NoError(t, err)
	assert.Equal(t, 0, c.wait(context.Background(), nil))
	b, err := os.ReadFile(f.marker)
	require.NoError(t, err)
	assert.Equal(t, "good\n", string(b))
}
