//go:build unix

package sandbox

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Opening a FIFO would block until a writer came, in a host call no
// deadline reaches; a tool gets only files and directories.
func TestAFIFOInAGrantedDirIsRefusedNotWaitedOn(t *testing.T) {
	dir, _ := granted(t)
	fifo := filepath.Join(dir, "pipe")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	fsys := &rootFS{root: root, guest: "/data", denied: &denials{}, links: &sync.Mutex{}}
	done := make(chan experimentalsys.Errno, 1)
	go func() {
		_, errno := fsys.OpenFile("pipe", experimentalsys.O_RDONLY, 0)
		done <- errno
	}()
	select {
	case errno := <-done:
		assert.Equal(t, experimentalsys.EACCES, errno)
	case <-time.After(10 * time.Second):
		t.Fatal("opening the FIFO blocked")
	}
}
