package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func ptr[T any](v T) *T { return &v }

// sampleRequests are kmsg-built requests of the APIs a listener answers,
// each at its oldest and newest version and one between, with their fields
// filled in.
func sampleRequests() []kmsg.Request {
	var out []kmsg.Request
	add := func(make func() kmsg.Request, versions ...int16) {
		for _, v := range versions {
			r := make()
			r.SetVersion(v)
			out = append(out, r)
		}
	}
	add(func() kmsg.Request {
		r := kmsg.NewPtrApiVersionsRequest()
		r.ClientSoftwareName, r.ClientSoftwareVersion = "depot-test", "1.0"
		r.ClusterID, r.NodeID = ptr("cluster"), 3
		return r
	}, 0, 3, 4, 5)
	add(func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		t := kmsg.NewMetadataRequestTopic()
		t.Topic, t.TopicID = ptr("orders"), [16]byte{1, 2, 3}
		r.Topics = append(r.Topics, t)
		r.AllowAutoTopicCreation = true
		return r
	}, 0, 4, 9, 12, 13)
	add(func() kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis, r.TransactionID = -1, 1500, ptr("txn")
		t := kmsg.NewProduceRequestTopic()
		t.Topic, t.TopicID = "orders", [16]byte{9}
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition, p.Records = 2, bytes.Repeat([]byte{0xab}, 80)
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, 3, 7, 9, 12, 13)
	add(func() kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.MaxWaitMillis, r.MinBytes, r.MaxBytes, r.SessionEpoch = 500, 1, 1<<20, -1
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = "orders", [16]byte{7}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch = 1, 42, 1<<16, 5
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		r.Rack = "r1"
		return r
	}, 4, 11, 12, 13, 17, 18)
	add(func() kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		t := kmsg.NewListOffsetsRequestTopic()
		t.Topic = "orders"
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition, p.Timestamp, p.CurrentLeaderEpoch = 0, -2, 3
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, 1, 4, 6, 10)
	add(func() kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		t := kmsg.NewOffsetForLeaderEpochRequestTopic()
		t.Topic = "orders"
		p := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		p.Partition, p.CurrentLeaderEpoch, p.LeaderEpoch = 0, 4, 3
		t.Partitions = append(t.Partitions, p)
		r.Topics = append(r.Topics, t)
		return r
	}, 2, 3, 4)
	add(func() kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID, r.TransactionTimeoutMillis = ptr("txn"), 60000
		return r
	}, 0, 2, 5)
	add(func() kmsg.Request {
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceName = ptr("orders")
		return r
	}, 1, 2, 3)
	add(func() kmsg.Request {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = "PLAIN"
		return r
	}, 0, 1)
	return out
}

// frameOf is req's request frame without its size prefix.
func frameOf(req kmsg.Request, correlationID int32) []byte {
	return AppendRequest(nil, correlationID, ptr("client-1"), req)[SizeBytes:]
}

func TestParseRequestReadsWhatKmsgWrote(t *testing.T) {
	for i, want := range sampleRequests() {
		t.Run(kmsg.NameForKey(want.Key()), func(t *testing.T) {
			got, err := ParseRequest(frameOf(want, int32(i)))
			require.NoError(t, err)
			require.Equal(t, want.Key(), got.Key)
			require.Equal(t, want.GetVersion(), got.Version)
			require.Equal(t, int32(i), got.CorrelationID)
			require.Equal(t, "client-1", *got.ClientID)
			require.NotNil(t, got.Body)
			require.Equal(t, want.AppendTo(nil), got.Body.AppendTo(nil), "v%d", want.GetVersion())
		})
	}
}

