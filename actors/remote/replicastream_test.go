package remote

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/actortest"
	"github.com/depot-dev/depot/messages"
)

// fakeManager answers each ReplicaFetchRequest as a leader's partition
// manager does, through its transport's ReplicaFetchMessage, with parts
// laid out in frames of its pool; the correlation id of the request goes
// into the answer.
type fakeManager struct {
	tr    *Transport
	parts []*messages.ReplicaFetchedPartition
	asked chan *messages.ReplicaFetchRequest
}

func (m *fakeManager) Receive(ctx actor.Context) {
	req, ok := ctx.Message().(*messages.ReplicaFetchRequest)
	if !ok {
		return
	}
	m.asked <- req
	resp, frames, _ := replicaFetchOf(m.tr, req.CorrelationId, m.parts)
	ctx.Send(ctx.Sender(), m.tr.ReplicaFetchMessage(ctx.ActorSystem(), ctx.Sender(), resp, frames))
}

// answerSink passes on the answers a fetcher would take.
type answerSink struct {
	answers chan *messages.ReplicaFetchResponse
}

func (s *answerSink) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*messages.ReplicaFetchResponse); ok {
		s.answers <- m
	}
}

// replicaPair is a leader system serving replica streams with a
// fakeManager, and a follower system with a sink for the answers.
type replicaPair struct {
	leader, follower         *actor.ActorSystem
	leaderTr, followerTr     *Transport
	manager                  *fakeManager
	managerPID, sink         *actor.PID
	answers                  chan *messages.ReplicaFetchResponse
	parts, want              []*messages.ReplicaFetchedPartition
	framesPerAnswer          int
	logger                   *logrus.Entry
	leaderAddr, followerAddr string
}

func newReplicaPair(t *testing.T) *replicaPair {
	t.Helper()
	p := &replicaPair{answers: make(chan *messages.ReplicaFetchResponse, 16)}
	p.leader, p.leaderTr = newRemoteTestSystem(t)
	p.follower, p.followerTr = newRemoteTestSystem(t)
	p.leaderAddr, p.followerAddr = p.leader.Address(), p.follower.Address()
	p.parts = []*messages.ReplicaFetchedPartition{
		{Topic: "orders", Partition: 2, FetchOffset: 7, HighWatermark: 1 << 40, LogStartOffset: 3, Records: patterned(64<<10, 1)},
		{Topic: "orders", Partition: 3, Error: messages.ErrorCode_FENCED_LEADER_EPOCH, ErrorMessage: "epoch 4 is past"},
		{Topic: "orders", Partition: 4, FetchOffset: 1 << 33, HighWatermark: 1<<33 + 9, Records: patterned(300<<10, 2)},
		{Topic: "b", Partition: 9, Records: patterned(100, 3)},
	}
	_, frames, _ := replicaFetchOf(NewTransport(), 0, p.parts)
	p.framesPerAnswer = countFrames(frames)
	p.manager = &fakeManager{tr: p.leaderTr, parts: p.parts, asked: make(chan *messages.ReplicaFetchRequest, 16)}
	var err error
	p.managerPID, err = p.leader.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return p.manager }), "manager")
	require.NoError(t, err)
	p.sink = p.follower.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &answerSink{answers: p.answers} }))
	p.logger = actortest.Logger(t, logrus.WarnLevel).WithField("test", t.Name())
	p.leaderTr.ServeReplicaFetches(p.leader, p.managerPID, p.logger)
	return p
}

func (p *replicaPair) stream(t *testing.T) *ReplicaStream {
	s := p.followerTr.ReplicaStream(p.follower, actor.NewPID(p.leaderAddr, p.managerPID.Id), p.sink, p.logger)
	t.Cleanup(s.Close)
	return s
}

func fetchOf(corr uint64) *messages.ReplicaFetchRequest {
	return &messages.ReplicaFetchRequest{CorrelationId: corr, ReplicaId: 2, MaxWaitMs: 500, MaxBytes: 8 << 20,
		Partitions: []*messages.ReplicaFetchPartition{{Topic: "orders", Partition: 2, FetchOffset: 7, CurrentLeaderEpoch: 3, MaxBytes: 1 << 20}}}
}

