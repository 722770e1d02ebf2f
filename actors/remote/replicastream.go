package remote

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/messages"
)

// A follower's fetches from one leader node, and the leader's answers,
// travel on a replica stream: a TCP connection of their own to the
// leader's actor port, on which each is a frame, a 4-byte big-endian
// length and the message's protobuf bytes, rather than an actor message
// inside gRPC's HTTP/2 frames. The leader writes an answer's frames of
// records as they were read from its segments, in one writev; the follower
// reads the answer into one pooled buffer, whose records its partitions
// append where they lie. gRPC copies every byte of a message twice more:
// out of its 16 KiB data frames into a buffer of its own, and from those
// into the one buffer the codec decodes.
//
// The stream shares the actor port: the first bytes a connection sends
// tell a replica stream (replicaStreamMagic) from gRPC (HTTP/2's preface),
// and the node's gRPC server hands the replica streams over to the
// transport (see muxCredentials). A stream opens with a hello, the magic,
// the version of the stream's protocol and the follower's own actor
// address, so that the leader's Faults act on its answers as they do on
// its actor messages; the leader answers with the magic and its version
// once it serves the stream. A leader of a version without replica
// streams answers as gRPC does, with HTTP/2's settings, and its followers
// then send their fetches as actor messages, so that a cluster upgraded
// one node at a time keeps replicating.
//
// Delivery is at most once, as it is for actor messages: a fetch written
// to a connection that fails is lost, and the follower sends another once
// the answer is late (see the partition package's replicaFetchTimeout).

const (
	// replicaStreamMagic opens a replica stream; a gRPC connection opens
	// with "PRI * HTTP/2.0".
	replicaStreamMagic = "DPRS"
	// replicaStreamVersion is the version of the stream's protocol.
	replicaStreamVersion byte = 1
	// maxReplicaFrameBytes bounds a frame of a replica stream, as
	// MaxRemoteMessageBytes bounds an actor message.
	maxReplicaFrameBytes = MaxRemoteMessageBytes
	// maxReplicaHelloBytes bounds the address a hello names.
	maxReplicaHelloBytes = 1 << 10
	// replicaStreamReadBuffer is the read buffer of a replica stream: an
	// answer larger than it is read into its own buffer directly.
	replicaStreamReadBuffer = 16 << 10
	// replicaDialTimeout bounds the dial of a replica stream.
	replicaDialTimeout = 2 * time.Second
	// replicaQueueLimit bounds the frames waiting for a stream's writer:
	// a follower has one fetch in flight, and another once it gave up on
	// the first.
	replicaQueueLimit = 64
	// replicaStreamPrefix begins the ids of the processes that stand for
	// the leader's replica streams in its actor system.
	replicaStreamPrefix = "replica-stream$"
)

var (
	errReplicaFrameSize = errors.New("replica stream: frame size out of bounds")
	errReplicaHello     = errors.New("replica stream: bad hello")
	// errNoReplicaStreams is what a follower's dial returns when the
	// leader answers its hello as a node without replica streams does.
	errNoReplicaStreams = errors.New("replica stream: the leader does not serve replica streams")
)

// muxCredentials are the transport credentials of a node's gRPC server:
// insecure, as protoactor's are, but a connection that opens with
// replicaStreamMagic is taken from gRPC and served as a replica stream.
type muxCredentials struct {
	credentials.TransportCredentials
	t *Transport
}

func newMuxCredentials(t *Transport) credentials.TransportCredentials {
	return muxCredentials{TransportCredentials: insecure.NewCredentials(), t: t}
}

// ServerHandshake reads the first bytes of conn, which gRPC accepted.
func (c muxCredentials) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	var head [len(replicaStreamMagic)]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF // closed before it said anything
		}
		return nil, nil, err
	}
	if string(head[:]) == replicaStreamMagic {
		_ = conn.SetDeadline(time.Time{}) // gRPC's handshake deadline
		go c.t.replicas.serve(conn)
		return nil, nil, credentials.ErrConnDispatched
	}
	return c.TransportCredentials.ServerHandshake(&peekedConn{Conn: conn, head: head[:]})
}

