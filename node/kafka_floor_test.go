package node

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/wire"
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// floorBroker is the least a Kafka broker can do for the Kafka benchmarks:
// one partition of "orders" held in memory, each request answered on its
// connection's goroutine as soon as it is read, a fetch with the stored
// batches written as they lie (writev), as a node writes them. It keeps
// nothing on disk, hands nothing to another goroutine and checks nothing,
// so kgo's rate against it is about the most a broker could give kgo on
// this machine: what is left is kgo's own work and loopback's. Its
// records stay in the process's heap, as kfake's do.
type floorBroker struct {
	topicID [16]byte
	mu      sync.Mutex
	// log is the batches one after another, bases each one's base offset
	// and starts its position in log; end is the next offset.
	log    []byte
	bases  []int64
	starts []int
	end    int64
}

// startFloorBroker starts a floorBroker on 127.0.0.1, stopped with its
// connections at the end of the benchmark, and returns its address.
func startFloorBroker(b *testing.B) []string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	f := &floorBroker{topicID: [16]byte{1}}
	var (
		mu      sync.Mutex
		conns   []net.Conn
		serving sync.WaitGroup
	)
	serving.Add(1)
	go func() {
		defer serving.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			serving.Add(1)
			go func() {
				defer serving.Done()
				f.serve(b, c)
			}()
		}
	}()
	b.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		serving.Wait()
	})
	return []string{ln.Addr().String()}
}

// serve answers c's requests in order until c closes.
func (f *floorBroker) serve(b *testing.B, c net.Conn) {
	r := bufio.NewReaderSize(c, 64<<10)
	var size [wirekafka.SizeBytes]byte
	for {
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		req, err := wirekafka.ParseRequest(frame)
		if err != nil || req.Body == nil {
			b.Errorf("floor broker: request %d v%d: %v", req.Key, req.Version, err)
			return
		}
		var pieces [][]byte
		if fetch, ok := req.Body.(*kmsg.FetchRequest); ok {
			pieces = wirekafka.FetchResponseFrame(req.CorrelationID, f.fetch(fetch))
		} else {
			pieces = [][]byte{wirekafka.AppendResponse(nil, req.CorrelationID, f.answer(c, req.Body))}
		}
		if _, err := (*net.Buffers)(&pieces).WriteTo(c); err != nil {
			return
		}
	}
}

// answer is the response to every request but a fetch.
func (f *floorBroker) answer(c net.Conn, body kmsg.Request) kmsg.Response {
	resp := body.ResponseKind()
	switch req := body.(type) {
	case *kmsg.ApiVersionsRequest:
		r := resp.(*kmsg.ApiVersionsResponse)
		for _, k := range []kmsg.Request{&kmsg.ApiVersionsRequest{}, &kmsg.MetadataRequest{}, &kmsg.ProduceRequest{},
			&kmsg.FetchRequest{}, &kmsg.ListOffsetsRequest{}} {
			v := kmsg.NewApiVersionsResponseApiKey()
			v.ApiKey, v.MaxVersion = k.Key(), k.MaxVersion()
			r.ApiKeys = append(r.ApiKeys, v)
		}
	case *kmsg.MetadataRequest:
		r := resp.(*kmsg.MetadataResponse)
		host, port, _ := net.SplitHostPort(c.LocalAddr().String())
		p, _ := strconv.Atoi(port)
		broker := kmsg.NewMetadataResponseBroker()
		broker.Host, broker.Port = host, int32(p)
		r.Brokers = append(r.Brokers, broker)
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID = kmsg.StringPtr("orders"), f.topicID
		part := kmsg.NewMetadataResponseTopicPartition()
		part.Replicas, part.ISR = []int32{0}, []int32{0}
		t.Partitions = append(t.Partitions, part)
		r.Topics = append(r.Topics, t)
	case *kmsg.ProduceRequest:
		r := resp.(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.BaseOffset = f.append(p.Records)
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	case *kmsg.ListOffsetsRequest:
		r := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.Timestamp, rp.Offset = p.Partition, -1, 0
				if p.Timestamp != -2 { // the earliest is 0, the latest the end
					f.mu.Lock()
					rp.Offset = f.end
					f.mu.Unlock()
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
	}
	return resp
}

// append stores the batches of records at the end of the partition, as a
// broker does, and returns the first one's offset.
func (f *floorBroker) append(records []byte) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	base := f.end
	for len(records) >= wire.HeaderSize {
		h, err := wire.ParseHeader(records)
		if err != nil || h.Size() > len(records) {
			break
		}
		f.bases, f.starts = append(f.bases, f.end), append(f.starts, len(f.log))
		f.log = append(f.log, records[:h.Size()]...)
		binary.BigEndian.PutUint64(f.log[f.starts[len(f.starts)-1]:], uint64(f.end))
		f.end += int64(h.LastOffsetDelta) + 1
		records = records[h.Size():]
	}
	return base
}

// fetch answers a fetch of the partition with the batches from its offset:
// the first whatever its size, the next ones within the partition's max
// bytes, as a node answers. It declines fetch sessions (session id 0).
func (f *floorBroker) fetch(req *kmsg.FetchRequest) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.HighWatermark, rp.LastStableOffset = p.Partition, f.end, f.end
			rp.RecordBatches = []byte{}
			if i := sort.Search(len(f.bases), func(i int) bool { return f.bases[i] > p.FetchOffset }) - 1; i >= 0 {
				end := func(j int) int { // where batch j-1 ends
					if j == len(f.starts) {
						return len(f.log)
					}
					return f.starts[j]
				}
				from, to := f.starts[i], end(i+1)
				for j := i + 2; j <= len(f.starts) && end(j)-from <= int(p.PartitionMaxBytes); j++ {
					to = end(j)
				}
				rp.RecordBatches = f.log[from:to]
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
