package testenv

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Terminal is a command running on a terminal of its own, 100 columns by
// 30 rows (a tmux server of its own), for a test of what a user sees
// there: a program that behaves otherwise on a terminal, or waits for a
// key.
type Terminal struct {
	t      testing.TB
	socket string
}

// NewTerminal runs script in bash on a fresh terminal, in dir, with env,
// and ends it at the end of the test. It skips the test without tmux.
func NewTerminal(t testing.TB, dir string, env []string, script string) *Terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("no tmux on PATH: apt-get install -y tmux (make deps does)")
	}
	term := &Terminal{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	args := []string{"new-session", "-d", "-x", "100", "-y", "30", "-c", dir}
	for _, kv := range append(env, "TERM=xterm-256color") {
		args = append(args, "-e", kv)
	}
	// The terminal stays, with what it shows and the exit status, once
	// the script ends.
	term.tmux(append(args, "bash --norc -c "+shellQuote(script)+`; echo "[exited $?]"; sleep 86400`)...)
	t.Cleanup(func() { exec.Command("tmux", "-S", term.socket, "kill-server").Run() })
	return term
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (term *Terminal) tmux(args ...string) string {
	term.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", term.socket}, args...)...).CombinedOutput()
	if err != nil {
		term.t.Fatalf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Screen is what the terminal shows now, with the lines scrolled off it,
// its trailing blank lines left out.
func (term *Terminal) Screen() string {
	term.t.Helper()
	return strings.TrimRight(term.tmux("capture-pane", "-p", "-S", "-"), "\n")
}

// WaitFor waits up to timeout for the screen to satisfy ok, and returns
// it.
func (term *Terminal) WaitFor(what string, timeout time.Duration, ok func(screen string) bool) string {
	term.t.Helper()
	var s string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if s = term.Screen(); ok(s) {
			return s
		}
		time.Sleep(100 * time.Millisecond)
	}
	term.t.Fatalf("the terminal never showed %s; it shows:\n%s", what, s)
	return ""
}

// Keys types keys on the terminal, as tmux send-keys names them
// ("Enter", "C-c").
func (term *Terminal) Keys(keys ...string) {
	term.t.Helper()
	term.tmux(append([]string{"send-keys"}, keys...)...)
}

var exitedRe = regexp.MustCompile(`(?m)^\[exited (\d+)\]$`)

// Exited waits up to timeout for the script to end, and returns its exit
// status.
func (term *Terminal) Exited(timeout time.Duration) int {
	term.t.Helper()
	m := exitedRe.FindStringSubmatch(term.WaitFor("the script's end", timeout, exitedRe.MatchString))
	status, _ := strconv.Atoi(m[1])
	return status
}
