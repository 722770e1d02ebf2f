package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/node"
)

// `depot group describe` shows a group of Kafka clients as it shows one
// of actor clients: its members, what each owns, and per partition the
// offset it committed through Kafka's OffsetCommit and its lag.
func TestGroupDescribeKafkaGroup(t *testing.T) {
	n, err := node.Start(node.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", KafkaListen: "127.0.0.1:0",
		Logger: actortest.Logger(t, logrus.WarnLevel)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Stop() })
	b := "--brokers=" + n.Address()
	_, errOut, err := depot(t, "", "topic", "create", "clicks", "-p", "1", b)
	require.NoError(t, err, errOut)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddress()), kgo.DefaultProduceTopic("clicks"))
	require.NoError(t, err)
	defer prod.Close()
	for i := range 50 {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(n.KafkaAddress()), kgo.ClientID("clicker"), kgo.ConsumerGroup("clickers"),
		kgo.ConsumeTopics("clicks"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	require.NoError(t, err)
	defer member.Close()
	var records []*kgo.Record
	for len(records) < 20 {
		fs := member.PollFetches(ctx)
		require.NoError(t, fs.Err())
		records = append(records, fs.Records()...)
	}
	require.NoError(t, member.CommitRecords(ctx, records[19]))

	out, errOut, err := depot(t, "", "group", "describe", "clickers", "-o", "json", b)
	require.NoError(t, err, errOut)
	var d groupDescription
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "cooperative-sticky", d.Assignor, "kgo's default balancer")
	require.Len(t, d.Members, 1)
	require.Equal(t, "clicker", d.Members[0].ClientID)
	require.Equal(t, []string{"clicks-0"}, d.Members[0].Partitions)
	require.Equal(t, []groupPartitionRow{
		{Topic: "clicks", Partition: 0, Committed: 20, LogEndOffset: 50, Lag: 30, Owner: d.Members[0].MemberID},
	}, d.Partitions)
}
