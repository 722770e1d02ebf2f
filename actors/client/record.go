package client

import (
	"time"

	"github.com/depot-dev/depot/wire"
)

// Record is one record produced or consumed. On produce, Partition is read
// only by ManualPartitioner and set by the producer, and Offset is set when
// the record is acknowledged (-1 with acks=0); a zero Timestamp means now. On
// consume, Key, Value and header values alias the fetched bytes: they stay
// valid, but are shared with the records of the same batch.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []wire.RecordHeader
}