// answer waits for the next answer, and requires it to be the one to the
// fetch corr, with every part as the manager laid it out; it releases the
// answer's records.
func (p *replicaPair) answer(t *testing.T, corr uint64) {
	t.Helper()
	select {
	case got := <-p.answers:
		require.Equal(t, corr, got.CorrelationId)
		want := &messages.ReplicaFetchResponse{CorrelationId: corr, Partitions: p.parts}
		require.True(t, proto.Equal(want, got), "got %v", got)
		for _, part := range got.Partitions {
			p.followerTr.ReleaseRecords(part.Records)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer to fetch %d", corr)
	}
}

// roundTrip sends the fetch corr on s, which the manager is to be asked
// and answer.
func (p *replicaPair) roundTrip(t *testing.T, s *ReplicaStream, corr uint64) {
	t.Helper()
	s.Fetch(fetchOf(corr))
	p.asked(t)
	p.answer(t, corr)
}

// asked waits for the manager to be asked a fetch.
func (p *replicaPair) asked(t *testing.T) *messages.ReplicaFetchRequest {
	t.Helper()
	select {
	case req := <-p.manager.asked:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("the manager was not asked")
		return nil
	}
}

// noAnswer requires that no answer comes within d.
func (p *replicaPair) noAnswer(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case got := <-p.answers:
		t.Fatalf("an answer came: %d", got.CorrelationId)
	case <-time.After(d):
	}
}

// A fetch on a replica stream reaches the leader's manager as it was sent,
// and its answer comes back whole to the follower's actor: the records of
// each part alias one buffer of the follower's pool, which each holds
// until released, and the leader's frames go back to its pool once
// written. The stream shares the actor port with gRPC, which still serves.
func TestReplicaStreamCarriesFetches(t *testing.T) {
	p := newReplicaPair(t)
	s := p.stream(t)
	putsBefore := p.leaderTr.PoolStats().Puts
	s.Fetch(fetchOf(7))
	require.True(t, proto.Equal(fetchOf(7), p.asked(t)))
	select {
	case got := <-p.answers:
		want := &messages.ReplicaFetchResponse{CorrelationId: 7, Partitions: p.parts}
		require.True(t, proto.Equal(want, got), "got %v", got)
		require.Equal(t, 3, p.followerTr.PoolStats().Held, "each part with records holds the answer's buffer")
		held := p.followerTr.received
		held.mu.Lock()
		first, third := held.m[&got.Partitions[0].Records[0]], held.m[&got.Partitions[2].Records[0]]
		held.mu.Unlock()
		require.NotNil(t, first)
		require.Same(t, first, third, "the parts' records lie in one buffer")
		for _, part := range got.Partitions {
			p.followerTr.ReleaseRecords(part.Records)
		}
		require.Zero(t, p.followerTr.PoolStats().Held)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	require.Eventually(t, func() bool {
		return p.leaderTr.PoolStats().Puts >= putsBefore+int64(p.framesPerAnswer)
	}, 5*time.Second, 5*time.Millisecond, "the leader's frames go back to its pool")

	for corr := uint64(8); corr < 12; corr++ {
		p.roundTrip(t, s, corr)
	}

	// The same port still serves actor messages over gRPC.
	resp, err := p.follower.Root.RequestFuture(actor.NewPID(p.leaderAddr, p.managerPID.Id), fetchOf(20), 10*time.Second).Result()
	require.NoError(t, err)
	require.Equal(t, uint64(20), resp.(*messages.ReplicaFetchResponse).CorrelationId)
}

// A replica stream's fetches and answers take the faults of their
// systems' Faults: a cut of the leader on the follower drops the fetch, a
// cut of the follower on the leader drops the answer, and a delay delays
// either; once healed, the next fetch is answered.
func TestReplicaStreamTakesFaults(t *testing.T) {
	p := newReplicaPair(t)
	s := p.stream(t)
	p.roundTrip(t, s, 1)

	p.followerTr.Faults().Cut(p.leaderAddr)
	s.Fetch(fetchOf(2))
	p.noAnswer(t, 300*time.Millisecond)
	require.Empty(t, p.manager.asked, "the fetch was dropped")
	p.followerTr.Faults().HealAll()
	p.roundTrip(t, s, 3)

	p.leaderTr.Faults().Cut(p.followerAddr)
	s.Fetch(fetchOf(4))
	p.asked(t)
	p.noAnswer(t, 300*time.Millisecond)
	p.leaderTr.Faults().HealAll()
	p.roundTrip(t, s, 5)

	const delay = 300 * time.Millisecond
	for _, tr := range []*Transport{p.followerTr, p.leaderTr} {
		peer := p.leaderAddr
		if tr == p.leaderTr {
			peer = p.followerAddr
		}
		tr.Faults().Delay(peer, delay)
		start := time.Now()
		p.roundTrip(t, s, 6)
		require.GreaterOrEqual(t, time.Since(start), delay)
		tr.Faults().HealAll()
	}
}

// A stream whose server stops is closed; the follower's next fetch after
// the server serves again connects anew and is answered.
func TestReplicaStreamReconnects(t *testing.T) {
	p := newReplicaPair(t)
	s := p.stream(t)
	p.roundTrip(t, s, 1)

	p.leaderTr.ServeReplicaFetches(nil, nil, nil)
	s.Fetch(fetchOf(2))
	p.noAnswer(t, 300*time.Millisecond)
	require.Empty(t, p.manager.asked)

	p.leaderTr.ServeReplicaFetches(p.leader, p.managerPID, p.logger)
	require.Eventually(t, func() bool {
		s.Fetch(fetchOf(3))
		select {
		case got := <-p.answers:
			for _, part := range got.Partitions {
				p.followerTr.ReleaseRecords(part.Records)
			}
			return got.CorrelationId == 3
		case <-time.After(200 * time.Millisecond):
			return false
		}
	}, 10*time.Second, time.Millisecond)
}

// rawStream dials the leader's port, says the magic and writes b; it
// returns what the leader sends back until it closes the connection.
func rawStream(t *testing.T, address string, b []byte) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", address)
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write(append([]byte(replicaStreamMagic), b...))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, err := io.ReadAll(conn)
	require.NoError(t, err, "the leader closes the stream")
	return got
}

