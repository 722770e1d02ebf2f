package metadata

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/replicas"
	"github.com/depot-dev/depot/messages"
)

// scaleCluster is a simulated cluster: the metadata log a controller writes
// for it, entry by entry, and the image the log leads to.
type scaleCluster struct {
	// log is the metadata log: one batch of records an entry.
	log   [][]*messages.MetadataRecord
	image *Image
	// dirs are each node's two log directory ids.
	dirs map[int32][2]string
}

// apply replays one entry into a delta over c.image and applies it, as a
// node applies a committed entry.
func (c *scaleCluster) apply(tb testing.TB, recs []*messages.MetadataRecord) {
	tb.Helper()
	d := NewDelta(c.image, nil)
	for _, r := range recs {
		require.NoError(tb, d.Replay(r))
	}
	c.image = d.Apply()
	c.log = append(c.log, recs)
}

// createTopic is what the active controller does for a create: the
// replicas by the load-aware rule from the leaders each node has, one
// entry for the topic, then, as each node starts its replicas, one entry
// of the log dirs it chose for them.
func (c *scaleCluster) createTopic(tb testing.TB, name string, partitions, rf int) {
	tb.Helper()
	leaders := map[int32]int{}
	c.image.eachPartition(func(_ *Topic, p *Partition) { leaders[p.Leader]++ })
	var nodes []replicas.Node
	for _, n := range c.image.Nodes() {
		nodes = append(nodes, replicas.Node{ID: n.ID, Fenced: n.Fenced, Leaders: leaders[n.ID]})
	}
	assigned, err := replicas.LoadAware(nodes, partitions, rf)
	require.NoError(tb, err)
	c.apply(tb, []*messages.MetadataRecord{CreateTopic(&messages.CreateTopicRequest{Name: name, Partitions: int32(partitions)}, NewTopicID(), assigned)})
	t, _ := c.image.Topic(name)
	for _, n := range c.image.Nodes() {
		var chosen []*messages.PartitionAssignment
		for _, a := range t.Assignments(n.ID) {
			a.DirId = c.dirs[n.ID][a.Partition%2]
			chosen = append(chosen, a)
		}
		if recs := c.image.AssignDirs(chosen); len(recs) > 0 {
			c.apply(tb, recs)
		}
	}
}

// newScaleCluster simulates a cluster of nodes registered and unfenced,
// and topics of partitions each with replication factor rf.
func newScaleCluster(tb testing.TB, nodes, topics, partitions, rf int) *scaleCluster {
	tb.Helper()
	c := &scaleCluster{image: Empty(), dirs: map[int32][2]string{}}
	c.apply(tb, []*messages.MetadataRecord{NameCluster(NewClusterID())})
	for id := int32(1); id <= int32(nodes); id++ {
		dirs := [2]string{NewClusterID(), NewClusterID()}
		c.dirs[id] = dirs
		c.apply(tb, []*messages.MetadataRecord{RegisterNode(&messages.RegisterNodeRequest{
			NodeId: id, Address: fmt.Sprintf("10.0.%d.%d:7070", id/256, id%256), Rack: fmt.Sprintf("rack-%d", id%3),
			Incarnation: uint64(id) << 32, DirIds: dirs[:],
		})})
		c.apply(tb, c.image.Unfence(id))
	}
	for i := range topics {
		c.createTopic(tb, fmt.Sprintf("topic-%03d", i), partitions, rf)
	}
	return c
}

