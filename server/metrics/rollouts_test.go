package metrics

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rolloutSources reads rollouts, or fails with err; failed collects the
// errors it is told of.
func rolloutSources(rollouts []RolloutStatus, err error, failed *[]error) RolloutSources {
	return RolloutSources{
		Read:         func(context.Context) ([]RolloutStatus, error) { return rollouts, err },
		States:       []string{"rolling", "paused", "done"},
		DeviceStates: []string{"pending", "waiting", "done"},
		Failed:       func(err error) { *failed = append(*failed, err) },
	}
}

func TestEachRolloutShowsItsRevisionItsStateAndItsDevicesByStateWithZerosForTheOtherStates(t *testing.T) {
	m := testMetrics()
	var failed []error
	m.Rollouts(rolloutSources([]RolloutStatus{
		{Name: "kiosk-tools", Revision: 2, State: "rolling", Devices: map[string]int{"done": 1, "waiting": 2, "pending": 12}},
		// A state the lists lack still shows.
		{Name: "empty", Revision: 1, State: "approval", Devices: map[string]int{"removing": 1}},
	}, nil, &failed))
	want := `
# HELP edgeaip_rollout_devices Devices a rollout selects, by rollout and by their state in it: pending, waiting (offline, its wave open), changing, done, failed, removing, drift.
# TYPE edgeaip_rollout_devices gauge
edgeaip_rollout_devices{rollout="empty",state="done"} 0
edgeaip_rollout_devices{rollout="empty",state="pending"} 0
edgeaip_rollout_devices{rollout="empty",state="removing"} 1
edgeaip_rollout_devices{rollout="empty",state="waiting"} 0
edgeaip_rollout_devices{rollout="kiosk-tools",state="done"} 1
edgeaip_rollout_devices{rollout="kiosk-tools",state="pending"} 12
edgeaip_rollout_devices{rollout="kiosk-tools",state="waiting"} 2
# HELP edgeaip_rollout_revision The revision a rollout brings its devices to: 0 once its first revision was rolled back.
# TYPE edgeaip_rollout_revision gauge
edgeaip_rollout_revision{rollout="empty"} 1
edgeaip_rollout_revision{rollout="kiosk-tools"} 2
# HELP edgeaip_rollout_state 1 for the state a rollout is in, 0 for the others: rolling, waiting, approval, paused, done, rolling_back, rolled_back.
# TYPE edgeaip_rollout_state gauge
edgeaip_rollout_state{rollout="empty",state="approval"} 1
edgeaip_rollout_state{rollout="empty",state="done"} 0
edgeaip_rollout_state{rollout="empty",state="paused"} 0
edgeaip_rollout_state{rollout="empty",state="rolling"} 0
edgeaip_rollout_state{rollout="kiosk-tools",state="done"} 0
edgeaip_rollout_state{rollout="kiosk-tools",state="paused"} 0
edgeaip_rollout_state{rollout="kiosk-tools",state="rolling"} 1
`
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"edgeaip_rollout_devices", "edgeaip_rollout_revision", "edgeaip_rollout_state"))
	assert.Empty(t, failed)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	problems, err := promlint.New(rec.Body).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// A store that cannot be read leaves the rollouts out of the scrape, and
// says why, but the server's other metrics are served: they matter most
// when the store is in trouble.
func TestAScrapeWhoseRolloutsCannotBeReadServesTheOtherMetrics(t *testing.T) {
	m := testMetrics()
	var failed []error
	m.Rollouts(rolloutSources(nil, errors.New("database is locked"), &failed))
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Body.String(), "edgeaip_devices_connected 4")
	assert.NotContains(t, rec.Body.String(), "edgeaip_rollout_")
	require.Len(t, failed, 1)
	assert.EqualError(t, failed[0], "database is locked")
}