func lengthPrefixed(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// A stream that sends what is not a hello and fetches is closed, with no
// answer but the leader's hello to a good hello, and nothing reaches the
// manager; the node serves replica streams and gRPC as before.
func TestReplicaStreamRefusesBadInput(t *testing.T) {
	p := newReplicaPair(t)
	hello := appendHello(nil, p.followerAddr)[len(replicaStreamMagic):]
	fetch, err := proto.Marshal(fetchOf(1))
	require.NoError(t, err)
	version := []byte{replicaStreamVersion}
	for name, b := range map[string][]byte{
		"no version":          nil,
		"another version":     append([]byte{replicaStreamVersion + 1}, hello[1:]...),
		"hello too long":      binary.AppendUvarint(version, maxReplicaHelloBytes+1),
		"hello cut short":     binary.AppendUvarint(version, 10),
		"hello not a varint":  append(version, bytes.Repeat([]byte{0xff}, 11)...),
		"frame too large":     append(hello, binary.BigEndian.AppendUint32(nil, maxReplicaFrameBytes+1)...),
		"frame of max uint32": append(hello, 0xff, 0xff, 0xff, 0xff),
		"undecodable fetch":   append(hello, lengthPrefixed([]byte{0x0a, 0xff, 0x01})...),
		"frame cut short":     append(hello, lengthPrefixed(fetch)[:len(fetch)]...),
	} {
		t.Run(name, func(t *testing.T) {
			got := rawStream(t, p.leaderAddr, b)
			if bytes.HasPrefix(b, hello) {
				require.Equal(t, helloAnswer, got)
			} else {
				require.Empty(t, got)
			}
			require.Empty(t, p.manager.asked)
		})
	}
	s := p.stream(t)
	p.roundTrip(t, s, 2)
	_, err = p.follower.Root.RequestFuture(actor.NewPID(p.leaderAddr, p.managerPID.Id), fetchOf(3), 10*time.Second).Result()
	require.NoError(t, err)
}

// A leader of a version without replica streams answers the hello as gRPC
// does; the follower's fetches then go to its manager as actor messages,
// and their answers come back to the follower's actor over gRPC.
func TestReplicaStreamToALeaderWithoutThem(t *testing.T) {
	p := newReplicaPair(t)
	old, oldTr := newRemoteTestSystem(t, func(c *remote.Config) {
		c.ServerOptions = append(c.ServerOptions, grpc.Creds(insecure.NewCredentials())) // the last one counts
	})
	manager := &fakeManager{tr: oldTr, parts: p.parts, asked: make(chan *messages.ReplicaFetchRequest, 16)}
	_, err := old.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return manager }), "manager")
	require.NoError(t, err)
	s := p.followerTr.ReplicaStream(p.follower, actor.NewPID(old.Address(), "manager"), p.sink, p.logger)
	t.Cleanup(s.Close)
	p.manager = manager
	for corr := uint64(1); corr <= 3; corr++ {
		p.roundTrip(t, s, corr)
	}
}

