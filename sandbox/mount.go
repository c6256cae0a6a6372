package sandbox

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Mount exposes a host directory to tools under a guest path.
type Mount struct {
	HostPath  string
	GuestPath string
	ReadOnly  bool
	// Sub, if set, narrows the mount to a directory below HostPath, which
	// is resolved inside HostPath on every call: a symbolic link there,
	// even one a tool planted, cannot lead it out. Policies set it when a
	// tool asks for part of a granted directory.
	Sub string
}

// ParseMount parses "HOST[:GUEST][:ro]". GUEST defaults to HOST, so a tool
// sees the same paths an operator sees on the device.
func ParseMount(spec string) (Mount, error) {
	parts := strings.Split(spec, ":")
	m := Mount{}
	if n := len(parts); n > 1 && (parts[n-1] == "ro" || parts[n-1] == "rw") {
		m.ReadOnly = parts[n-1] == "ro"
		parts = parts[:n-1]
	}
	switch len(parts) {
	case 1:
		m.HostPath = parts[0]
	case 2:
		m.HostPath, m.GuestPath = parts[0], parts[1]
	default:
		return Mount{}, fmt.Errorf("mount %q: want HOST[:GUEST][:ro]", spec)
	}
	if m.HostPath == "" || (len(parts) == 2 && m.GuestPath == "") {
		return Mount{}, fmt.Errorf("mount %q: empty path", spec)
	}
	abs, err := filepath.Abs(m.HostPath)
	if err != nil {
		return Mount{}, fmt.Errorf("mount %q: %w", spec, err)
	}
	m.HostPath = abs
	if m.GuestPath == "" {
		m.GuestPath = filepath.ToSlash(abs)
	}
	if !path.IsAbs(m.GuestPath) {
		return Mount{}, fmt.Errorf("mount %q: guest path %q is not absolute", spec, m.GuestPath)
	}
	m.GuestPath = path.Clean(m.GuestPath)
	if fi, err := os.Stat(m.HostPath); err != nil {
		return Mount{}, fmt.Errorf("mount %q: %w", spec, err)
	} else if !fi.IsDir() {
		return Mount{}, fmt.Errorf("mount %q: %s is not a directory", spec, m.HostPath)
	}
	return m, nil
}

func (m Mount) String() string {
	s := m.hostDir() + ":" + m.GuestPath
	if m.ReadOnly {
		return s + ":ro"
	}
	return s
}

// hostDir names the host directory the mount shows, for people to read.
func (m Mount) hostDir() string {
	if m.Sub == "" {
		return m.HostPath
	}
	return filepath.Join(m.HostPath, m.Sub)
}

// open opens the mount's directory as a root that nothing can leave: the
// grant's own directory, then, for a narrowed mount, Sub inside it.
func (m Mount) open() (*os.Root, error) {
	root, err := os.OpenRoot(m.HostPath)
	if err != nil || m.Sub == "" {
		return root, err
	}
	defer root.Close()
	return root.OpenRoot(m.Sub)
}
