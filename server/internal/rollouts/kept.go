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
	// building are the values being made: a caller that wants one waits
	// for it rather than make it again (a wave of 200 devices would
	// compress a release 200 times over).
	building map[string]*build[V]
}

// build is a value being made, done once it is.
type build[V any] struct {
	done chan struct{}
	v    V
	err  error
}

// get answers the value kept for digest, or makes it with produce, once
// however many callers ask at once.
func (k *kept[V]) get(digest string, produce func() (V, error)) (V, error) {
	k.mu.Lock()
	if v, ok := k.values[digest]; ok {
		k.mu.Unlock()
		return v, nil
	}
	if b, ok := k.building[digest]; ok {
		k.mu.Unlock()
		<-b.done
		return b.v, b.err
	}
	if k.building == nil {
		k.values, k.building = map[string]V{}, map[string]*build[V]{}
	}
	b := &build[V]{done: make(chan struct{})}
	k.building[digest] = b
	k.mu.Unlock()

	b.v, b.err = produce()
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.building, digest)
	close(b.done)
	if b.err == nil {
		k.values[digest] = b.v
		k.order = append(k.order, digest)
		if len(k.order) > k.n {
			delete(k.values, k.order[0])
			k.order = k.order[1:]
		}
	}
	return b.v, b.err
}
