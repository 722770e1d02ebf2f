package partition

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/partition/state"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// fetchCollector sends the FetchRequests it is given to a partition as
// their sender, and passes every FetchResponse that comes back to out.
type fetchCollector struct {
	partition *actor.PID
	out       chan *messages.FetchResponse
}

func (c *fetchCollector) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.FetchRequest:
		ctx.Request(c.partition, m)
	case *messages.FetchResponse:
		c.out <- m
	}
}

// newFetchCollector spawns a collector in front of f's partition.
func newFetchCollector(t *testing.T, f *moveFixture) (*actor.PID, chan *messages.FetchResponse) {
	t.Helper()
	out := make(chan *messages.FetchResponse, 1024)
	pid, err := f.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return &fetchCollector{partition: f.pid, out: out}
	}), fmt.Sprintf("fetch-collector-%d", time.Now().UnixNano()))
	require.NoError(t, err)
	t.Cleanup(func() { f.system.Root.Stop(pid) })
	return pid, out
}

// collectChunks reads responses up to the one without More, then checks
// that nothing follows it.
func collectChunks(t *testing.T, out chan *messages.FetchResponse) []*messages.FetchResponse {
	t.Helper()
	var got []*messages.FetchResponse
	timeout := time.After(moveTestTimeout)
	for len(got) == 0 || got[len(got)-1].More {
		select {
		case r := <-out:
			got = append(got, r)
		case <-timeout:
			require.FailNow(t, "fetch not answered in full", "%d responses so far", len(got))
		}
	}
	select {
	case r := <-out:
		require.FailNow(t, "a response after the last", "offset %d, more %v", r.Offset, r.More)
	case <-time.After(100 * time.Millisecond):
	}
	return got
}

// chunkRecords checks that the responses of one chunked fetch are in step
// (each starting where the one before ended, every one but the last with
// More), and returns their records' values and the offset after them.
func chunkRecords(t *testing.T, req *messages.FetchRequest, got []*messages.FetchResponse) ([]string, int64) {
	t.Helper()
	next := req.Offset
	var values []string
	for i, r := range got {
		require.Equal(t, messages.ErrorCode_NONE, r.Error, r.ErrorMessage)
		require.Equal(t, i < len(got)-1, r.More, "response %d of %d", i, len(got))
		require.Equal(t, next, r.Offset, "response %d does not start where the one before ended", i)
		require.Equal(t, req.CorrelationId, r.CorrelationId)
		require.Equal(t, req.Topic, r.Topic)
		_, err := wire.Batches(r.Records, func(batch []byte, h wire.Header) error {
			return wire.Records(batch, func(rec wire.Record) error {
				require.Equal(t, next, rec.Offset, "offsets are dense")
				next++
				values = append(values, string(rec.Value))
				return nil
			})
		})
		require.NoError(t, err, "response %d", i)
	}
	return values, next
}

// batchSizes is the size of each whole batch in records.
func batchSizes(t *testing.T, records []byte) []int {
	t.Helper()
	var sizes []int
	_, err := wire.Batches(records, func(batch []byte, _ wire.Header) error {
		sizes = append(sizes, len(batch))
		return nil
	})
	require.NoError(t, err)
	return sizes
}

