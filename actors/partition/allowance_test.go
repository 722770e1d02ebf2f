package partition

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/actors/disks"
	"github.com/depot-dev/depot/actors/remote"
	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// allowanceFixture is a partition actor whose log-dir actor only records
// its reports: the test hands out the allowances.
type allowanceFixture struct {
	system  *actor.ActorSystem
	pid     *actor.PID
	dir     string
	reports chan *disks.PartitionReport
}

// newAllowanceFixture starts the partition, with tick as its tick interval
// when one is given.
func newAllowanceFixture(t *testing.T, tick ...time.Duration) *allowanceFixture {
	t.Helper()
	f := &allowanceFixture{system: actortest.System(t), dir: t.TempDir(), reports: make(chan *disks.PartitionReport, 256)}
	logDir := f.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*disks.PartitionReport); ok {
			f.reports <- r
		}
	}))
	cfg := PartitionConfig{
		Topic: "t", FS: disk.OS, LogDir: f.dir, Config: topic.DefaultConfig(), Transport: remote.NewTransport(),
		LogDirActor: logDir, Logger: logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel)),
	}
	if len(tick) > 0 {
		cfg.TickInterval = tick[0]
	}
	f.pid = f.system.Root.Spawn(NewPartitionProps(cfg))
	return f
}

// report waits for the next report that match accepts.
func (f *allowanceFixture) report(t *testing.T, match func(*disks.PartitionReport) bool) *disks.PartitionReport {
	t.Helper()
	timeout := time.After(moveTestTimeout)
	for {
		select {
		case r := <-f.reports:
			if match(r) {
				return r
			}
		case <-timeout:
			t.Fatal("no such report")
		}
	}
}

func (f *allowanceFixture) request(t *testing.T, msg any) any {
	t.Helper()
	res, err := f.system.Root.RequestFuture(f.pid, msg, moveTestTimeout).Result()
	require.NoError(t, err)
	return res
}

// idempotentBatch is a batch of one record of value from producer 7 at
// sequence seq.
func idempotentBatch(t *testing.T, seq int32, value string) []byte {
	t.Helper()
	b := wire.NewBuilder(wire.BatchOptions{ProducerID: 7, ProducerEpoch: 0, BaseSequence: seq})
	b.Append(time.Now().UnixMilli(), nil, []byte(value), nil)
	out, err := b.AppendTo(nil)
	require.NoError(t, err)
	return out
}

// A partition takes no append before its log dir's first allowance: a
// produce request waits for it, and is served once it comes.
func TestProduceWaitsForTheFirstAllowance(t *testing.T) {
	f := newAllowanceFixture(t)
	first := f.report(t, func(r *disks.PartitionReport) bool { return true })
	require.True(t, first.Awaiting)
	require.NotNil(t, first.Token)

	produced := f.system.Root.RequestFuture(f.pid, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: idempotentBatch(t, 0, "early")}, moveTestTimeout)
	// The status request is handled after the produce request: the
	// produce waits, so nothing was appended.
	status := f.request(t, &messages.PartitionStatusRequest{}).(*messages.PartitionStatusResponse)
	require.Zero(t, status.LogEndOffset)

	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: first.Token, Seq: 1, Limited: true, Ceiling: 1 << 20})
	res, err := produced.Result()
	require.NoError(t, err)
	resp := res.(*messages.ProduceResponse)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Zero(t, resp.BaseOffset)
	ack := f.report(t, func(r *disks.PartitionReport) bool { return r.AllowanceSeq == 1 })
	require.False(t, ack.Awaiting)
}

