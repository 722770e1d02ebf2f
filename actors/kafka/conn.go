package kafka

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors"
	"github.com/depot-dev/depot/actors/remote"
	wirekafka "github.com/depot-dev/depot/wire/kafka"
)

// conn is the actor of one client connection. It holds the requests read
// and not yet answered, in the order they came (pending), hands each to
// its API's handler, and passes the answers to the writer in that order.
// Not shared: its mailbox is its only way in, but for held, which the
// reader adds to and takes the rest of once the actor has stopped.
type conn struct {
	l      *Listener
	nc     net.Conn
	logger *logrus.Entry
	self   *actor.PID
	// out takes the frames of answers to the writer. It never fills: it
	// holds cap(tokens) frames, and a frame is only read while a token is
	// free.
	out chan answerFrame
	// tokens are the requests that may be read and not yet written back
	// (Config.MaxInFlight): the reader takes one for each frame, the
	// writer gives it back once the answer is written, the actor once a
	// request that has no answer is through.
	tokens chan struct{}
	// done is closed when the actor stops; stopped says it was.
	done    chan struct{}
	stopped bool
	// held is the budget bytes that requests read and not answered hold.
	held    atomic.Int64
	pending []*exchange
	closed  bool
	topics  topicCache
}

func newConn(l *Listener, nc net.Conn, id uint64) *conn {
	c := &conn{
		l:      l,
		nc:     nc,
		logger: l.logger.WithFields(logrus.Fields{"conn": id, "client": nc.RemoteAddr().String()}),
		out:    make(chan answerFrame, l.cfg.MaxInFlight),
		tokens: make(chan struct{}, l.cfg.MaxInFlight),
		done:   make(chan struct{}),
	}
	for range l.cfg.MaxInFlight {
		c.tokens <- struct{}{}
	}
	return c
}

// exchange is one request and, once known, its answer, in its place
// among the connection's answers.
type exchange struct {
	req wirekafka.Request
	// bytes are what the request holds of the listener's budget.
	bytes int64
	// buffer is the pooled buffer the request was read into, when it was
	// (see conn.read); the exchange lets go of it once answered.
	buffer *remote.HeldBuffer
	// answered is set once the answer is known; frame is the answer's
	// frame, with no pieces for a request answered with nothing (a
	// produce with acks=0).
	answered bool
	frame    answerFrame
}

// answerFrame is the frame of an answer, in pieces written one after
// another, and the fetch frames that pieces alias: the writer hands them
// back once its writev of the pieces has returned.
type answerFrame struct {
	pieces  [][]byte
	fetched []*remote.FetchFrame
}

// releaseFetched hands back the fetch frames of f.
func (f answerFrame) releaseFetched() {
	for _, ff := range f.fetched {
		ff.Release()
	}
}

// Messages from the connection's goroutines to its actor.
type (
	// received is a request the reader read and decoded, and the pooled
	// buffer it was read into, nil when it was not.
	received struct {
		req    wirekafka.Request
		bytes  int64
		buffer *remote.HeldBuffer
	}
	// readFailed ends the connection: the client closed it, or sent
	// what cannot be read.
	readFailed struct{ err error }
	// writeFailed ends the connection: an answer could not be written.
	writeFailed struct{ err error }
)

func (c *conn) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.onStarted(ctx)
	case *received:
		c.onReceived(ctx, m)
	case *readFailed:
		c.onReadFailed(ctx, m.err)
	case *writeFailed:
		c.close(ctx, logrus.DebugLevel, "answer not written: "+m.err.Error())
	case *actor.Stopping:
		c.shutdown()
	case *actor.Restarting:
		c.shutdown()
	case *actor.Stopped:
	case actor.AutoReceiveMessage, actor.SystemMessage:
	default:
		c.logger.WithField("type", fmt.Sprintf("%T", m)).Warn("unhandled message")
	}
}

func (c *conn) onStarted(ctx actor.Context) {
	c.self = ctx.Self()
	c.l.goroutines.Add(2)
	go c.read(ctx.ActorSystem().Root, c.done)
	go c.write(ctx.ActorSystem().Root, c.done)
	c.logger.Debug("kafka connection opened")
}

// shutdown closes the socket, which ends the reader and the writer.
func (c *conn) shutdown() {
	if c.stopped {
		return
	}
	c.stopped, c.closed = true, true
	for _, x := range c.pending {
		x.buffer.Release()
		x.frame.releaseFetched()
	}
	c.pending = nil
	close(c.done)
	_ = c.nc.Close()
}

