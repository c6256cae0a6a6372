package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addRolloutDevices records rollout name with n devices, the i-th in
// state states[i%len(states)].
func addRolloutDevices(t testing.TB, s *Store, name string, n int, states ...string) {
	err := s.Write(context.Background(), func(tx *Tx) error {
		if _, err := tx.Rollouts().AddRevision(RolloutRevision{Name: name, Spec: json.RawMessage(`{}`), Tools: map[string]string{}}, "rolling"); err != nil {
			return err
		}
		for i := range n {
			d := RolloutDevice{Name: name, DeviceID: fmt.Sprintf("d%06d", i), Revision: 1, State: states[i%len(states)]}
			if err := tx.Rollouts().PutDevice(d); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
}

func TestRolloutStateCountsAreEachRolloutsDevicesByState(t *testing.T) {
	s, _ := openTest(t)
	addRolloutDevices(t, s, "kiosk", 5, "done", "done", "failed")
	addRolloutDevices(t, s, "depot", 1, "waiting")
	addRolloutDevices(t, s, "empty", 0, "done")
	counts, err := s.Rollouts().StateCounts(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []RolloutStateCount{
		{Name: "depot", State: "waiting", Devices: 1}, {Name: "kiosk", State: "done", Devices: 4}, {Name: "kiosk", State: "failed", Devices: 1},
	}, counts)
}

// A scrape reads the counts: its cost grows with the devices the
// rollouts select, in one query.
func BenchmarkRolloutStateCounts(b *testing.B) {
	for _, n := range []int{2_000, 20_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, err := Open(context.Background(), b.TempDir()+"/aip.db", Options{})
			require.NoError(b, err)
			defer s.Close()
			for r := range 10 {
				addRolloutDevices(b, s, fmt.Sprintf("r%d", r), n/10, "pending", "waiting", "changing", "done", "failed")
			}
			for b.Loop() {
				if _, err := s.Rollouts().StateCounts(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
