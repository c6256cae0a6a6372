package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/sys"
)

// stderrTail is how much of stderr a failure carries.
const stderrTail = 1024

// Errors a failed call wraps, for errors.Is.
var (
	ErrTimeout      = errors.New("timed out")
	ErrExit         = errors.New("exited with status")
	ErrMemory       = errors.New("memory limit reached")
	ErrTrap         = errors.New("trapped")
	ErrOutputTooBig = errors.New("output too large")
	ErrCanceled     = errors.New("canceled")
)

// Result is the outcome of one call.
type Result struct {
	// Stdout is what the tool wrote: its result.
	Stdout []byte
	// Err is nil on success. Otherwise it wraps one of the Err* values and
	// says what happened, with the tail of stderr where there is one.
	Err   error
	Usage Usage
}

// Usage is what a call consumed.
type Usage struct {
	Fuel        uint64
	Wall        time.Duration
	MemoryPages uint32 // peak linear memory
	StdoutBytes int64
}

// Call runs t once in a fresh instance, with params (a JSON object) on
// stdin. It never panics on a misbehaving module; every failure is in
// Result.Err.
func (s *Sandbox) Call(ctx context.Context, t *Tool, params []byte) Result {
	ctx, cancelTimeout := context.WithTimeout(ctx, t.limits.Timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	stdout := &cappedBuffer{max: t.limits.StdoutBytes}
	stderr := &cappedBuffer{max: t.limits.StderrBytes}
	stdout.onOverflow = func() { cancel(fmt.Errorf("%w: stdout exceeded %d bytes", ErrOutputTooBig, t.limits.StdoutBytes)) }
	stderr.onOverflow = func() { cancel(fmt.Errorf("%w: stderr exceeded %d bytes", ErrOutputTooBig, t.limits.StderrBytes)) }

	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(t.name).
		WithStdin(bytes.NewReader(params)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(s.fs).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)

	mem := &callMemory{limit: uint64(t.limits.MemoryPages) * pageSize}
	start := time.Now()
	mod, err := s.rt.InstantiateModule(withCallMemory(ctx, mem), t.mod, cfg)
	res := Result{Usage: Usage{Wall: time.Since(start), StdoutBytes: int64(stdout.buf.Len()), MemoryPages: mem.peakPages()}}
	if mod != nil {
		mod.Close(context.WithoutCancel(ctx))
	}
	res.Err = s.classify(ctx, t, err, stderr)
	if res.Err != nil && mem.refused {
		res.Err = fmt.Errorf("%w (%d pages): %w", ErrMemory, t.limits.MemoryPages, res.Err)
	}
	if res.Err == nil {
		res.Stdout = stdout.buf.Bytes()
	}
	return res
}

// classify turns what wazero returned into the error a Result carries.
func (s *Sandbox) classify(ctx context.Context, t *Tool, err error, stderr *cappedBuffer) error {
	if err == nil {
		return nil
	}
	prefix := fmt.Sprintf("tool %q", t.name)
	if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrOutputTooBig) {
		return fmt.Errorf("%s: %w", prefix, cause)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return fmt.Errorf("%s: %w after %s", prefix, ErrTimeout, t.limits.Timeout)
		case sys.ExitCodeContextCanceled:
			return fmt.Errorf("%s: %w: %w", prefix, ErrCanceled, context.Cause(ctx))
		}
		return fmt.Errorf("%s: %w %d%s", prefix, ErrExit, exit.ExitCode(), stderrSuffix(stderr))
	}
	return fmt.Errorf("%s: %w: %s%s", prefix, ErrTrap, trapMessage(err), stderrSuffix(stderr))
}

func stderrSuffix(stderr *cappedBuffer) string {
	tail := strings.TrimSpace(stderr.tail(stderrTail))
	if tail == "" {
		return ""
	}
	return ": " + tail
}

// trapMessage keeps what a trap error says, without the module and
// function wazero prefixes or the stack trace it appends.
func trapMessage(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if _, rest, ok := strings.Cut(s, "] failed: "); ok {
		s = rest
	}
	return s
}
