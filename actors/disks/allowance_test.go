package disks

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/disk"
)

// A log dir with a declared capacity sends the allowance pending for a
// partition again to each of its reports that has not taken it: the one
// sent may have been lost, and until it is taken the partition gets no
// other, so a lost one left it waiting for its first for ever. Once it is
// taken, no more copies go.
func TestLogDirSendsALostAllowanceAgain(t *testing.T) {
	system := actortest.System(t)
	allowances := make(chan *DirAllowance, 16)
	type ping struct{}
	partition := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *DirAllowance:
			allowances <- m
		case *ping:
			ctx.Respond(m)
		}
	}))
	dir := system.Root.Spawn(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, Capacity: 1 << 20, Reserve: Reserve{Bytes: 1 << 10},
		UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: logrus.NewEntry(actortest.Logger(t, logrus.WarnLevel)),
	}))
	next := func() *DirAllowance {
		t.Helper()
		select {
		case m := <-allowances:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no allowance")
			return nil
		}
	}
	tp := disk.TopicPartition{Topic: "t", Partition: 0}
	token := &AllowanceToken{}
	report := func(seq uint64) {
		system.Root.Send(dir, &PartitionReport{TP: tp, PID: partition, Token: token, AllowanceSeq: seq, Awaiting: seq == 0})
	}

	report(0)
	lost := next()
	require.Same(t, token, lost.Token)
	require.True(t, lost.Limited)
	require.Positive(t, lost.Ceiling)
	// The partition's tick reports it still waits: the same allowance
	// comes again.
	report(0)
	again := next()
	require.Equal(t, *lost, *again)

	report(again.Seq)
	_, err := system.Root.RequestFuture(dir, &WriteCheckpoints{}, 10*time.Second).Result()
	require.NoError(t, err)
	_, err = system.Root.RequestFuture(partition, &ping{}, 10*time.Second).Result()
	require.NoError(t, err)
	require.Empty(t, allowances, "nothing more once taken")
}

// A log dir actor restarted after a failure numbers its allowances on from
// the last one sent: a partition takes one only with a Seq above the last
// it took, so it would ignore those numbered afresh, while its reports of
// that last would read as acknowledging them, and it would refuse appends
// past its old ceiling for ever.
func TestRestartedLogDirNumbersAllowancesOn(t *testing.T) {
	system := actortest.System(t)
	allowances := make(chan *DirAllowance, 64)
	partition := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*DirAllowance); ok {
			allowances <- m
		}
	}))
	dir := system.Root.Spawn(NewLogDirProps(LogDirConfig{
		Path: t.TempDir(), FS: disk.OS, Capacity: 1 << 20, Reserve: Reserve{Bytes: 1 << 10},
		UsageInterval: time.Hour, CheckpointInterval: time.Hour, Logger: logrus.NewEntry(actortest.Logger(t, logrus.ErrorLevel)),
	}))
	next := func() *DirAllowance {
		t.Helper()
		select {
		case m := <-allowances:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no allowance")
			return nil
		}
	}
	tp := disk.TopicPartition{Topic: "t", Partition: 0}
	var token *AllowanceToken
	var taken uint64
	// A new incarnation of the partition each time, each answered.
	for range 3 {
		token = &AllowanceToken{}
		system.Root.Send(dir, &PartitionReport{TP: tp, PID: partition, Token: token, Awaiting: true})
		taken = next().Seq
	}

	process, ok := system.ProcessRegistry.Get(dir)
	require.True(t, ok)
	// As a supervisor restarts a failed actor: its mailbox holds what comes
	// until the new incarnation has started (after its children stopped).
	process.SendSystemMessage(dir, &actor.SuspendMailbox{})
	process.SendSystemMessage(dir, &actor.Restart{})
	system.Root.Send(dir, &PartitionReport{TP: tp, PID: partition, Token: token, AllowanceSeq: taken})
	require.Greater(t, next().Seq, taken)
}
