package importrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/edgeaip/edgeaip"

// rule is a package that must not depend on others, directly or through
// any chain of imports.
type rule struct {
	pkg string
	// forbidden are import paths; each also forbids every package under it.
	forbidden []string
	// forbiddenAlone are import paths forbidden themselves, and not the
	// packages under them: the server's root, whose parts are below it.
	forbiddenAlone []string
	why            string
}

var rules = []rule{
	{
		pkg:       module + "/server/internal/store",
		forbidden: []string{module + "/server/api"},
		why: "the store keeps rows; the HTTP API's types are built above it, " +
			"so that another store (PostgreSQL) implements the same interface without them",
	},
	{
		pkg:       module + "/server/internal/tasks",
		forbidden: []string{"github.com/mark3labs/mcp-go", module + "/server/dashboard", module + "/server/metrics/promhttp"},
		why: "the front door runs tasks for every surface and answers in its own types: it speaks no MCP, and serves " +
			"no page",
	},
	{
		pkg: module + "/server/internal/dispatch",
		forbidden: []string{module + "/server/plan", module + "/server/internal/identity", "github.com/mark3labs/mcp-go",
			module + "/server/dashboard"},
		why: "the links and the commands on them know nothing of plans, of who asked (the front door holds both) " +
			"or of the surfaces above",
	},
	{
		pkg:       module + "/server/internal/unrecorded",
		forbidden: []string{module + "/server/api", module + "/server/plan", module + "/server/metrics"},
		why: "the writes the store could not take are kept and retried in order, whatever they record: " +
			"the dispatcher and the session manager say what each one is",
	},
	{
		pkg:       module + "/server/internal/encodedonce",
		forbidden: []string{module + "/server/api", module + "/server/plan", module + "/server/internal/store"},
		why:       "parameters encoded once: the front door and the store both use it, so it knows neither, only the wire",
	},
	{
		pkg:       module + "/server/internal/lazylog",
		forbidden: []string{module + "/protocol", module + "/server/api", module + "/server/internal/store"},
		why:       "a logger that builds its attributes late: the command path's parts all use it, so it uses none of them",
	},
	{
		pkg: module + "/server",
		forbidden: []string{module + "/agent", module + "/sandbox", module + "/wasmtools/meter",
			"github.com/tetratelabs/wazero", "github.com/mark3labs/mcp-go/client", "github.com/nats-io/nats-server",
			"github.com/getkin/kin-openapi"},
		why: "the server checks parameters with the agent's schema checker, wasmtools/schema, and reads the manifest " +
			"of a module a scoped deployer installs, wasmtools/manifest, leaves; it runs no tools and links neither the agent nor a wasm runtime; " +
			"it serves MCP at /mcp (mcp-go's server) but proxies no MCP server, so it needs no MCP client; " +
			"a cluster node is a NATS client of the operator's NATS server, which only tests run in-process (internal/natstest); " +
			"tests hold its API to openapi.json with kin-openapi (httpapitest), which it does not link",
	},
	{
		pkg:            module + "/server/internal/identity",
		forbidden:      []string{module + "/server/plan", "github.com/mark3labs/mcp-go"},
		forbiddenAlone: []string{module + "/server"},
		why: "identity is a part of the server that the wiring hands what it needs (the store, a logger, hooks): " +
			"it knows neither the server that holds it, nor plans, nor MCP; the HTTP API's wire types (server/api) it may use",
	},
	{
		pkg:            module + "/server/internal/mcpgateway",
		forbidden:      []string{module + "/server/internal/httpapi", module + "/server/internal/wsgateway"},
		forbiddenAlone: []string{module + "/server"},
		why: "the MCP gateway is a surface over the front door, the scope checker and identity, which the wiring " +
			"hands it: it knows neither the server that holds it nor the other surfaces (the HTTP API, the WebSocket endpoints)",
	},
	{
		pkg:            module + "/server/internal/wsgateway",
		forbidden:      []string{module + "/server/internal/httpapi", module + "/server/internal/mcpgateway"},
		forbiddenAlone: []string{module + "/server"},
		why: "the WebSocket endpoints (device links, constellation clients) are a surface: no surface imports another, " +
			"and the wiring hands them what they need (the parts below, and funcs for the rest), never the server that holds them",
	},
	{
		pkg: module + "/server/internal/httpapi",
		forbidden: []string{"github.com/mark3labs/mcp-go", "github.com/getkin/kin-openapi",
			module + "/server/internal/mcpgateway", module + "/server/internal/wsgateway"},
		forbiddenAlone: []string{module + "/server"},
		why: "the HTTP API serves the routes of its table: the MCP gateway and the WebSocket it mounts as the " +
			"http.Handlers the root gives it, knowing neither them nor the root that wires them; openapi.json is " +
			"checked by tests (httpapitest), not by the server",
	},
	{
		pkg: module + "/server/internal/rollouts",
		forbidden: []string{module + "/server/internal/httpapi", module + "/server/internal/mcpgateway",
			module + "/server/internal/wsgateway", module + "/server/dashboard", "github.com/mark3labs/mcp-go"},
		forbiddenAlone: []string{module + "/server"},
		why: "the rollouts keep devices at a desired state through the front door, as any surface asks for a task: " +
			"they know no surface, and reach devices only through the front door",
	},
	{
		pkg:       module + "/cmd/aipctl",
		forbidden: []string{module + "/agent", "github.com/mark3labs/mcp-go", "github.com/jackc/pgx", "github.com/nats-io"},
		why:       "aipctl is the operator's small CLI: it links neither the device agent nor an MCP client nor a database driver",
	},
	{
		pkg:       module + "/cmd/aip-agent",
		forbidden: []string{module + "/server", "github.com/jackc/pgx", "modernc.org/sqlite", "github.com/nats-io"},
		why:       "the agent ships to small boards: it links nothing of the server's, no database driver (the server's store) and no NATS (between server nodes)",
	},
}

