package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// An actor system's process registry has registryBuckets buckets, keeps
// the processes protoactor registered before it was shrunk, and finds,
// stops and forgets the actors spawned in it.
func TestActorSystemRegistry(t *testing.T) {
	logger := logrus.New()
	logger.SetLevel(logrus.WarnLevel)
	system := NewActorSystem(logger)
	defer system.Shutdown()
	registry := system.ProcessRegistry
	require.Len(t, registry.LocalPIDs.LocalPIDs, registryBuckets)

	for _, id := range []string{"eventstream", "deadletter"} {
		_, ok := registry.GetLocal(id)
		require.True(t, ok, id)
	}

	const actors = 1000
	pids := make([]*actor.PID, actors)
	for i := range pids {
		pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			if s, ok := ctx.Message().(string); ok {
				ctx.Respond(s)
			}
		}), fmt.Sprintf("echo-%d", i))
		require.NoError(t, err)
		pids[i] = pid
	}
	for i, pid := range pids {
		got, err := system.Root.RequestFuture(pid, fmt.Sprint(i), 10*time.Second).Result()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), got)
	}
	for _, pid := range pids {
		require.NoError(t, system.Root.StopFuture(pid).Wait())
	}
	count := 0
	for _, bucket := range registry.LocalPIDs.LocalPIDs {
		count += bucket.Count()
	}
	require.Equal(t, 2, count, "only the event stream and the dead letters are left")
}
