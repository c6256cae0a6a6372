package importrules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tasksPkg is the front door's package: the one place a task's run is
// built.
const tasksPkg = module + "/server/internal/tasks"

// runBuilders are the names of tasks that build a task's run without
// the front door's admission: the front door calls them once an order
// passed, tests of what lies below admission call them, and no other code
// may.
var runBuilders = []string{"RunUnadmitted", "SessionSpec"}

// Every surface runs tasks through the front door: no code outside its
// package, tests aside, names what builds a run below admission.
func TestOnlyTheFrontDoorBuildsATasksRun(t *testing.T) {
	uses, err := namesUsed(module+"/...", runBuilders)
	require.NoError(t, err)
	var outside []string
	for _, u := range uses {
		if u.pkg != tasksPkg {
			outside = append(outside, u.String())
		}
	}
	assert.Empty(t, outside, "only %s builds a task's run; surfaces call its FrontDoor", tasksPkg)
}

// The check must be able to fail: inside the front door's package, where
// they are used, the names are found.
func TestTheRunBuildersAreFoundWhereTheyAreUsed(t *testing.T) {
	uses, err := namesUsed(tasksPkg, runBuilders)
	require.NoError(t, err)
	found := map[string]bool{}
	for _, u := range uses {
		found[u.name] = true
	}
	for _, name := range runBuilders {
		assert.True(t, found[name], "%s is used in %s", name, tasksPkg)
	}
}

// use is a name used in a package's file, at a line.
type use struct {
	pkg, file, name string
	line            int
}

func (u use) String() string {
	return fmt.Sprintf("%s:%d: %s (package %s)", u.file, u.line, u.name, u.pkg)
}

// namesUsed finds, in the non-test Go files of the packages pattern
// matches, every identifier named one of names.
func namesUsed(pattern string, names []string) ([]use, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,Module", pattern).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", pattern, err)
	}
	var uses []use
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list %s: reading its output: %w", pattern, err)
		}
		if err := p.watch(); err != nil {
			return nil, err
		}
		fset := token.NewFileSet()
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, fmt.Errorf("package %s: %w", p.ImportPath, err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && want[id.Name] {
					uses = append(uses, use{pkg: p.ImportPath, file: path, name: id.Name, line: fset.Position(id.Pos()).Line})
				}
				return true
			})
		}
	}
	return uses, nil
}
