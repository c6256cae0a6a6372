package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// ClusterSources are what the cluster metrics of a node read.
type ClusterSources struct {
	// Self is the node's id and its epoch now: a node that lost its lease
	// rejoins at a new one.
	Self func() (string, int64)
	// NATSConnected reports whether the node's NATS connection is up.
	NATSConnected func() bool
	// LeasesHeld counts the devices whose lease the node holds.
	LeasesHeld func() int
}

// Outcomes of a command sent to another node, as the cross-node counter
// labels them: the holder's answers, and no_holder and error when there
// was none.
var CrossNodeOutcomes = []string{"sent", "stale", "between", "shutdown", "offline", "failed", "no_holder", "error"}

// clusterMetrics are a cluster node's own metrics. Every metric a node
// serves is its own: Prometheus scrapes each node, and its target labels
// name the node; edgeaip_cluster_node says which node and epoch it is.
type clusterMetrics struct {
	crossNode *prometheus.CounterVec
}

// Cluster registers a cluster node's metrics, for a node speaking
// inter-node protocol version.
func (m *Metrics) Cluster(version int, src ClusterSources) {
	m.cluster = &clusterMetrics{crossNode: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgeaip_cluster_cross_node_commands_total",
		Help: "Sends of commands to the node holding their device's link, by outcome: sent; stale, between, shutdown, offline, failed (the holder's answers); no_holder (nobody answered for the device) and error (NATS).",
	}, []string{"outcome"})}
	for _, o := range CrossNodeOutcomes {
		m.cluster.crossNode.WithLabelValues(o)
	}
	m.reg.MustRegister(m.cluster.crossNode,
		nodeCollector{self: src.Self, desc: prometheus.NewDesc("edgeaip_cluster_node",
			"1: this server is a cluster node, with this id, epoch (now: it changes when the node rejoins) and inter-node protocol version.",
			[]string{"node", "epoch"}, prometheus.Labels{"version": strconv.Itoa(version)})},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeaip_cluster_nats_connected",
			Help: "1 while the node's NATS connection is up; 0 while cross-node work is refused.",
		}, func() float64 {
			if src.NATSConnected() {
				return 1
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeaip_cluster_device_leases",
			Help: "Devices whose link lease this node holds (linked here, or between links here).",
		}, func() float64 { return float64(src.LeasesHeld()) }))
}

// CrossNodeCommand counts a send of a command to another node, by
// outcome (one of CrossNodeOutcomes).
func (m *Metrics) CrossNodeCommand(outcome string) {
	if m.cluster != nil {
		m.cluster.crossNode.WithLabelValues(outcome).Inc()
	}
}

// nodeCollector is edgeaip_cluster_node, whose node and epoch it reads at
// each scrape: a constant label would keep the epoch the process started
// with after the node rejoined at another.
type nodeCollector struct {
	desc *prometheus.Desc
	self func() (string, int64)
}

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	node, epoch := c.self()
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, node, strconv.FormatInt(epoch, 10))
}
