package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingFS is the real file system, with a log of what the outbox does
// with it, in order: "write A r1" for each record written, "sync" for each
// fsync of a journal, "syncdir", and the test's own events. A killed
// process keeps its page cache, so only this order shows whether what must
// be on disk was fsynced in time.
type recordingFS struct {
	osFS
	mu     sync.Mutex
	events []string
	// holdAfter, if set, is a record ("R r1") after whose write the next
	// fsync waits until release is closed; held is closed when it starts
	// waiting.
	holdAfter     string
	holding       bool
	held, release chan struct{}
	// failDirSyncs is how many of the next directory fsyncs fail, and
	// failCreates how many of the next file creations.
	failDirSyncs, failCreates int
}

func (fs *recordingFS) Create(path string) (outboxFile, error) {
	fs.mu.Lock()
	if fs.failCreates > 0 {
		fs.failCreates--
		fs.mu.Unlock()
		return nil, fmt.Errorf("create %s: injected failure", path)
	}
	fs.mu.Unlock()
	f, err := fs.osFS.Create(path)
	if err != nil {
		return nil, err
	}
	return &recordingFile{outboxFile: f, fs: fs}, nil
}

func (fs *recordingFS) SyncDir(dir string) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.events = append(fs.events, "syncdir")
	if fs.failDirSyncs > 0 {
		fs.failDirSyncs--
		return fmt.Errorf("syncdir %s: injected failure", dir)
	}
	return fs.osFS.SyncDir(dir)
}

// event adds the test's own event to the log.
func (fs *recordingFS) event(e string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.events = append(fs.events, e)
}

func (fs *recordingFS) log() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.events)
}

// hold makes the fsync that follows the write of record wait for release.
func (fs *recordingFS) hold(t *testing.T, record string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.holdAfter, fs.held, fs.release = record, make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { fs.unhold() })
}

func (fs *recordingFS) unhold() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if !isClosed(fs.release) {
		close(fs.release)
	}
}

type recordingFile struct {
	outboxFile
	fs *recordingFS
}

// Write logs each record in p: the outbox writes whole records.
func (f *recordingFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	for rest := p; len(rest) >= recHeaderLen; {
		n := recHeaderLen + int(binary.BigEndian.Uint32(rest))
		var rec outboxRecord
		if n > len(rest) || protocol.CBOR.UnmarshalValue(rest[recHeaderLen:n], &rec) != nil {
			break
		}
		e := "write " + rec.Kind + " " + rec.ResponseID
		f.fs.events = append(f.fs.events, e)
		f.fs.holding = f.fs.holding || e == "write "+f.fs.holdAfter
		rest = rest[n:]
	}
	f.fs.mu.Unlock()
	return f.outboxFile.Write(p)
}

func (f *recordingFile) Sync() error {
	f.fs.mu.Lock()
	f.fs.events = append(f.fs.events, "sync")
	hold := f.fs.holding
	f.fs.holding = false
	f.fs.mu.Unlock()
	if hold {
		close(f.fs.held)
		<-f.fs.release
	}
	return f.outboxFile.Sync()
}

// observedTool is a real tool whose calls are logged as "tool CALL_ID".
type observedTool struct {
	tool
	fs *recordingFS
}

func (t *observedTool) call(ctx context.Context, params map[string]any) protocol.Result {
	t.fs.event("tool")
	return t.tool.call(ctx, params)
}

// observeEcho has the agent's fixtures.echo log its calls to fs.
func observeEcho(t *testing.T, a *Agent, fs *recordingFS) {
	echo := a.computers.findBase("fixtures", "echo")
	require.NotNil(t, echo)
	observed := &observedTool{tool: echo, fs: fs}
	require.NoError(t, a.computers.canSwapBase(echo, observed))
	a.computers.swapBase(echo, observed)
}

// between reports whether want occurs in log after the first from and
// before the first to.
func between(log []string, from, want, to string) bool {
	i, j := slices.Index(log, from), slices.Index(log, to)
	return i >= 0 && j > i && slices.Contains(log[i+1:j], want)
}

func TestACommandIsOnDiskBeforeItRunsAndItsResultsBeforeTheyGoOut(t *testing.T) {
	p := newTestPeer(t)
	fs := &recordingFS{}
	ta := startAgentOn(t, agentConfig(t, p.url()), fs)
	observeEcho(t, ta.Agent, fs)
	l := p.next(t)

	m := newCommand("s1", action("echo", map[string]any{"msg": "hi"}))
	l.send(t, m)
	res := l.results(t, m.ResponseID)
	require.Equal(t, protocol.ResultSuccess, res[0].Status, res[0].Error)
	fs.event("received")

	log := fs.log()
	assert.True(t, between(log, "write A "+m.ResponseID, "sync", "tool"), "the accept record is fsynced before the tool runs: %q", log)
	assert.True(t, between(log, "write R "+m.ResponseID, "sync", "received"), "the results are fsynced before they go out: %q", log)
}

func TestResultsDoNotGoOutBeforeTheirRecordIsOnDiskEvenOnANewLink(t *testing.T) {
	p := newTestPeer(t)
	fs := &recordingFS{}
	startAgentOn(t, agentConfig(t, p.url()), fs)
	l := p.next(t)

	m := newCommand("s1", action("echo", map[string]any{"msg": "hi"}))
	fs.hold(t, "R "+m.ResponseID)
	l.send(t, m)
	<-fs.held // the results are written, not yet fsynced
	l.conn.CloseNow()
	l2 := p.next(t) // a registration sends what is owed
	l2.quiet(t, 500*time.Millisecond)
	fs.unhold()
	assert.Equal(t, protocol.ResultSuccess, l2.results(t, m.ResponseID)[0].Status, "they go out once on disk")
}