func (c muxCredentials) Clone() credentials.TransportCredentials {
	return muxCredentials{TransportCredentials: c.TransportCredentials.Clone(), t: c.t}
}

// peekedConn is a connection whose first bytes were read already: head.
type peekedConn struct {
	net.Conn
	head []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.head) > 0 {
		n := copy(p, c.head)
		c.head = c.head[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// outFrame is a frame waiting for a stream's writer: its pieces, which of
// them go back to the transport's pool once written, and when it is due.
type outFrame struct {
	pieces [][]byte
	pooled []bool
	due    time.Time
	// msg is the message a follower's frame carries, for the actor
	// messages that carry it to a leader without replica streams.
	msg proto.Message
}

// frameQueue is the frames waiting for one stream's writer, in order.
// Safe for concurrent use.
type frameQueue struct {
	t      *Transport
	peer   string // the actor address whose faults the frames take
	mu     sync.Mutex
	frames []outFrame
	closed bool
	wake   chan struct{}
}

func newFrameQueue(t *Transport, peer string) *frameQueue {
	return &frameQueue{t: t, peer: peer, wake: make(chan struct{}, 1)}
}

// push queues f, as the faults of q's peer have it: dropped while the peer
// is cut, due later while it is delayed. A frame that finds the queue
// closed or full is dropped too, at most once as any message is.
func (q *frameQueue) push(f outFrame) {
	lf := q.t.faults.link(q.peer)
	if lf.delay > 0 {
		f.due = time.Now().Add(lf.delay)
	}
	q.mu.Lock()
	if lf.cut || q.closed || len(q.frames) >= replicaQueueLimit {
		q.mu.Unlock()
		q.t.putPieces(f)
		return
	}
	q.frames = append(q.frames, f)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns the frames queued, and empties the queue.
func (q *frameQueue) take() []outFrame {
	q.mu.Lock()
	defer q.mu.Unlock()
	fs := q.frames
	q.frames = nil
	return fs
}

// close drops what is queued, and every frame pushed from now on.
func (q *frameQueue) close() {
	q.mu.Lock()
	q.closed = true
	fs := q.frames
	q.frames = nil
	q.mu.Unlock()
	q.t.putFrames(fs)
}

// putPieces hands f's pooled pieces back to t's pool.
func (t *Transport) putPieces(f outFrame) {
	for i, p := range f.pieces {
		if f.pooled != nil && f.pooled[i] {
			t.buffers.Put(&p)
		}
	}
}

func (t *Transport) putFrames(fs []outFrame) {
	for _, f := range fs {
		t.putPieces(f)
	}
}

// writeFrames writes fs to conn, in one writev each, each once it is due
// (or at once when stop closes), and hands their pooled pieces back.
func (t *Transport) writeFrames(conn net.Conn, fs []outFrame, stop <-chan struct{}) error {
	for i, f := range fs {
		if wait := time.Until(f.due); wait > 0 {
			timer := time.NewTimer(wait)
			select {
			case <-timer.C:
			case <-stop:
				timer.Stop()
			}
		}
		size := 0
		for _, p := range f.pieces {
			size += len(p)
		}
		var head [4]byte
		binary.BigEndian.PutUint32(head[:], uint32(size))
		bufs := make(net.Buffers, 0, len(f.pieces)+1)
		bufs = append(append(bufs, head[:]), f.pieces...)
		_, err := bufs.WriteTo(conn)
		t.putPieces(f)
		if err != nil {
			t.putFrames(fs[i+1:])
			return err
		}
	}
	return nil
}

// messageFrame is m marshalled as a frame.
func messageFrame(m proto.Message) (outFrame, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return outFrame{}, err
	}
	return outFrame{pieces: [][]byte{b}, msg: m}, nil
}

// readFrameSize reads a frame's length, which must be at most limit.
func readFrameSize(r io.Reader, limit int) (int, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	n := binary.BigEndian.Uint32(head[:])
	if uint64(n) > uint64(limit) {
		return 0, fmt.Errorf("%w: %d bytes, at most %d", errReplicaFrameSize, n, limit)
	}
	return int(n), nil
}

// appendHello appends the hello of a stream from the actor address from.
func appendHello(b []byte, from string) []byte {
	b = append(b, replicaStreamMagic...)
	b = append(b, replicaStreamVersion)
	return protowire.AppendString(b, from)
}

// helloAnswer is the leader's answer to a hello it serves.
var helloAnswer = append([]byte(replicaStreamMagic), replicaStreamVersion)

// readHello reads the hello that follows the magic: the version, which
// must be replicaStreamVersion, and the follower's actor address.
func readHello(r *bufio.Reader) (string, error) {
	version, err := r.ReadByte()
	if err != nil {
		return "", fmt.Errorf("%w: %w", errReplicaHello, err)
	}
	if version != replicaStreamVersion {
		return "", fmt.Errorf("%w: version %d, this node speaks %d", errReplicaHello, version, replicaStreamVersion)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", fmt.Errorf("%w: %w", errReplicaHello, err)
	}
	if n > maxReplicaHelloBytes {
		return "", fmt.Errorf("%w: an address of %d bytes", errReplicaHello, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("%w: %w", errReplicaHello, err)
	}
	return string(b), nil
}

// readReplicaFetchResponse reads the next answer of a stream into a buffer
// of t's pool, which the answer's records alias and hold, as they do a
// received actor message's (see Transport.ReleaseRecords).
func (t *Transport) readReplicaFetchResponse(r io.Reader) (*messages.ReplicaFetchResponse, error) {
	n, err := readFrameSize(r, maxReplicaFrameBytes)
	if err != nil {
		return nil, err
	}
	b := t.buffers.Get(n)
	if _, err := io.ReadFull(r, *b); err != nil {
		t.buffers.Put(b)
		return nil, err
	}
	resp, err := unmarshalReplicaFetchResponse(*b)
	if err != nil {
		t.buffers.Put(b)
		return nil, fmt.Errorf("replica stream: undecodable answer: %w", err)
	}
	// b goes back to the pool once no records hold it.
	shared := &sharedRead{buf: b, pool: t.buffers}
	shared.refs.Store(1) // the reader's, until the records hold it
	t.received.hold(replicaFetchResponseName, *b, shared)
	shared.release()
	return resp, nil
}

// replicaAnswer is a leader's answer on a replica stream as the pieces it
// was gathered into (see ReplicaFetchMessage).
type replicaAnswer struct {
	g gatheredPieces
}

// isReplicaStream reports whether pid stands for a replica stream of
// system's transport.
func isReplicaStream(system *actor.ActorSystem, pid *actor.PID) bool {
	return pid != nil && system != nil && len(pid.Id) > len(replicaStreamPrefix) &&
		strings.HasPrefix(pid.Id, replicaStreamPrefix) && !isRemote(system, pid)
}

// ReplicaStream is a follower's stream of fetches to the partition manager
// of one leader node, whose answers it sends to the fetcher that opened
// it. It connects on its first fetch, and again on the first after its
// connection failed. To a leader without replica streams it sends its
// fetches as actor messages. Safe for concurrent use.
type ReplicaStream struct {
	t       *Transport
	system  *actor.ActorSystem
	manager *actor.PID
	to      *actor.PID
	logger  *logrus.Entry
	queue   *frameQueue
	done    chan struct{}
	once    sync.Once
	// actorMessages is set once the leader answered a hello as a node
	// without replica streams. Only run uses it.
	actorMessages bool
}

// ReplicaStream opens the stream of fetches from system to manager, the
// partition manager of the leader node, whose answers go to the actor to.
// Close ends it.
func (t *Transport) ReplicaStream(system *actor.ActorSystem, manager, to *actor.PID, logger *logrus.Entry) *ReplicaStream {
	s := &ReplicaStream{
		t: t, system: system, manager: manager, to: to,
		logger: logger.WithField("leader_address", manager.Address),
		queue:  newFrameQueue(t, manager.Address), done: make(chan struct{}),
	}
	go s.run()
	return s
}

// Fetch sends req, to be answered to the stream's actor. It does not
// block: a fetch that cannot go (the stream is closed, or its address
// cut) is dropped, and the fetcher gives up on its answer in time.
func (s *ReplicaStream) Fetch(req *messages.ReplicaFetchRequest) {
	f, err := messageFrame(req)
	if err != nil {
		s.logger.WithError(err).Warn("replica fetch not sent")
		return
	}
	s.queue.push(f)
}

// Close ends the stream: its connection closes, and what it has not sent
// is dropped.
func (s *ReplicaStream) Close() {
	s.once.Do(func() {
		close(s.done)
		s.queue.close()
	})
}

// run writes the stream's fetches, connecting as needed.
func (s *ReplicaStream) run() {
	var conn net.Conn
	var broken *atomic.Bool
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for {
		select {
		case <-s.done:
			return
		case <-s.queue.wake:
		}
		fs := s.queue.take()
		if len(fs) == 0 {
			continue
		}
		if conn != nil && broken.Load() {
			conn.Close()
			conn = nil
		}
		if conn == nil && !s.actorMessages {
			var err error
			conn, broken, err = s.dial()
			switch {
			case errors.Is(err, errNoReplicaStreams):
				s.logger.Info("the leader serves no replica streams; its fetches go as actor messages")
				s.actorMessages = true
			case err != nil:
				s.logger.WithError(err).Debug("replica stream did not connect")
				s.t.putFrames(fs)
				continue
			}
		}
		if s.actorMessages {
			for _, f := range fs {
				s.system.Root.RequestWithCustomSender(s.manager, f.msg, s.to)
			}
			continue
		}
		if err := s.t.writeFrames(conn, fs, s.done); err != nil {
			s.logger.WithError(err).Debug("replica stream failed")
			conn.Close()
			conn = nil
		}
	}
}

// dial connects to the leader, says hello, waits for the leader's, and
// starts reading the answers. It returns errNoReplicaStreams when the
// leader answers as a node without replica streams.
func (s *ReplicaStream) dial() (net.Conn, *atomic.Bool, error) {
	conn, err := net.DialTimeout("tcp", s.manager.Address, replicaDialTimeout)
	if err != nil {
		return nil, nil, err
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	r := bufio.NewReaderSize(conn, replicaStreamReadBuffer)
	if err := s.hello(conn, r); err != nil {
		conn.Close()
		return nil, nil, err
	}
	broken := &atomic.Bool{}
	go s.read(conn, r, broken)
	return conn, broken, nil
}

// hello says the stream's hello on conn and reads the leader's from r.
func (s *ReplicaStream) hello(conn net.Conn, r *bufio.Reader) error {
	if err := conn.SetDeadline(time.Now().Add(replicaDialTimeout)); err != nil {
		return err
	}
	if _, err := conn.Write(appendHello(nil, s.system.Address())); err != nil {
		return err
	}
	answer := make([]byte, len(helloAnswer))
	if _, err := io.ReadFull(r, answer); err != nil {
		return fmt.Errorf("replica stream: no answer to the hello: %w", err)
	}
	if !bytes.Equal(answer, helloAnswer) {
		return errNoReplicaStreams
	}
	return conn.SetDeadline(time.Time{})
}

// read sends each answer r reads from conn to the stream's actor, until
// conn fails or closes.
func (s *ReplicaStream) read(conn net.Conn, r *bufio.Reader, broken *atomic.Bool) {
	defer broken.Store(true)
	defer conn.Close()
	for {
		resp, err := s.t.readReplicaFetchResponse(r)
		if err != nil {
			select {
			case <-s.done:
			default:
				if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					s.logger.WithError(err).Warn("replica stream closed")
				}
			}
			return
		}
		select {
		case <-s.done:
			for _, part := range resp.GetPartitions() {
				s.t.ReleaseRecords(part.GetRecords()) // no fetcher takes them
			}
			return
		default:
			s.system.Root.Send(s.to, resp)
		}
	}
}

// replicaServer serves the replica streams followers open to one node.
// Safe for concurrent use.
type replicaServer struct {
	t       *Transport
	mu      sync.Mutex
	system  *actor.ActorSystem
	manager *actor.PID
	logger  *logrus.Entry
	conns   map[net.Conn]struct{}
}

// ServeReplicaFetches has the fetches that followers send t's actor system
// on their replica streams go to manager, the node's partition manager,
// which answers the stream as it answers a follower's actor (see
// ReplicaFetchMessage). A nil manager stops serving: the streams open
// close, and those that come are closed at once, until one is given
// again.
func (t *Transport) ServeReplicaFetches(system *actor.ActorSystem, manager *actor.PID, logger *logrus.Entry) {
	s := t.replicas
	s.mu.Lock()
	defer s.mu.Unlock()
	s.system, s.manager, s.logger = system, manager, logger
	if manager == nil {
		for conn := range s.conns {
			conn.Close()
		}
	}
}

// serve reads the fetches of one stream, after its magic, and hands them
// to the partition manager, until the stream fails, sends what is not a
// fetch, or the server stops.
func (s *replicaServer) serve(conn net.Conn) {
	defer conn.Close()
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	r := bufio.NewReaderSize(conn, replicaStreamReadBuffer)
	peer, err := readHello(r)
	s.mu.Lock()
	system, manager, logger := s.system, s.manager, s.logger
	if err != nil || manager == nil {
		s.mu.Unlock()
		if err != nil && logger != nil {
			logger.WithError(err).WithField("remote", conn.RemoteAddr().String()).Warn("closed a replica stream")
		}
		return
	}
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[conn] = struct{}{}
	s.mu.Unlock()
	logger = logger.WithField("follower_address", peer)
	if _, err := conn.Write(helloAnswer); err != nil {
		s.forget(conn)
		return
	}

	sc := &replicaStreamProcess{t: s.t, queue: newFrameQueue(s.t, peer), logger: logger}
	pid, _ := system.ProcessRegistry.Add(sc, replicaStreamPrefix+system.ProcessRegistry.NextId())
	done := make(chan struct{})
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.t.writeAnswers(conn, sc.queue, done, logger)
	}()
	defer func() {
		system.ProcessRegistry.Remove(pid)
		close(done)
		sc.queue.close()
		conn.Close()
		<-written
		s.forget(conn)
	}()
	for {
		n, err := readFrameSize(r, maxReplicaFrameBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				logger.WithError(err).Warn("closed a replica stream")
			}
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return
		}
		req := &messages.ReplicaFetchRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			logger.WithError(err).Warn("closed a replica stream that sent an undecodable fetch")
			return
		}
		system.Root.RequestWithCustomSender(manager, req, pid)
	}
}

