package kafka

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A fetch refused for its version answers each partition with empty
// records, as Kafka does, not null ones, which sarama cannot decode: on the
// wire the records' length is 0, not -1.
func TestRefusedFetchHasEmptyRecords(t *testing.T) {
	for version := int16(0); version < 4; version++ {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(version)
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "old"
		rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
		req.Topics = append(req.Topics, rt)

		encoded := refuseFetch(req, codeUnsupportedVersion).AppendTo(nil)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		require.NoError(t, resp.ReadFrom(encoded), "v%d", version)
		p := resp.Topics[0].Partitions[0]
		require.Equal(t, codeUnsupportedVersion, p.ErrorCode)
		require.NotNil(t, p.RecordBatches, "v%d: records are empty, not null", version)
		require.Empty(t, p.RecordBatches)
	}
}
