package rollouts

import "sync"

// kept keeps the newest values made by digest, at most n: what a rollout
// sends every device (a module's stage_module parameters, an agent
// release compressed) is made once for them all.
type kept[V any] struct {
	n      int
	mu     sync.Mutex
	values map[string]V
	order  []string // oldest first
}

// get answers the value kept for digest, or builds it. Two callers that
// build one at once both build it; the first kept is the one answered.
func (k *kept[V]) get(digest string, build func() (V, error)) (V, error) {
	k.mu.Lock()
	v, ok := k.values[digest]
	k.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.values == nil {
		k.values = map[string]V{}
	}
	if _, ok := k.values[digest]; !ok {
		k.values[digest] = v
		k.order = append(k.order, digest)
		if len(k.order) > k.n {
			delete(k.values, k.order[0])
			k.order = k.order[1:]
		}
	}
	return k.values[digest], nil
}
