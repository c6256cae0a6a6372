package metrics

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// RolloutStatus is what the rollout metrics show of one rollout.
type RolloutStatus struct {
	Name string
	// Revision is the revision its devices are brought to.
	Revision int
	State    string
	// Devices are its devices by their state in it.
	Devices map[string]int
}

// RolloutSources are what the rollout metrics read at each scrape.
type RolloutSources struct {
	// Read is every rollout's status, as the store has it now.
	Read func(ctx context.Context) ([]RolloutStatus, error)
	// States are the states a rollout may be in, DeviceStates those of a
	// device in one: each has a series of every rollout, at 0 when it is
	// not in that state or has no device in it, so that no series comes
	// and goes with the state.
	States, DeviceStates []string
	// Failed is told why a Read failed: that scrape has no rollout
	// series, and the others are served still.
	Failed func(error)
}

// rolloutReadTimeout bounds a scrape's read of the rollouts, below
// Prometheus' default scrape timeout of 10 s.
const rolloutReadTimeout = 5 * time.Second

// rolloutCollector reads the rollouts from the store at each scrape:
// they are the store's, shared by every node of a cluster, and kept by
// no node in memory.
type rolloutCollector struct {
	src                      RolloutSources
	devices, state, revision *prometheus.Desc
}

// Rollouts registers the rollout metrics, read from src at each scrape.
func (m *Metrics) Rollouts(src RolloutSources) {
	m.reg.MustRegister(&rolloutCollector{
		src: src,
		devices: prometheus.NewDesc("edgeaip_rollout_devices",
			"Devices a rollout selects, by rollout and by their state in it: pending, waiting (offline, its wave open), changing, done, failed, removing, drift.",
			[]string{"rollout", "state"}, nil),
		state: prometheus.NewDesc("edgeaip_rollout_state",
			"1 for the state a rollout is in, 0 for the others: rolling, waiting, approval, paused, done, rolling_back, rolled_back.",
			[]string{"rollout", "state"}, nil),
		revision: prometheus.NewDesc("edgeaip_rollout_revision",
			"The revision a rollout brings its devices to: 0 once its first revision was rolled back.",
			[]string{"rollout"}, nil),
	})
}

// Describe sends the descriptions of the rollout metrics.
func (c *rolloutCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.devices
	ch <- c.state
	ch <- c.revision
}

// Collect reads the rollouts and sends their series.
func (c *rolloutCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), rolloutReadTimeout)
	defer cancel()
	all, err := c.src.Read(ctx)
	if err != nil {
		c.src.Failed(err)
		return
	}
	for _, r := range all {
		ch <- prometheus.MustNewConstMetric(c.revision, prometheus.GaugeValue, float64(r.Revision), r.Name)
		in := map[string]int{r.State: 1}
		for _, s := range withOthers(c.src.States, in) {
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, float64(in[s]), r.Name, s)
		}
		for _, s := range withOthers(c.src.DeviceStates, r.Devices) {
			ch <- prometheus.MustNewConstMetric(c.devices, prometheus.GaugeValue, float64(r.Devices[s]), r.Name, s)
		}
	}
}

// withOthers is states, then the states counts has that states lacks
// (one newer than the list), sorted.
func withOthers(states []string, counts map[string]int) []string {
	out := slices.Clone(states)
	for _, s := range slices.Sorted(maps.Keys(counts)) {
		if !slices.Contains(states, s) {
			out = append(out, s)
		}
	}
	return out
}