// replayAll is what restoring a snapshot does: every record into one delta
// over the empty image.
func replayAll(tb testing.TB, recs []*messages.MetadataRecord) *Image {
	tb.Helper()
	d := NewDelta(Empty(), nil)
	for _, r := range recs {
		require.NoError(tb, d.Replay(r))
	}
	return d.Apply()
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The metadata of 100 nodes and 100,000 partitions (100 topics of 1,000),
// with one replica of each partition and with three: the size of the
// metadata log and of a snapshot, the time to apply the log entry by entry
// and to restore the snapshot, and the time of one more change of each
// kind. The figures are logged; the test asserts that the image is right.
func TestImageOf100NodesAnd100kPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the metadata of 100,000 partitions, some seconds")
	}
	const nodes, topics, partitions = 100, 100, 1000
	for _, rf := range []int{1, 3} {
		t.Run(fmt.Sprintf("rf%d", rf), func(t *testing.T) {
			c := newScaleCluster(t, nodes, topics, partitions, rf)

			// Every node leads its share, and holds its share of replicas.
			led, held := map[int32]int{}, map[int32]int{}
			c.image.eachPartition(func(_ *Topic, p *Partition) {
				led[p.Leader]++
				for i, r := range p.Replicas {
					held[r]++
					require.NotEmpty(t, p.Dirs[i])
				}
			})
			require.Len(t, led, nodes)
			for id := int32(1); id <= nodes; id++ {
				require.Equal(t, topics*partitions/nodes, led[id], "leaders of node %d", id)
				require.InDelta(t, rf*topics*partitions/nodes, held[id], float64(topics), "replicas of node %d", id)
			}

			logBytes, records := 0, 0
			for _, e := range c.log {
				logBytes += proto.Size(&messages.MetadataBatch{Records: e})
				records += len(e)
			}

			// A follower that applies the whole log, entry by entry.
			start := time.Now()
			follower := Empty()
			for _, e := range c.log {
				d := NewDelta(follower, nil)
				for _, r := range e {
					require.NoError(t, d.Replay(r))
				}
				follower = d.Apply()
			}
			applyLog := time.Since(start)

			// A snapshot, taken and restored.
			start = time.Now()
			snapshot, err := proto.Marshal(&messages.MetadataBatch{Records: c.image.Records()})
			require.NoError(t, err)
			take := time.Since(start)
			// The heap the restored image holds, the snapshot's records
			// gone.
			var restored *Image
			var restore time.Duration
			var snapshotRecords int
			heapBefore := heapInUse()
			func() {
				start := time.Now()
				var batch messages.MetadataBatch
				require.NoError(t, proto.Unmarshal(snapshot, &batch))
				restored = replayAll(t, batch.GetRecords())
				restore = time.Since(start)
				snapshotRecords = len(batch.GetRecords())
			}()
			heapImage := heapInUse() - heapBefore
			// Only the restored image may have come or gone between the
			// two readings.
			runtime.KeepAlive(snapshot)
			runtime.KeepAlive(follower)
			runtime.KeepAlive(c)
			for _, im := range []*Image{follower, restored} {
				require.True(t, proto.Equal(&messages.MetadataBatch{Records: c.image.Records()}, &messages.MetadataBatch{Records: im.Records()}))
			}

			// One more change of each kind, from the records generated
			// from the image to the image they lead to.
			timeChange := func(base *Image, gen func(im *Image) []*messages.MetadataRecord) (time.Duration, *Image, int) {
				start := time.Now()
				recs := gen(base)
				d := NewDelta(base, nil)
				for _, r := range recs {
					require.NoError(t, d.Replay(r))
				}
				next := d.Apply()
				return time.Since(start), next, len(recs)
			}
			victim := int32(nodes / 2)
			fence, fenced, fenceRecords := timeChange(c.image, func(im *Image) []*messages.MetadataRecord { return im.Fence(victim) })
			fenced.eachPartition(func(_ *Topic, p *Partition) {
				require.NotEqual(t, victim, p.Leader)
			})
			unfence, _, _ := timeChange(fenced, func(im *Image) []*messages.MetadataRecord { return im.Unfence(victim) })
			topic0, _ := c.image.Topic("topic-000")
			move, _, _ := timeChange(c.image, func(im *Image) []*messages.MetadataRecord {
				p := &topic0.Partitions[partitions/2]
				return []*messages.MetadataRecord{changeRecord(topic0.Name, p, p.Replicas[len(p.Replicas)-1], p.ISR)}
			})
			dirs, _, _ := timeChange(c.image, func(im *Image) []*messages.MetadataRecord {
				a := topic0.Assignments(topic0.Partitions[0].Leader)[0]
				a.DirId = NewClusterID()
				return im.AssignDirs([]*messages.PartitionAssignment{a})
			})
			more := &scaleCluster{image: c.image, dirs: c.dirs}
			start = time.Now()
			more.createTopic(t, "one-more", partitions, rf)
			create := time.Since(start)

			t.Logf("%d nodes, %d topics of %d partitions, replication factor %d: image %.1f MiB of heap", nodes, topics, partitions, rf, mib(heapImage))
			t.Logf("metadata log: %d entries, %d records, %.1f MiB; applied entry by entry in %v", len(c.log), records, mib(uint64(logBytes)), applyLog.Round(time.Millisecond))
			t.Logf("snapshot: %d records, %.1f MiB (%d bytes); taken (records and marshal) in %v, restored (unmarshal and replay) in %v",
				snapshotRecords, mib(uint64(len(snapshot))), len(snapshot), take.Round(time.Millisecond), restore.Round(time.Millisecond))
			t.Logf("one more change: a partition's leader %v; a replica's log dir %v; fence a node (%d records) %v, unfence it %v; a topic of %d partitions, with its %d entries of log dirs, %v",
				move.Round(time.Microsecond), dirs.Round(time.Microsecond), fenceRecords, fence.Round(time.Microsecond), unfence.Round(time.Microsecond),
				partitions, len(more.log)-1, create.Round(time.Microsecond))
		})
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// BenchmarkImageChangeAt100kPartitions is one change made to the image of
// 100 nodes and 100 topics of 1,000 partitions with three replicas each:
// the records generated from the image, replayed into a delta and applied.
// Each round starts from the same image. Run with:
//
//	go test -run '^$' -bench ImageChangeAt100k -benchtime 20x ./actors/metadata/
func BenchmarkImageChangeAt100kPartitions(b *testing.B) {
	const nodes, topics, partitions, rf = 100, 100, 1000, 3
	c := newScaleCluster(b, nodes, topics, partitions, rf)
	c.log = nil
	base := c.image
	topic0, _ := base.Topic("topic-000")
	change := func(b *testing.B, gen func() []*messages.MetadataRecord) {
		for i := 0; i < b.N; i++ {
			d := NewDelta(base, nil)
			for _, r := range gen() {
				require.NoError(b, d.Replay(r))
			}
			_ = d.Apply()
		}
	}
	b.Run("partition-leader", func(b *testing.B) {
		p := &topic0.Partitions[partitions/2]
		change(b, func() []*messages.MetadataRecord {
			return []*messages.MetadataRecord{changeRecord(topic0.Name, p, p.Replicas[len(p.Replicas)-1], p.ISR)}
		})
	})
	b.Run("replica-log-dir", func(b *testing.B) {
		a := topic0.Assignments(topic0.Partitions[0].Leader)[0]
		a.DirId = NewClusterID()
		change(b, func() []*messages.MetadataRecord { return base.AssignDirs([]*messages.PartitionAssignment{a}) })
	})
	b.Run("fence-node", func(b *testing.B) {
		change(b, func() []*messages.MetadataRecord { return base.Fence(nodes / 2) })
	})
	b.Run("create-topic", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			more := &scaleCluster{image: base, dirs: c.dirs}
			more.createTopic(b, "one-more", partitions, rf)
		}
	})
	b.Run("restore-snapshot", func(b *testing.B) {
		snapshot, err := proto.Marshal(&messages.MetadataBatch{Records: base.Records()})
		require.NoError(b, err)
		b.SetBytes(int64(len(snapshot)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var batch messages.MetadataBatch
			require.NoError(b, proto.Unmarshal(snapshot, &batch))
			_ = replayAll(b, batch.GetRecords())
		}
	})
}