func TestImportRules(t *testing.T) {
	for _, r := range rules {
		t.Run(strings.TrimPrefix(r.pkg, module+"/"), func(t *testing.T) {
			graph, err := depGraph(r.pkg)
			require.NoError(t, err)
			var broken []string
			for _, f := range r.forbidden {
				if chain := graph.pathTo(r.pkg, f); chain != nil {
					broken = append(broken, fmt.Sprintf("%s must not depend on %s, but does: %s", r.pkg, f, strings.Join(chain, " → ")))
				}
			}
			for _, f := range r.forbiddenAlone {
				if chain := graph.pathToAlone(r.pkg, f); chain != nil {
					broken = append(broken, fmt.Sprintf("%s must not depend on %s, but does: %s", r.pkg, f, strings.Join(chain, " → ")))
				}
			}
			assert.Empty(t, broken, "why: %s", r.why)
		})
	}
}

// The check must be able to fail: a dependency known to exist is found,
// with the chain of imports that makes it.
func TestTheCheckFindsADependencyThroughOthers(t *testing.T) {
	pkg := module + "/server"
	graph, err := depGraph(pkg)
	require.NoError(t, err)
	chain := graph.pathTo(pkg, module+"/protocol")
	require.NotEmpty(t, chain)
	assert.Equal(t, pkg, chain[0])
	assert.True(t, strings.HasPrefix(chain[len(chain)-1], module+"/protocol"), "%v", chain)
	assert.NotEmpty(t, graph.pathTo(pkg, "modernc.org/sqlite"), "a dependency two imports away, through server/internal/store")
	assert.Nil(t, graph.pathTo(pkg, module+"/agent"))

	assert.NotEmpty(t, graph.pathTo(pkg, module+"/server/internal"), "packages under a path")
	assert.Nil(t, graph.pathToAlone(pkg, module+"/server/internal"), "only the path itself, which is no package")
	assert.NotEmpty(t, graph.pathToAlone(pkg, module+"/server/internal/store"))
}

// graph is each package's imports, as go list reports them.
type graph map[string][]string

// listed is a package as go list -json describes it.
type listed struct {
	ImportPath string
	Imports    []string
	Dir        string
	GoFiles    []string
	Module     *struct{ Path, GoMod string }
}

// depGraph lists pkg and everything it depends on (not its tests), with
// each one's imports.
func depGraph(pkg string) (graph, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command is needed to list dependencies: %w", err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Imports,Dir,GoFiles,Module", pkg)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s: %w: %s", pkg, err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s: reading its output: %w", pkg, err)
		}
		if err := p.watch(); err != nil {
			return nil, err
		}
		g[p.ImportPath] = p.Imports
	}
}

// watch reads, for go test's cache, what go list read about a package of
// our module: its folder, its files and go.mod. go list runs in a process
// of its own, whose reads the cache does not see; without these, a test
// run after an import was added would answer from the cache.
func (p listed) watch() error {
	if p.Module == nil || p.Module.Path != module {
		return nil
	}
	if _, err := os.ReadDir(p.Dir); err != nil {
		return fmt.Errorf("package %s: %w", p.ImportPath, err)
	}
	files := []string{p.Module.GoMod}
	for _, f := range p.GoFiles {
		files = append(files, filepath.Join(p.Dir, f))
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("package %s: %w", p.ImportPath, err)
		}
	}
	return nil
}

// pathTo is a chain of imports from pkg to forbidden or a package under
// it, shortest first found, or nil if pkg does not depend on it.
func (g graph) pathTo(pkg, forbidden string) []string {
	return g.pathWhere(pkg, func(p string) bool { return under(p, forbidden) })
}

// pathToAlone is pathTo for forbidden itself, not the packages under it.
func (g graph) pathToAlone(pkg, forbidden string) []string {
	return g.pathWhere(pkg, func(p string) bool { return p == forbidden })
}

// pathWhere is a chain of imports from pkg to a package that is, shortest
// first found, or nil if pkg depends on none.
func (g graph) pathWhere(pkg string, is func(string) bool) []string {
	prev := map[string]string{pkg: ""}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if is(p) {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, imp := range g[p] {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// under reports whether pkg is path or a package below it.
func under(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}