// An append that would take the log past its allowance is refused with
// the retriable KAFKA_STORAGE_ERROR, naming the dir and its free bytes,
// and asks the dir for that much more. It changes no producer state: the
// same batch, retried once the dir allows more, is appended as new.
// Allowances for another incarnation, or older than the last, are
// ignored.
func TestAllowanceRefusalChangesNoProducerState(t *testing.T) {
	f := newAllowanceFixture(t)
	token := f.report(t, func(r *disks.PartitionReport) bool { return r.Awaiting }).Token
	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: token, Seq: 1, Limited: true, Ceiling: 10, Free: 1234, Capacity: 4096, Reserve: 1024})
	produce := func(batch []byte) *messages.ProduceResponse {
		t.Helper()
		return f.request(t, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: batch}).(*messages.ProduceResponse)
	}

	first := idempotentBatch(t, 0, "first")
	refused := produce(first)
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, refused.Error)
	require.Contains(t, refused.ErrorMessage, "log dir "+f.dir+" has no room for")
	require.Contains(t, refused.ErrorMessage, "1234 bytes free")
	asked := f.report(t, func(r *disks.PartitionReport) bool { return r.Wanted > 0 })
	require.Equal(t, int64(len(first)), asked.Wanted)

	// Not this incarnation's, and older than the last: both ignored.
	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: &disks.AllowanceToken{}, Seq: 5, Limited: true, Ceiling: 1 << 20})
	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: token, Seq: 1, Limited: true, Ceiling: 1 << 20})
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, produce(first).Error)

	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: token, Seq: 2, Limited: true, Ceiling: 1 << 20})
	retried := produce(first)
	require.Equal(t, messages.ErrorCode_NONE, retried.Error, retried.ErrorMessage)
	require.Zero(t, retried.BaseOffset)
	next := produce(idempotentBatch(t, 1, "second"))
	require.Equal(t, messages.ErrorCode_NONE, next.Error, next.ErrorMessage)
	require.Equal(t, int64(1), next.BaseOffset)
	status := f.request(t, &messages.PartitionStatusRequest{}).(*messages.PartitionStatusResponse)
	require.Equal(t, int64(2), status.LogEndOffset, "both batches in the log, the refused one once")
}

// A producer new to the partition whose first batch is refused for want of
// room gets its next batch, in flight behind the first, refused as out of
// order even once the dir allows more: taken, it would leave a gap before
// it that the first batch's retry could never fill, and the producer would
// retry that batch, out of order, until its delivery timeout. Sent again in
// order, both are appended.
func TestAllowanceRefusalKeepsANewProducersOrder(t *testing.T) {
	f := newAllowanceFixture(t)
	token := f.report(t, func(r *disks.PartitionReport) bool { return r.Awaiting }).Token
	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: token, Seq: 1, Limited: true, Ceiling: 0})
	produce := func(batch []byte) *messages.ProduceResponse {
		t.Helper()
		return f.request(t, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: batch}).(*messages.ProduceResponse)
	}
	first, second := idempotentBatch(t, 0, "first"), idempotentBatch(t, 1, "second")
	require.Equal(t, messages.ErrorCode_KAFKA_STORAGE_ERROR, produce(first).Error)
	f.report(t, func(r *disks.PartitionReport) bool { return r.Wanted > 0 })
	// The dir's answer to the ask comes before the second batch.
	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: token, Seq: 2, Limited: true, Ceiling: 1 << 20})
	require.Equal(t, messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, produce(second).Error)

	retried := produce(first)
	require.Equal(t, messages.ErrorCode_NONE, retried.Error, retried.ErrorMessage)
	require.Zero(t, retried.BaseOffset)
	next := produce(second)
	require.Equal(t, messages.ErrorCode_NONE, next.Error, next.ErrorMessage)
	require.Equal(t, int64(1), next.BaseOffset)
}

