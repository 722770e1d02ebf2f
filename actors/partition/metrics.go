package partition

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are a node's figures of its partitions, each one series for all
// of them, so that a node's series do not grow with its partition count.
// Safe for concurrent use: every partition actor and fetcher of a node
// records into the same Metrics. A nil *Metrics records nothing.
type Metrics struct {
	// flushSeconds is the time of each group commit, from the partition's
	// asking to its fsync's end: its wait for its log dir's flusher
	// included.
	flushSeconds prometheus.Histogram
	// ackWaitSeconds is how long an acks=all produce waited, from its
	// append on the leader to its answer: for the ISR's fetches and the
	// leader's fsync.
	ackWaitSeconds prometheus.Histogram
	// replicaFetchSeconds is the time from a follower's fetch to its
	// answer, the leader's wait for new records included.
	replicaFetchSeconds prometheus.Histogram
	// isrShrinks and isrExpands count the ISR changes the controller took
	// from this node's leaders.
	isrShrinks, isrExpands prometheus.Counter
	// fetchParts is the number of partitions each consumer's fetch of
	// several partitions names.
	fetchParts prometheus.Histogram
	// dormant is the number of partitions started in the background
	// whose logs are not open yet.
	dormant prometheus.Gauge
}

// latencyBuckets go from 100 µs to about 13 s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(100e-6, 2, 18)

// NewMetrics makes a node's partition metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "depot_log_flush_seconds", Buckets: latencyBuckets,
			Help: "Time of each group commit of a partition's log (acks=all), from its start to its fsync's end, the wait for the log dir's flusher included, over the node's partitions.",
		}),
		ackWaitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "depot_produce_ack_wait_seconds", Buckets: latencyBuckets,
			Help: "Time from an acks=all batch's append on the leader to its answer: the in-sync replicas' fetches and the leader's fsync.",
		}),
		replicaFetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "depot_replica_fetch_seconds", Buckets: latencyBuckets,
			Help: "Time from a follower's fetch to its answer, the leader's wait for new records included.",
		}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "depot_isr_shrinks_total", Help: "Followers this node's leaders took out of their ISR.",
		}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "depot_isr_expands_total", Help: "Followers this node's leaders took back into their ISR.",
		}),
		fetchParts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "depot_consumer_fetch_partitions", Buckets: prometheus.ExponentialBuckets(1, 2, 17),
			Help: "Partitions named by each consumer's fetch of several partitions of this node (FetchPartitionsRequest): one request, one wait and two timers for them all.",
		}),
		dormant: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "depot_partitions_unopened",
			Help: "Partitions of this node started in the background, after a restart or a topic's creation, whose logs are not open yet: each opens on its first request, or in the background; 0 once every partition is readable.",
		}),
	}
	reg.MustRegister(m.flushSeconds, m.ackWaitSeconds, m.replicaFetchSeconds, m.isrShrinks, m.isrExpands, m.fetchParts, m.dormant)
	return m
}

func (m *Metrics) flushed(d time.Duration) {
	if m != nil {
		m.flushSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) ackWaited(d time.Duration) {
	if m != nil {
		m.ackWaitSeconds.Observe(d.Seconds())
	}
}

func (m *Metrics) replicaFetched(d time.Duration) {
	if m != nil {
		m.replicaFetchSeconds.Observe(d.Seconds())
	}
}

// isrChanged counts a change of the ISR from before to after.
func (m *Metrics) isrChanged(before, after []int32) {
	if m == nil {
		return
	}
	in := make(map[int32]bool, len(before))
	for _, id := range before {
		in[id] = true
	}
	for _, id := range after {
		if in[id] {
			delete(in, id)
		} else {
			m.isrExpands.Inc()
		}
	}
	m.isrShrinks.Add(float64(len(in)))
}

// consumerFetched counts a consumer's fetch of parts partitions.
func (m *Metrics) consumerFetched(parts int) {
	if m != nil {
		m.fetchParts.Observe(float64(parts))
	}
}

// setDormant records the number of partitions whose logs are not open yet.
func (m *Metrics) setDormant(n int) {
	if m != nil {
		m.dormant.Set(float64(n))
	}
}

// Unopened is the number of partitions started in the background whose
// logs are not open yet (depot_partitions_unopened); 0 for a nil Metrics.
func (m *Metrics) Unopened() int {
	if m == nil {
		return 0
	}
	var out dto.Metric
	if err := m.dormant.Write(&out); err != nil {
		return 0
	}
	return int(out.GetGauge().GetValue())
}