// forget takes conn off the streams the server closes when it stops.
func (s *replicaServer) forget(conn net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, conn)
}

// writeAnswers writes the answers queued for one stream until done
// closes or the connection fails.
func (t *Transport) writeAnswers(conn net.Conn, q *frameQueue, done <-chan struct{}, logger *logrus.Entry) {
	for {
		select {
		case <-done:
			return
		case <-q.wake:
		}
		if err := t.writeFrames(conn, q.take(), done); err != nil {
			logger.WithError(err).Debug("replica stream failed")
			conn.Close()
			return
		}
	}
}

// replicaStreamProcess stands for one replica stream in the leader's actor
// system: the answers sent to it are queued for the stream's writer.
type replicaStreamProcess struct {
	t      *Transport
	queue  *frameQueue
	logger *logrus.Entry
}

func (p *replicaStreamProcess) SendUserMessage(_ *actor.PID, message any) {
	var f outFrame
	switch m := actor.UnwrapEnvelopeMessage(message).(type) {
	case *replicaAnswer:
		f = outFrame{pieces: m.g.pieces, pooled: m.g.pooled}
	case *messages.ReplicaFetchResponse:
		var err error
		if f, err = messageFrame(m); err != nil {
			p.logger.WithError(err).Warn("replica fetch answer not sent")
			return
		}
	default:
		return // a stream carries fetch answers only
	}
	p.queue.push(f)
}

func (p *replicaStreamProcess) SendSystemMessage(*actor.PID, any) {}

func (p *replicaStreamProcess) Stop(*actor.PID) {}
