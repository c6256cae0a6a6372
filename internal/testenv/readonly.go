package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// MakeReadOnly makes the file at path one no process may write or
// replace, root included, until the test ends: mode 0400 for others, and
// the immutable attribute (chattr +i) for root, whom modes do not stop.
// It skips the test where neither can be had.
func MakeReadOnly(t testing.TB, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatalf("chmod 0400 %s: %v", path, err)
		}
		t.Cleanup(func() { os.Chmod(path, 0o600) })
		return
	}
	chattr, err := exec.LookPath("chattr")
	if err != nil {
		t.Skipf("running as root, a read-only file needs chattr (e2fsprogs): %v", err)
	}
	if out, err := exec.Command(chattr, "+i", path).CombinedOutput(); err != nil {
		t.Skipf("running as root, a read-only file needs chattr +i, which failed here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command(chattr, "-i", path).Run() })
}
