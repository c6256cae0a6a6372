package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
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
	// The toolchain running the tests has go list: an error here is a
	// broken build, which must fail the test rather than pass it unseen.
	cmd := exec.Command(testenv.Go(), "list", "-deps", ".")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/edgeaip/edgeaip/agent") {
		t.Fatalf("go list -deps listed no github.com/edgeaip/edgeaip/agent: %q", deps)
	}
	for _, dep := range deps {
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
