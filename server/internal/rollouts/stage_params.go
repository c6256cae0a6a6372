package rollouts

import (
	"context"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
)

// stageCacheSize bounds the modules whose stage_module parameters are
// kept: a revision's, and the one before it.
const stageCacheSize = 8

// stageParams are stage_module's parameters for the module kept as sha,
// wrapped once (encodedonce), so that a module is compressed,
// base64-encoded and encoded for the wire once for all the devices it
// goes to, not once per device: every device's command shares the map,
// which nothing writes once it is wrapped.
func (e *Engine) stageParams(ctx context.Context, sha string) (map[string]any, error) {
	return e.staging.get(sha, func() (map[string]any, error) {
		m, err := e.cfg.Store.Rollouts().Module(ctx, sha)
		if err != nil {
			return nil, err
		}
		p, err := protocol.StageModuleParams(m.Body)
		if err != nil {
			return nil, err
		}
		encodedonce.Wrap(p)
		return p, nil
	})
}