func TestFetchInChunks(t *testing.T) {
	f := newMoveFixture(t, 16<<10, nil)
	// Batches of a few sizes, so chunk ends fall everywhere in them, over
	// several segments.
	var values []string
	for i := range 12 {
		values = append(values, f.fill(t, 10, 200+i*150)...)
	}
	status := moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	require.Equal(t, int64(len(values)), status.HighWatermark)
	require.Greater(t, status.Segments, int32(1))
	collector, out := newFetchCollector(t, f)

	tests := []struct {
		name       string
		offset     int64
		chunkBytes int32
		maxBytes   int32
		minChunks  int
		toEnd      bool // max_bytes covers the rest of the log
	}{
		{"four KiB chunks of 20 KiB", 0, 4 << 10, 20 << 10, 3, false},
		{"from the middle", 37, 3 << 10, 16 << 10, 3, false},
		{"uneven limits", 5, 2500, 5500, 2, false},
		{"chunk smaller than a batch", 0, 100, 12 << 10, 3, false},
		{"to the log end", 0, 8 << 10, 8 << 20, 3, true},
		{"near the end", int64(len(values) - 3), 1 << 10, 1 << 20, 2, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &messages.FetchRequest{
				Topic: "orders", Offset: tt.offset, MaxBytes: tt.maxBytes, ChunkBytes: tt.chunkBytes,
				CorrelationId: int64(100 + i),
			}
			f.system.Root.Send(collector, req)
			got := collectChunks(t, out)
			require.GreaterOrEqual(t, len(got), tt.minChunks)

			read, next := chunkRecords(t, req, got)
			require.Equal(t, values[tt.offset:next], read, "records are those produced, in order, once")
			total := 0
			for j, r := range got {
				require.Equal(t, int64(len(values)), r.HighWatermark)
				sizes := batchSizes(t, r.Records)
				if j < len(got)-1 {
					require.NotEmpty(t, sizes, "response %d has More but no records", j)
				}
				if len(sizes) > 1 {
					require.LessOrEqual(t, len(r.Records), int(tt.chunkBytes), "response %d: %d batches over chunk_bytes", j, len(sizes))
				}
				total += len(r.Records)
			}
			require.LessOrEqual(t, total, int(tt.maxBytes), "the responses together are over max_bytes")
			if tt.toEnd {
				require.Equal(t, int64(len(values)), next, "stopped before the log end")
			} else {
				// max_bytes, not the log end, ended the fetch: the batch
				// after the last one sent would not have fitted.
				require.Less(t, next, int64(len(values)))
				more := moveRequest[*messages.FetchResponse](t, f, &messages.FetchRequest{Topic: "orders", Offset: next, MaxBytes: 1})
				nextBatch := batchSizes(t, more.Records)
				require.NotEmpty(t, nextBatch)
				require.Greater(t, total+nextBatch[0], int(tt.maxBytes), "the fetch stopped short of max_bytes")
			}
		})
	}
}

// A chunk_bytes of max_bytes or more, or none at all, is one response.
func TestFetchChunkNotBelowMax(t *testing.T) {
	f := newMoveFixture(t, 16<<10, nil)
	values := f.fill(t, 40, 300)
	collector, out := newFetchCollector(t, f)
	for _, tt := range []struct {
		name                 string
		chunkBytes, maxBytes int32
	}{
		{"equal", 4 << 10, 4 << 10},
		{"above", 64 << 10, 4 << 10},
		{"none", 0, 4 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &messages.FetchRequest{Topic: "orders", Offset: 2, MaxBytes: tt.maxBytes, ChunkBytes: tt.chunkBytes, CorrelationId: 9}
			f.system.Root.Send(collector, req)
			got := collectChunks(t, out)
			require.Len(t, got, 1)
			read, next := chunkRecords(t, req, got)
			require.Equal(t, values[2:next], read)
			require.LessOrEqual(t, len(got[0].Records), int(tt.maxBytes))
			require.Greater(t, next, int64(3))
		})
	}
}

// A chunked fetch at the log end parks like any other; the produce that
// wakes it gets it answered, in step, with what was produced.
func TestFetchChunksParked(t *testing.T) {
	f := newMoveFixture(t, 16<<10, nil)
	values := f.fill(t, 20, 300)
	collector, out := newFetchCollector(t, f)
	end := int64(len(values))
	req := &messages.FetchRequest{
		Topic: "orders", Offset: end, MaxBytes: 64 << 10, ChunkBytes: 1 << 10,
		MinBytes: 1, MaxWaitMs: int32(moveTestTimeout / time.Millisecond), CorrelationId: 5,
	}
	f.system.Root.Send(collector, req)
	// The fetch is parked once a request sent after it is answered.
	moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	select {
	case r := <-out:
		require.FailNow(t, "answered before anything was produced", "offset %d, %d bytes", r.Offset, len(r.Records))
	default:
	}
	produced := f.fill(t, 1, 2000)
	got := collectChunks(t, out)
	read, next := chunkRecords(t, req, got)
	require.Equal(t, produced, read)
	require.Equal(t, end+1, next)
}

