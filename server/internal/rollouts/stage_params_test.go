package rollouts

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/server/internal/encodedonce"
	"github.com/edgeaip/edgeaip/server/internal/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A module is compressed and encoded once for every device it is staged
// on: each device's stage_module command shares one set of parameters,
// whose values keep their encodings.
func TestAModulesStageParametersAreMadeOnceForAllItsDevices(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "test.db"), store.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e := New(Config{Store: st})
	var shas []string
	for i := range stageCacheSize + 1 {
		m := store.Module{SHA256: string(rune('a' + i)), Tool: "t", Body: []byte{byte(i)}}
		require.NoError(t, st.Write(ctx, func(tx *store.Tx) error { return tx.Rollouts().PutModule(m) }))
		shas = append(shas, m.SHA256)
	}
	first, err := e.stageParams(ctx, shas[0])
	require.NoError(t, err)
	again, err := e.stageParams(ctx, shas[0])
	require.NoError(t, err)
	assert.Equal(t, reflect.ValueOf(first).Pointer(), reflect.ValueOf(again).Pointer(), "one map for every device")
	assert.IsType(t, &encodedonce.Value{}, first["module"], "wrapped once, so that nothing writes the shared map")

	for _, sha := range shas[1:] {
		_, err := e.stageParams(ctx, sha)
		require.NoError(t, err)
	}
	assert.Len(t, e.staging.values, stageCacheSize, "bounded")
	assert.NotContains(t, e.staging.values, shas[0], "the oldest goes first")
}

// Callers that want one value at once wait for the one making it: a wave
// of devices compresses a release once, not once a device.
func TestAValueWantedByManyAtOnceIsMadeOnce(t *testing.T) {
	k := kept[int]{n: 2}
	var made atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			v, err := k.get("a", func() (int, error) {
				made.Add(1)
				<-release
				return 7, nil
			})
			assert.NoError(t, err)
			assert.Equal(t, 7, v)
		})
	}
	require.Eventually(t, func() bool { return made.Load() == 1 }, 10*time.Second, time.Millisecond)
	close(release)
	wg.Wait()
	assert.Equal(t, int32(1), made.Load())
}
