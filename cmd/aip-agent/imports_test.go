package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The agent is flashed onto small boards: what the server needs must not
// reach its binary. database/sql is matched exactly, because uuid needs
// only database/sql/driver's interfaces.
var (
	forbiddenPrefixes = []string{
		"modernc.org/sqlite",
		"github.com/prometheus/",
		"github.com/spf13/cobra",
		"github.com/edgeaip/edgeaip/server",
	}
	forbiddenExact = map[string]bool{"database/sql": true}
)

func TestAgentDoesNotImportServerDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if forbiddenExact[dep] {
			t.Errorf("aip-agent imports %s", dep)
		}
		for _, p := range forbiddenPrefixes {
			if strings.HasPrefix(dep, p) {
				t.Errorf("aip-agent imports %s", dep)
			}
		}
	}
}
