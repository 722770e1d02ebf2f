package node

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/kafka"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
)

// scrapeTimeout bounds how long a scrape waits for the node's actors.
const scrapeTimeout = 2 * time.Second

// diskCollector exports each log directory's usage, asked of the placement
// actor at scrape time.
type diskCollector struct {
	root      *actor.RootContext
	placement *actor.PID

	bytes, capacity, free, reserve, partitions, writeRate, projected, online, full *prometheus.Desc
}

func newDiskCollector(root *actor.RootContext, placement *actor.PID) *diskCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("depot_log_dir_"+name, help, []string{"dir", "state"}, nil)
	}
	return &diskCollector{
		root:       root,
		placement:  placement,
		bytes:      desc("bytes", "Bytes of partition data in the log directory."),
		capacity:   desc("capacity_bytes", "Capacity of the log directory, declared or from the file system."),
		free:       desc("free_bytes", "Free bytes in the log directory."),
		reserve:    desc("reserve_bytes", "Free space the log directory keeps: under it, the directory is full."),
		partitions: desc("partitions", "Partitions in the log directory."),
		writeRate:  desc("write_bytes_per_second", "Bytes appended per second to the log directory's partitions."),
		projected:  desc("projected_bytes", "Bytes the log directory is expected to hold once growth meets retention."),
		online:     desc("online", "1 when the log directory serves (online or draining), 0 when offline."),
		full:       desc("full", "1 when the log directory is full (free space under its reserve): appends to its partitions are refused, reads go on."),
	}
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytes, c.capacity, c.free, c.reserve, c.partitions, c.writeRate, c.projected, c.online, c.full} {
		ch <- d
	}
}

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	resp, err := actors.Request[*messages.DescribeLogDirsResponse](context.Background(), c.root, c.placement, &messages.DescribeLogDirsRequest{}, scrapeTimeout)
	if err != nil {
		return
	}
	for _, d := range resp.Dirs {
		online, full := 1.0, 0.0
		switch d.State {
		case disks.LogDirOffline:
			online = 0
		case disks.LogDirFull:
			full = 1
		}
		for desc, v := range map[*prometheus.Desc]float64{
			c.bytes:      float64(d.Bytes),
			c.capacity:   float64(d.CapacityBytes),
			c.free:       float64(d.FreeBytes),
			c.reserve:    float64(d.ReserveBytes),
			c.partitions: float64(d.Partitions),
			c.writeRate:  d.WriteBytesPerS,
			c.projected:  float64(d.ProjectedBytes),
			c.online:     online,
			c.full:       full,
		} {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, d.Path, d.State)
		}
	}
}

// fileCacheCollector exports the node's file cache: one series of each,
// for the node, whatever its partition count. (The process collector's
// process_open_fds counts every descriptor of the process.)
type fileCacheCollector struct {
	files *disk.FileCache

	open, limit, pinned, handles, reopens, evictions *prometheus.Desc
}

func newFileCacheCollector(files *disk.FileCache) *fileCacheCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("depot_segment_files_"+name, help, nil, nil)
	}
	return &fileCacheCollector{
		files:     files,
		open:      desc("open", "Segment files (.log, .index, .timeindex) the node holds open."),
		limit:     desc("open_limit", "Most segment files the node holds open beyond the pinned ones (--max-open-files)."),
		pinned:    desc("pinned", "Open segment files that may not be closed now: in use, or holding unsynced bytes."),
		handles:   desc("handles", "Segment files of open logs, whether or not the node holds them open."),
		reopens:   desc("reopens_total", "Segment files opened again after the node closed them for others."),
		evictions: desc("evictions_total", "Segment files closed to stay within the limit."),
	}
}

func (c *fileCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.limit, c.pinned, c.handles, c.reopens, c.evictions} {
		ch <- d
	}
}

func (c *fileCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.files.Stats()
	ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(st.Capacity))
	ch <- prometheus.MustNewConstMetric(c.pinned, prometheus.GaugeValue, float64(st.Pinned))
	ch <- prometheus.MustNewConstMetric(c.handles, prometheus.GaugeValue, float64(st.Handles))
	ch <- prometheus.MustNewConstMetric(c.reopens, prometheus.CounterValue, float64(st.Reopens))
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(st.Evictions))
}

// fetchSessionCollector exports the Kafka listener's incremental fetch
// sessions (KIP-227), as Kafka's NumIncrementalFetchSessions,
// NumIncrementalFetchPartitionsCached and
// IncrementalFetchSessionEvictionsPerSec do.
type fetchSessionCollector struct {
	listener *kafka.Listener

	sessions, partitions, created, incremental, evicted *prometheus.Desc
}

func newFetchSessionCollector(l *kafka.Listener) *fetchSessionCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("depot_kafka_fetch_session"+name, help, nil, nil)
	}
	return &fetchSessionCollector{
		listener:    l,
		sessions:    desc("s", "Incremental fetch sessions the Kafka listener holds."),
		partitions:  desc("_partitions", "Partitions of the incremental fetch sessions held."),
		created:     desc("s_created_total", "Incremental fetch sessions created."),
		incremental: desc("_incremental_fetches_total", "Incremental fetches answered."),
		evicted:     desc("s_evicted_total", "Incremental fetch sessions evicted to make room for new ones."),
	}
}

func (c *fetchSessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.sessions, c.partitions, c.created, c.incremental, c.evicted} {
		ch <- d
	}
}

func (c *fetchSessionCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.listener.FetchSessionStats()
	ch <- prometheus.MustNewConstMetric(c.sessions, prometheus.GaugeValue, float64(st.Sessions))
	ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(st.Partitions))
	ch <- prometheus.MustNewConstMetric(c.created, prometheus.CounterValue, float64(st.Created))
	ch <- prometheus.MustNewConstMetric(c.incremental, prometheus.CounterValue, float64(st.Incremental))
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(st.Evicted))
}