// Woken by enough bytes for min_bytes, a chunked fetch answers with at
// least min_bytes, in chunks, as it would have had the bytes been there
// when it arrived.
func TestFetchChunksParkedUntilMinBytes(t *testing.T) {
	f := newMoveFixture(t, 1<<20, nil)
	collector, out := newFetchCollector(t, f)
	req := &messages.FetchRequest{
		Topic: "orders", Offset: 0, MaxBytes: 64 << 10, ChunkBytes: 1 << 10,
		MinBytes: 5 << 10, MaxWaitMs: int32(moveTestTimeout / time.Millisecond), CorrelationId: 6,
	}
	f.system.Root.Send(collector, req)
	moveRequest[*messages.PartitionStatusResponse](t, f, &messages.PartitionStatusRequest{})
	produced := f.fill(t, 8, 1000)
	got := collectChunks(t, out)
	read, _ := chunkRecords(t, req, got)
	require.Equal(t, produced[:len(read)], read)
	total := 0
	for _, r := range got {
		total += len(r.Records)
	}
	require.GreaterOrEqual(t, total, int(req.MinBytes), "woken with %d responses", len(got))
}

// A negative chunk_bytes is refused, and nothing else is sent.
func TestFetchNegativeChunkBytes(t *testing.T) {
	f := newMoveFixture(t, 16<<10, nil)
	f.fill(t, 5, 100)
	collector, out := newFetchCollector(t, f)
	for _, maxBytes := range []int32{0, 1 << 10, 1 << 20} {
		req := &messages.FetchRequest{Topic: "orders", Offset: 0, MaxBytes: maxBytes, ChunkBytes: -1, CorrelationId: 3}
		f.system.Root.Send(collector, req)
		got := collectChunks(t, out)
		require.Len(t, got, 1)
		require.Equal(t, messages.ErrorCode_INVALID_FETCH_SIZE, got[0].Error, "max_bytes %d", maxBytes)
		require.Empty(t, got[0].Records)
		require.False(t, got[0].More)
	}
}

// A fetch keeps its records in a pooled frame only when they are large
// enough to travel as a buffer of their own; fewer bytes are copied out and
// the frame goes straight back, as a tailing consumer's fetches are.
func TestFetchFramesOnlyLargeRecords(t *testing.T) {
	l, err := disk.Open(disk.NewMemFS(), "/p/orders-0", disk.Options{Config: disk.DefaultConfig()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	small, err := encodeBatch("a", "b")
	require.NoError(t, err)
	_, err = l.Append(small)
	require.NoError(t, err)
	a := &partitionActor{log: l, cfg: &PartitionConfig{Transport: remote.NewTransport()}, core: state.NewPartition(topic.DefaultMaxMessageBytes)}
	a.core.Opened(l.StartOffset(), l.EndOffset(), l.RecoveryPoint())
	req := &messages.FetchRequest{Topic: "orders", MaxBytes: 1 << 20}

	resp, frame, _ := a.fetchAt(req, 0, 1<<20)
	require.Nil(t, frame)
	require.Equal(t, small, resp.Records)

	large, err := encodeBatch(strings.Repeat("x", 2*remote.InlineData))
	require.NoError(t, err)
	_, err = l.Append(large)
	require.NoError(t, err)
	a.core.Opened(l.StartOffset(), l.EndOffset(), l.RecoveryPoint())
	resp, frame, _ = a.fetchAt(req, 2, 1<<20)
	require.NotNil(t, frame)
	require.Equal(t, large, resp.Records)
	require.Same(t, &frame[remote.FetchRecordsReserve], &resp.Records[0], "the records lie in their frame")
}
