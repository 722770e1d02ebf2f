package remote

import (
	"fmt"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"
)

const (
	// MaxRemoteMessageBytes is the largest gRPC message a node or client
	// accepts from a peer. A message carries one envelope (see
	// RemoteWriterBatchSize), but a produce request may carry up to its
	// topic's max.message.bytes, and gRPC's default limit (4 MiB) would drop
	// the whole stream, and every message queued on it, for one larger
	// request.
	MaxRemoteMessageBytes = 256 << 20
	// RemoteWriterBatchSize is how many envelopes protoactor packs into one
	// gRPC message (its default is 1000): one. gRPC delivers a message only
	// once it has all of it, and the codec copies it into one buffer, so
	// envelopes packed together wait for the last of them: requests of
	// 1 MiB travelled ten at a time. Small messages lose nothing, since
	// gRPC's writer gathers their frames into one write anyway. Against 64,
	// in interleaved pairs: produce 862k-975k records/s of 1 KiB against
	// 685k-870k, acks=all 593k-696k against 394k-615k, eight partitions
	// with four producers 708k-734k against 637k-644k, 4 KiB batches of
	// 100 B records 443k-465k against 394k-420k; consume unchanged.
	RemoteWriterBatchSize = 1
	// RemoteWriterQueueSize is the first size of the queue of messages
	// waiting for a peer's endpoint writer, which doubles when full.
	// protoactor starts it at a million slots: 16 MiB per peer, every
	// pointer of which the garbage collector scans in every cycle.
	RemoteWriterQueueSize = 1024
	// RemoteStreamBufferBytes is the size of the buffer through which gRPC
	// writes each outbound connection (protoactor sends only on the
	// connections it dials) and reads each inbound one: 256 KiB, where
	// gRPC's 32 KiB made a node read and write its peers 16 KiB frame by
	// frame, six times the system calls. Against gRPC's sizes, on three
	// nodes of one machine, RF 3 acks=all, in interleaved pairs: 280k-314k
	// records/s of 1 KiB against 246k-266k, 5.0-5.6 µs of the nodes' CPU a
	// record against 6.0-6.4; RF 1 unchanged. Neither pins memory to an
	// idle connection: the write buffer goes back to a pool whenever the
	// writer has nothing more to send, and gRPC's reader takes its buffer
	// from a pool when the connection is readable and hands it back once
	// it has read all of it.
	RemoteStreamBufferBytes = 256 << 10
	// RemoteStreamWindowBytes is the HTTP/2 flow-control window of every
	// stream and connection, in both directions. A window that is set
	// stays as set: left to gRPC, each side estimates the bandwidth-delay
	// product with a ping on the first data of every round until its
	// estimate reaches 16 MiB, which with the small messages of moderate
	// load it never does, so a ping and its ack went with nearly every
	// exchange between two nodes. Three nodes of one machine, RF 3
	// acks=all, 30k records/s of 1 KiB: 0.37-0.39 writes and 0.45-0.47
	// reads of the nodes a record against 0.63-0.64 and 0.93-0.94, 5-10 %
	// fewer context switches; at saturation unchanged (300k and 300k
	// records/s against 300k and 287k, alternated).
	RemoteStreamWindowBytes = 8 << 20
)

// Config returns protoactor remote settings for host:port with the
// remedies for its known hazards: a peer that sends a message type this
// binary does not know makes the deserializer panic on the gRPC stream's
// goroutine, which would kill the process, so a stream interceptor recovers
// and drops that stream instead; and gRPC's message size limit is raised
// while the writer batch is lowered, so a burst of large messages is not
// silently dropped. Streams use remoteCodec and a buffer pool that does not
// clear, which take copies off the path of record bytes, and the streams
// to other nodes go through t's Faults; the server hands the connections
// that open as replica streams to t (see ReplicaStream); all are t's, so
// the config is for one actor system only.
func (t *Transport) Config(host string, port int, logger *logrus.Entry) *remote.Config {
	codec := remoteCodec{t: t}
	return remote.Configure(host, port,
		remote.WithEndpointWriterBatchSize(RemoteWriterBatchSize),
		remote.WithEndpointWriterQueueSize(RemoteWriterQueueSize),
		remote.WithServerOptions(
			grpc.MaxRecvMsgSize(MaxRemoteMessageBytes),
			grpc.Creds(newMuxCredentials(t)),
			grpc.ChainStreamInterceptor(t.recoverStream(logger)),
			grpc.ForceServerCodecV2(codec),
			experimental.BufferPool(t.buffers),
			grpc.ReadBufferSize(RemoteStreamBufferBytes),
			grpc.InitialWindowSize(RemoteStreamWindowBytes),
			grpc.InitialConnWindowSize(RemoteStreamWindowBytes),
		),
		remote.WithDialOptions(
			grpc.WithInsecure(), //nolint:staticcheck // protoactor's own default; peers are on a trusted network
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxRemoteMessageBytes), grpc.MaxCallRecvMsgSize(MaxRemoteMessageBytes), grpc.ForceCodecV2(codec)),
			experimental.WithBufferPool(t.buffers),
			grpc.WithChainStreamInterceptor(t.faults.streamInterceptor),
			grpc.WithWriteBufferSize(RemoteStreamBufferBytes),
			grpc.WithSharedWriteBuffer(true),
			grpc.WithInitialWindowSize(RemoteStreamWindowBytes),
			grpc.WithInitialConnWindowSize(RemoteStreamWindowBytes),
		),
	)
}

// recoverStream is the interceptor of t's server streams: it recovers a
// panic of the deserializer, and hands the handler a heldStream, which lets
// go of each decoded message's buffer on the next read.
func (t *Transport) recoverStream(logger *logrus.Entry) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if r := recover(); r != nil {
				logger.WithField("panic", fmt.Sprint(r)).Warn("dropped a remote stream carrying a message this node cannot decode")
				err = status.Errorf(codes.InvalidArgument, "depot: undecodable message: %v", r)
			}
		}()
		hs := &heldStream{ServerStream: ss, t: t}
		defer hs.end()
		return handler(srv, hs)
	}
}
