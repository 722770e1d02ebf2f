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
	resp, err := actors.Request[*messages.DescribeLogDirsResponse](context.Background(), c.root, c.placement, &messages.DescribeLogDirsRequest{TotalsOnly: true}, scrapeTimeout)
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

// fileCacheCollector exports the node's file cache (see disk.FileCache):
// one series of each, for the node, whatever its partition count. (The
// process collector's process_open_fds counts every descriptor of the
// process.)
type fileCacheCollector struct {
	files *disk.FileCache

	open, limit, pinned, unsynced, handles, reopens, evictions, evictionSyncs, waits *prometheus.Desc
}

func newFileCacheCollector(files *disk.FileCache) *fileCacheCollector {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("depot_segment_files_"+name, help, nil, nil)
	}
	return &fileCacheCollector{
		files:         files,
		open:          desc("open", "Descriptors the partition logs hold open: segment files (.log, .index, .timeindex), and directories being synced."),
		limit:         desc("open_limit", "Most descriptors the partition logs hold open at once (--max-open-files)."),
		pinned:        desc("pinned", "Open segment files that may not be closed now: being read, written or synced."),
		unsynced:      desc("unsynced", "Open segment files holding unsynced bytes: closed only once synced."),
		handles:       desc("handles", "Segment files of open logs, whether or not their descriptors are open."),
		reopens:       desc("reopens_total", "Segment files opened again after they were closed to make room."),
		evictions:     desc("evictions_total", "Segment files closed to make room."),
		evictionSyncs: desc("eviction_syncs_total", "Segment files synced to be closed to make room, no file without unsynced bytes being left to close."),
		waits:         desc("waits_total", "Opens that waited for room, every descriptor being in use."),
	}
}

func (c *fileCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.open, c.limit, c.pinned, c.unsynced, c.handles, c.reopens, c.evictions, c.evictionSyncs, c.waits} {
		ch <- d
	}
}

func (c *fileCacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.files.Stats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.open, st.Open)
	gauge(c.limit, st.Capacity)
	gauge(c.pinned, st.Pinned)
	gauge(c.unsynced, st.Unsynced)
	gauge(c.handles, st.Handles)
	counter(c.reopens, st.Reopens)
	counter(c.evictions, st.Evictions)
	counter(c.evictionSyncs, st.EvictionSyncs)
	counter(c.waits, st.Waits)
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