// A produce request waiting for the first allowance is answered
// REQUEST_TIMED_OUT, retriable, once past its timeout, though the dir never
// answers: an answer lost parks no produce for ever. Meanwhile each tick's
// report asks the dir again. What waits behind the request answered is
// taken in order once the allowance comes: refused as out of order, then
// appended after the retry.
func TestStashedProduceTimesOutWithoutAnAllowance(t *testing.T) {
	f := newAllowanceFixture(t, 10*time.Millisecond)
	first := f.report(t, func(r *disks.PartitionReport) bool { return r.Awaiting })
	expiring := f.system.Root.RequestFuture(f.pid, &messages.ProduceRequest{Topic: "t", Acks: 1, TimeoutMs: 50, Records: idempotentBatch(t, 0, "first")}, moveTestTimeout)
	waiting := f.system.Root.RequestFuture(f.pid, &messages.ProduceRequest{Topic: "t", Acks: 1, TimeoutMs: 60_000, Records: idempotentBatch(t, 1, "second")}, moveTestTimeout)
	again := f.report(t, func(r *disks.PartitionReport) bool { return r.Awaiting })
	require.Same(t, first.Token, again.Token, "the same incarnation asks again")

	res, err := expiring.Result()
	require.NoError(t, err)
	expired := res.(*messages.ProduceResponse)
	require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, expired.Error)
	require.Contains(t, expired.ErrorMessage, "log dir "+f.dir+" has not allowed appends yet")

	f.system.Root.Send(f.pid, &disks.DirAllowance{Token: first.Token, Seq: 1, Limited: true, Ceiling: 1 << 20})
	res, err = waiting.Result()
	require.NoError(t, err)
	require.Equal(t, messages.ErrorCode_OUT_OF_ORDER_SEQUENCE_NUMBER, res.(*messages.ProduceResponse).Error)
	for seq, value := range []string{"first", "second"} {
		resp := f.request(t, &messages.ProduceRequest{Topic: "t", Acks: 1, Records: idempotentBatch(t, int32(seq), value)}).(*messages.ProduceResponse)
		require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
		require.Equal(t, int64(seq), resp.BaseOffset)
	}
}

// An allowance lost between a log dir and its partition holds no produce
// for ever: the partition's next tick report asks again, and the dir sends
// the allowance again. A proxy between them drops the dir's first.
func TestLostAllowanceIsSentAgain(t *testing.T) {
	system := actortest.System(t)
	logger := logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel))
	dirPath := t.TempDir()
	dir := system.Root.Spawn(disks.NewLogDirProps(disks.LogDirConfig{
		Path: dirPath, FS: disk.OS, Capacity: 16 << 20, Reserve: disks.Reserve{Bytes: 1 << 20},
		UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: logger,
	}))
	var partition *actor.PID
	dropped := 0
	proxy := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *disks.PartitionReport:
			partition = m.PID
			r := *m
			r.PID = ctx.Self()
			ctx.Send(dir, &r)
		case *disks.DirAllowance:
			if dropped == 0 {
				dropped++
				return
			}
			ctx.Send(partition, m)
		}
	}))
	pid := system.Root.Spawn(NewPartitionProps(PartitionConfig{
		Topic: "t", FS: disk.OS, LogDir: dirPath, Config: topic.DefaultConfig(), Transport: remote.NewTransport(),
		LogDirActor: proxy, TickInterval: 20 * time.Millisecond, Logger: logger,
	}))
	res, err := system.Root.RequestFuture(pid, &messages.ProduceRequest{Topic: "t", Acks: 1, TimeoutMs: 60_000, Records: idempotentBatch(t, 0, "first")}, moveTestTimeout).Result()
	require.NoError(t, err)
	resp := res.(*messages.ProduceResponse)
	require.Equal(t, messages.ErrorCode_NONE, resp.Error, resp.ErrorMessage)
	require.Zero(t, resp.BaseOffset)
}

// A malformed produce request waiting for the first allowance times out as
// any other: its records are read only once valid.
func TestMalformedStashedProduceTimesOut(t *testing.T) {
	f := newAllowanceFixture(t, 10*time.Millisecond)
	f.report(t, func(r *disks.PartitionReport) bool { return r.Awaiting })
	for _, records := range [][]byte{{1, 2, 3}, make([]byte, wire.HeaderSize)} {
		resp := f.request(t, &messages.ProduceRequest{Topic: "t", Acks: 1, TimeoutMs: 20, Records: records}).(*messages.ProduceResponse)
		require.Equal(t, messages.ErrorCode_REQUEST_TIMED_OUT, resp.Error)
	}
}