// close ends the connection with a log line at level saying why.
func (c *conn) close(ctx actor.Context, level logrus.Level, why string) {
	if c.closed {
		return
	}
	c.closed = true
	c.logger.Log(level, "kafka connection closed: "+why)
	ctx.Stop(ctx.Self())
}

// onReadFailed ends the connection after what the reader could not read.
func (c *conn) onReadFailed(ctx actor.Context, err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.close(ctx, logrus.DebugLevel, "by the client")
	case errors.Is(err, wirekafka.ErrTLS):
		c.close(ctx, logrus.WarnLevel, "TLS handshake on the plain-text Kafka port; this listener speaks PLAINTEXT only")
	case errors.Is(err, wirekafka.ErrNegativeSize), errors.Is(err, wirekafka.ErrFrameTooLarge),
		errors.Is(err, wirekafka.ErrUnknownAPI), errors.Is(err, wirekafka.ErrMalformed):
		c.close(ctx, logrus.WarnLevel, err.Error())
	default:
		c.close(ctx, logrus.DebugLevel, err.Error())
	}
}

// onReceived takes a request: it gets its place among the answers, then
// its API's handler, or is refused.
func (c *conn) onReceived(ctx actor.Context, m *received) {
	if c.closed {
		m.buffer.Release()
		return
	}
	x := &exchange{req: m.req, bytes: m.bytes, buffer: m.buffer}
	c.pending = append(c.pending, x)
	a, known := apiByKey[x.req.Key]
	switch {
	case x.req.Key == kmsg.ApiVersions.Int16() && (x.req.Version > a.max || x.req.Body == nil):
		c.reply(x, unsupportedAPIVersions())
	case !known:
		c.close(ctx, logrus.WarnLevel, fmt.Sprintf("API %s (key %d) is not supported", kmsg.NameForKey(x.req.Key), x.req.Key))
	case x.req.Body == nil:
		c.close(ctx, logrus.WarnLevel, fmt.Sprintf("%s version %d is newer than this node knows", kmsg.NameForKey(x.req.Key), x.req.Version))
	case x.req.Version < a.min || x.req.Version > a.max:
		if a.refuse == nil {
			c.close(ctx, logrus.WarnLevel, fmt.Sprintf("%s version %d is not supported (versions %d to %d are)", kmsg.NameForKey(x.req.Key), x.req.Version, a.min, a.max))
			return
		}
		c.reply(x, a.refuse(x.req.Body, codeUnsupportedVersion))
	default:
		a.handle(c, ctx, x)
	}
}

// reply answers x with resp, whose version must be the request's.
func (c *conn) reply(x *exchange, resp kmsg.Response) {
	if c.closed || x.answered {
		return
	}
	c.replyFrame(x, answerFrame{pieces: [][]byte{wirekafka.AppendResponse(nil, x.req.CorrelationID, resp)}})
}

// replyFrame answers x with frame. Its fetch frames are handed back once
// it is written, or at once when it is not to be.
func (c *conn) replyFrame(x *exchange, frame answerFrame) {
	if c.closed || x.answered {
		frame.releaseFetched()
		return
	}
	x.frame = frame
	c.answered(x)
}

// noReply ends x without an answer: it takes no place among the answers.
func (c *conn) noReply(x *exchange) {
	if c.closed || x.answered {
		return
	}
	x.frame = answerFrame{}
	c.answered(x)
}

// answered gives back what x held of the budget and of its buffer, and
// hands the writer the answers now complete at the front, in order.
func (c *conn) answered(x *exchange) {
	x.answered = true
	c.release(x.bytes)
	x.bytes = 0
	x.buffer.Release()
	x.buffer = nil
	for len(c.pending) > 0 && c.pending[0].answered {
		head := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		if head.frame.pieces == nil {
			c.tokens <- struct{}{}
			continue
		}
		c.out <- head.frame
	}
}

// release gives back n bytes a request held.
func (c *conn) release(n int64) {
	if n > 0 {
		c.held.Add(-n)
		c.l.budget.release(n)
	}
}