func TestParseRequestRefusals(t *testing.T) {
	unknown := binary.BigEndian.AppendUint16(nil, 999)
	unknown = append(unknown, 0, 0, 0, 0, 0, 7, 0xff, 0xff)
	newer := kmsg.NewPtrMetadataRequest()
	newer.SetVersion(newer.MaxVersion())
	newerFrame := frameOf(newer, 1)
	binary.BigEndian.PutUint16(newerFrame[2:], uint16(newer.MaxVersion()+1))
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.SetVersion(3)
	apiVersionsFrame := frameOf(apiVersions, 1)
	binary.BigEndian.PutUint16(apiVersionsFrame[2:], 77)
	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(9)
	t1 := kmsg.NewProduceRequestTopic()
	t1.Topic = "orders"
	produce.Topics = append(produce.Topics, t1)
	truncated := frameOf(produce, 1)
	truncated = truncated[:len(truncated)-3]

	for _, tc := range []struct {
		name    string
		frame   []byte
		err     error
		hasBody bool
	}{
		{"empty", nil, ErrMalformed, false},
		{"short header", []byte{0, 3, 0, 1, 0}, ErrMalformed, false},
		{"client id past the end", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 9, 'a'}, ErrMalformed, false},
		{"unknown key", unknown, ErrUnknownAPI, false},
		{"negative version", []byte{0, 3, 0xff, 0xff, 0, 0, 0, 1, 0xff, 0xff}, ErrMalformed, false},
		{"truncated body", truncated, ErrMalformed, false},
		{"version above kmsg's", newerFrame, nil, false},
		{"ApiVersions at a version from the future", apiVersionsFrame, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequest(tc.frame)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.hasBody, got.Body != nil)
		})
	}
}

