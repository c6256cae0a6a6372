package rollouts

import (
	"context"
	"sync"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
)

// stageCacheSize bounds the modules whose stage_module parameters are
// kept: a revision's, and the one before it.
const stageCacheSize = 8

// stageCache keeps the stage_module parameters of the modules being
// rolled out, wrapped once (encodedonce), so that a module is compressed,
// base64-encoded and encoded for the wire once for all the devices it
// goes to, not once per device: every device's command shares the map,
// which nothing writes once it is wrapped.
type stageCache struct {
	mu     sync.Mutex
	params map[string]map[string]any
	order  []string // oldest first
}

// stageParams are stage_module's parameters for the module kept as sha.
func (e *Engine) stageParams(ctx context.Context, sha string) (map[string]any, error) {
	c := &e.staging
	c.mu.Lock()
	p, ok := c.params[sha]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	m, err := e.cfg.Store.Rollouts().Module(ctx, sha)
	if err != nil {
		return nil, err
	}
	if p, err = protocol.StageModuleParams(m.Body); err != nil {
		return nil, err
	}
	encodedonce.Wrap(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.params == nil {
		c.params = map[string]map[string]any{}
	}
	if _, ok := c.params[sha]; !ok {
		c.params[sha] = p
		c.order = append(c.order, sha)
		if len(c.order) > stageCacheSize {
			delete(c.params, c.order[0])
			c.order = c.order[1:]
		}
	}
	return c.params[sha], nil
}