// Only what stands for a replica stream of the system takes an answer as
// pieces.
func TestIsReplicaStream(t *testing.T) {
	system := actortest.System(t)
	require.True(t, isReplicaStream(system, system.NewLocalPID(replicaStreamPrefix+"7")))
	require.False(t, isReplicaStream(system, system.NewLocalPID(replicaStreamPrefix)))
	require.False(t, isReplicaStream(system, system.NewLocalPID("fetcher")))
	require.False(t, isReplicaStream(system, actor.NewPID("127.0.0.1:9092", replicaStreamPrefix+"7")))
	require.False(t, isReplicaStream(system, nil))

	tr := NewTransport()
	resp, frames, _ := replicaFetchOf(tr, 1, []*messages.ReplicaFetchedPartition{{Topic: "t", Records: patterned(64<<10, 1)}})
	require.IsType(t, &replicaAnswer{}, tr.ReplicaFetchMessage(system, system.NewLocalPID(replicaStreamPrefix+"7"), resp, frames))
	require.Zero(t, tr.outgoing.pending(), "no token: the stream has the pieces")
}

// Whatever a stream's answers hold, the follower's reader decodes them as
// proto does or refuses them, and an answer decoded holds the buffer only
// through its records; a hello read writes and reads back the same.
func FuzzReplicaStreamRead(f *testing.F) {
	tr := NewTransport()
	resp, frames, _ := replicaFetchOf(tr, math.MaxUint64, []*messages.ReplicaFetchedPartition{
		{Topic: "orders", Partition: 2, FetchOffset: 7, Records: patterned(inlineData, 1)},
		{Topic: "b", Error: messages.ErrorCode_FENCED_LEADER_EPOCH, ErrorMessage: "x"},
	})
	g, ok := gatherReplicaFetch(resp, frames)
	require.True(f, ok)
	var whole []byte
	for _, piece := range g.pieces {
		whole = append(whole, piece...)
	}
	f.Add(lengthPrefixed(whole))
	f.Add(lengthPrefixed(nil))
	f.Add([]byte{0, 0, 0, 3, 0x0a, 0xff, 0x01})
	f.Add(appendHello(nil, "127.0.0.1:7070")[len(replicaStreamMagic):])
	f.Fuzz(func(t *testing.T, b []byte) {
		tr := NewTransport()
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			got, err := tr.readReplicaFetchResponse(r)
			if err != nil {
				break
			}
			n, err := readFrameSize(bytes.NewReader(b), maxReplicaFrameBytes)
			require.NoError(t, err)
			want := &messages.ReplicaFetchResponse{}
			if proto.Unmarshal(b[4:4+n], want) == nil {
				require.True(t, proto.Equal(want, got))
			}
			for _, part := range got.Partitions {
				tr.ReleaseRecords(part.Records)
			}
			require.Zero(t, tr.PoolStats().Held)
			b = b[4+n:]
			r = bufio.NewReader(bytes.NewReader(b))
		}
		if addr, err := readHello(bufio.NewReader(bytes.NewReader(b))); err == nil {
			again, err := readHello(bufio.NewReader(bytes.NewReader(appendHello(nil, addr)[len(replicaStreamMagic):])))
			require.NoError(t, err)
			require.Equal(t, addr, again)
		}
	})
}

// Whatever a stream sends the leader, its server ends the stream or hands
// the manager decoded fetches, and never panics.
func FuzzReplicaStreamServe(f *testing.F) {
	hello := appendHello(nil, "127.0.0.1:7070")[len(replicaStreamMagic):]
	fetch, err := proto.Marshal(fetchOf(1))
	require.NoError(f, err)
	f.Add(append(hello, lengthPrefixed(fetch)...))
	f.Add(append(hello, 0xff, 0xff, 0xff, 0xff))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		system := actortest.System(t)
		asked := make(chan *messages.ReplicaFetchRequest, 1024)
		manager := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if m, ok := ctx.Message().(*messages.ReplicaFetchRequest); ok {
				asked <- m
			}
		}))
		tr := NewTransport()
		tr.ServeReplicaFetches(system, manager, actortest.Logger(t, logrus.ErrorLevel).WithField("test", "fuzz"))
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			tr.replicas.serve(server)
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }() // the leader's hello
		go func() {
			_, _ = client.Write(b)
			client.Close()
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not end the stream")
		}
	})
}