// ask sends msg to pid and calls then, on the actor's goroutine, with the
// answer or the error: actor.ErrTimeout after timeout, actor.ErrDeadLetter
// when pid is not there. then is not called once the connection closed,
// and an answer holding fetch frames then hands them back.
func (c *conn) ask(ctx actor.Context, pid *actor.PID, msg any, timeout time.Duration, then func(res any, err error)) {
	f := ctx.RequestFuture(pid, msg, timeout)
	ctx.ReenterAfter(f, func(res any, err error) {
		if !c.closed {
			then(res, err)
			return
		}
		switch ff := res.(type) {
		case *remote.FetchFrame:
			ff.Release()
		case *remote.FetchesFrame:
			ff.Release()
		}
	})
}

// partitionPID is the actor of a partition on this node.
func (c *conn) partitionPID(ctx actor.Context, topic string, partition int32) *actor.PID {
	return actor.NewPID(ctx.ActorSystem().Address(), actors.PartitionActorName(topic, partition))
}

// pooledRequestBytes is the size from which a request frame is read into
// a buffer of the transport's pool rather than a new one: 4 KiB. A produce
// request's buffer goes back to the pool once its partitions have appended
// its records (see remote.HeldBuffer); any other's is left to the garbage
// collector.
const pooledRequestBytes = remote.InlineData

// read reads the connection's frames, each while a token and the budget
// allow, and hands each request to the actor, decoded. What cannot be read
// ends the connection. Once the actor has stopped it gives back to the
// budget what the requests read still held.
func (c *conn) read(root *actor.RootContext, done <-chan struct{}) {
	defer c.l.goroutines.Done()
	defer func() {
		<-done
		c.l.budget.release(c.held.Swap(0))
	}()
	defer func() {
		if r := recover(); r != nil {
			root.Send(c.self, &readFailed{err: fmt.Errorf("%w: reading panicked: %v", wirekafka.ErrMalformed, r)})
		}
	}()
	prefix := make([]byte, wirekafka.SizeBytes)
	for {
		select {
		case <-c.tokens:
		case <-done:
			return
		}
		if _, err := io.ReadFull(c.nc, prefix); err != nil {
			root.Send(c.self, &readFailed{err: err})
			return
		}
		size, err := wirekafka.FrameSize(prefix, c.l.cfg.MaxRequestBytes)
		if err != nil {
			root.Send(c.self, &readFailed{err: err})
			return
		}
		held, ok := c.l.budget.acquire(int64(size), done)
		if !ok {
			return
		}
		c.held.Add(held)
		var frame []byte
		var buffer *remote.HeldBuffer
		if size >= pooledRequestBytes {
			buffer = c.l.cfg.Transport.HoldBuffer(int(size))
			frame = buffer.Bytes()
		} else {
			frame = make([]byte, size)
		}
		if _, err := io.ReadFull(c.nc, frame); err != nil {
			root.Send(c.self, &readFailed{err: err})
			return
		}
		req, err := wirekafka.ParseRequest(frame)
		if err != nil {
			root.Send(c.self, &readFailed{err: err})
			return
		}
		if req.Key != kmsg.Produce.Int16() {
			// What other requests alias of their frame is not tracked:
			// the buffer is left to the garbage collector with them.
			buffer = nil
		}
		root.Send(c.self, &received{req: req, bytes: held, buffer: buffer})
	}
}

// write writes the answers the actor hands it: the pieces of every frame
// waiting, in one writev, then hands back the fetch frames they alias and
// gives back a token for each frame.
func (c *conn) write(root *actor.RootContext, done <-chan struct{}) {
	defer c.l.goroutines.Done()
	var pieces [][]byte
	var fetched []*remote.FetchFrame
	for {
		frames := 0
		select {
		case frame := <-c.out:
			pieces, fetched, frames = append(pieces, frame.pieces...), append(fetched, frame.fetched...), 1
		case <-done:
			return
		}
		for frames < cap(c.out) && len(c.out) > 0 {
			frame := <-c.out
			pieces, fetched = append(pieces, frame.pieces...), append(fetched, frame.fetched...)
			frames++
		}
		batch := net.Buffers(pieces)
		_, err := batch.WriteTo(c.nc)
		clear(pieces)
		pieces = pieces[:0]
		for i, ff := range fetched {
			ff.Release()
			fetched[i] = nil
		}
		fetched = fetched[:0]
		if err != nil {
			root.Send(c.self, &writeFailed{err: err})
			return
		}
		for range frames {
			c.tokens <- struct{}{}
		}
	}
}