func TestFrameSize(t *testing.T) {
	size := func(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }
	for _, tc := range []struct {
		name   string
		prefix []byte
		want   int32
		err    error
	}{
		{"zero", size(0), 0, nil},
		{"at the limit", size(1000), 1000, nil},
		{"above the limit", size(1001), 0, ErrFrameTooLarge},
		{"negative", size(-1), 0, ErrNegativeSize},
		{"most negative", size(-1 << 31), 0, ErrNegativeSize},
		{"TLS 1.2 ClientHello", []byte{0x16, 0x03, 0x01, 0x02}, 0, ErrTLS},
		{"TLS 1.3 ClientHello", []byte{0x16, 0x03, 0x03, 0x00}, 0, ErrTLS},
		{"short prefix", []byte{0, 0}, 0, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FrameSize(tc.prefix, 1000)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestAppendResponseHeaders(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resp   kmsg.Response
		header int // bytes of the response header
	}{
		{"v0 header of a plain version", func() kmsg.Response { r := kmsg.NewPtrMetadataResponse(); r.SetVersion(8); return r }(), 4},
		{"v1 header of a flexible version", func() kmsg.Response { r := kmsg.NewPtrMetadataResponse(); r.SetVersion(9); return r }(), 5},
		{"ApiVersions keeps a v0 header when flexible", func() kmsg.Response { r := kmsg.NewPtrApiVersionsResponse(); r.SetVersion(3); return r }(), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frame := AppendResponse([]byte("prefix"), 77, tc.resp)
			frame = frame[len("prefix"):]
			require.Equal(t, uint32(len(frame)-SizeBytes), binary.BigEndian.Uint32(frame))
			require.Equal(t, uint32(77), binary.BigEndian.Uint32(frame[SizeBytes:]))
			body := frame[SizeBytes+tc.header:]
			got := tc.resp.Key()
			decoded := kmsg.ResponseForKey(got)
			decoded.SetVersion(tc.resp.GetVersion())
			require.NoError(t, decoded.ReadFrom(body))
			require.Equal(t, tc.resp.AppendTo(nil), decoded.AppendTo(nil))
		})
	}
}

// TestParseRequestSurvivesFlippedBytes flips each byte of every sample
// request, and each bit of the first bytes: a bad frame is an error, never
// a panic, and what decodes encodes again.
func TestParseRequestSurvivesFlippedBytes(t *testing.T) {
	for _, req := range sampleRequests() {
		frame := frameOf(req, 5)
		for i := range frame {
			for _, mask := range []byte{0xff, 0x80, 0x01} {
				flipped := bytes.Clone(frame)
				flipped[i] ^= mask
				checkParse(t, flipped)
			}
		}
	}
}

// checkParse is the property every frame holds: ParseRequest does not
// panic, and a request it decodes encodes to bytes that decode to the same
// request.
func checkParse(t *testing.T, frame []byte) {
	t.Helper()
	req, err := ParseRequest(frame)
	if err != nil || req.Body == nil {
		return
	}
	again, err := ParseRequest(frameOf(req.Body, req.CorrelationID))
	require.NoError(t, err, "%s v%d", kmsg.NameForKey(req.Key), req.Version)
	require.Equal(t, req.Body.AppendTo(nil), again.Body.AppendTo(nil))
}

// FetchResponseFrame's pieces, written in order, are AppendResponse's
// frame byte for byte, at every version, with the records as pieces of
// their own, not copied; the response is left as it was.
func TestFetchResponseFrame(t *testing.T) {
	records := func(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }
	partition := func(id int32, recs []byte, code int16) kmsg.FetchResponseTopicPartition {
		p := kmsg.NewFetchResponseTopicPartition()
		p.Partition, p.RecordBatches, p.ErrorCode = id, recs, code
		p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1000+int64(id), 1000+int64(id), 3
		return p
	}
	for _, tc := range []struct {
		name   string
		topics [][]kmsg.FetchResponseTopicPartition
	}{
		{"no partitions", nil},
		{"no records", [][]kmsg.FetchResponseTopicPartition{{partition(0, []byte{}, 0), partition(1, nil, 1)}}},
		{"one partition", [][]kmsg.FetchResponseTopicPartition{{partition(0, records(300, 0xaa), 0)}}},
		{"records of a one-byte, a two-byte and a three-byte uvarint length", [][]kmsg.FetchResponseTopicPartition{
			{partition(0, records(1, 0x00), 0), partition(1, records(126, 0xff), 0), partition(2, records(127, 0x01), 0)},
			{partition(0, records(20000, 0x02), 0), partition(5, []byte{}, 0), partition(7, records(1<<20, 0x03), 0)},
		}},
		{"records that look like placeholders", [][]kmsg.FetchResponseTopicPartition{
			{partition(0, []byte{0x00}, 0), partition(1, []byte{0xff}, 0), partition(2, []byte{}, 6)},
			{partition(9, []byte{0x00, 0xff, 0x02, 0x00, 0x00, 0x00, 0x01}, 0)},
		}},
	} {
		for v := int16(4); v <= 18; v++ {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(v)
			resp.SessionID = 0x01020304
			for ti, parts := range tc.topics {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic, rt.TopicID = fmt.Sprint("topic-", ti), [16]byte{byte(ti), 0xff, 0x00, 0x01}
				rt.Partitions = parts
				resp.Topics = append(resp.Topics, rt)
			}
			want := AppendResponse(nil, 42, resp)
			before := resp.AppendTo(nil)
			pieces := FetchResponseFrame(42, resp)
			require.Equal(t, want, bytes.Join(pieces, nil), "%s v%d", tc.name, v)
			require.Equal(t, before, resp.AppendTo(nil), "%s v%d: the response as it was", tc.name, v)
			var aliased int
			for _, rt := range resp.Topics {
				for _, p := range rt.Partitions {
					if len(p.RecordBatches) == 0 {
						continue
					}
					for _, piece := range pieces {
						if len(piece) > 0 && &piece[0] == &p.RecordBatches[0] {
							aliased++
						}
					}
				}
			}
			nonEmpty := 0
			for _, parts := range tc.topics {
				for _, p := range parts {
					if len(p.RecordBatches) > 0 {
						nonEmpty++
					}
				}
			}
			require.Equal(t, nonEmpty, aliased, "%s v%d: every partition's records are a piece, not a copy", tc.name, v)
		}
	}
}
