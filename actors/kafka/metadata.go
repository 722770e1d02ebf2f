package kafka

// Metadata, versions 0 to 13.
//
// Answered from the metadata actor's MetadataRequest, as the actor client
// asks it: the nodes with a Kafka listener that are not fenced, each at
// its advertised Kafka address; the topics asked for (all of them for a
// null list, or an empty one in v0; none for an empty list from v1), each
// with its id (v10+), and its partitions with their leader, leader epoch
// (v7+), replicas, in-sync replicas and the replicas on fenced nodes
// (offline, v5+). Topics are not created on demand, whatever
// AllowAutoTopicCreation (v4+) asks: Depot creates topics only when told
// to. Topics may be named by id from v12. The controller id is this node:
// any node takes the changes an admin client sends and forwards them to
// the active controller. Authorized operations (v8+) are not computed, as
// Kafka without an authorizer. v13 adds a top-level error code, never set.

import (
	"net"
	"slices"
	"strconv"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/messages"
)

func handleMetadata(c *conn, ctx actor.Context, x *exchange) {
	req := x.req.Body.(*kmsg.MetadataRequest)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	ask := &messages.MetadataRequest{}
	byID := false
	for _, t := range req.Topics {
		if t.Topic == nil {
			byID = true
			continue
		}
		ask.Topics = append(ask.Topics, *t.Topic)
	}
	if byID {
		ask.Topics = nil // every topic, to find those named by id
	}
	c.ask(ctx, c.l.cfg.Metadata, ask, c.l.cfg.RequestTimeout, func(res any, err error) {
		md, ok := res.(*messages.MetadataResponse)
		if err != nil || !ok {
			resp := metadataResponse(c.l.cfg.NodeID, req, &messages.MetadataResponse{})
			for _, t := range req.Topics {
				rt := kmsg.NewMetadataResponseTopic()
				rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, codeRequestTimedOut
				resp.Topics = append(resp.Topics, rt)
			}
			c.reply(x, resp)
			return
		}
		if ask.Topics == nil {
			c.topics.fill(md)
		}
		resp := metadataResponse(c.l.cfg.NodeID, req, md)
		switch {
		case all:
			for _, t := range md.GetTopics() {
				resp.Topics = append(resp.Topics, metadataTopic(md, t))
			}
		default:
			byName := make(map[string]*messages.TopicMetadata, len(md.GetTopics()))
			byTopicID := make(map[[16]byte]*messages.TopicMetadata, len(md.GetTopics()))
			for _, t := range md.GetTopics() {
				byName[t.GetName()] = t
				if id, err := parseTopicID(t.GetTopicId()); err == nil {
					byTopicID[id] = t
				}
			}
			for _, t := range req.Topics {
				var tm *messages.TopicMetadata
				if t.Topic != nil {
					tm = byName[*t.Topic]
				} else {
					tm = byTopicID[t.TopicID]
				}
				if tm == nil {
					rt := kmsg.NewMetadataResponseTopic()
					rt.Topic, rt.TopicID = t.Topic, t.TopicID
					rt.ErrorCode = codeUnknownTopicOrPartition
					if t.Topic == nil {
						rt.ErrorCode = codeUnknownTopicID
					}
					resp.Topics = append(resp.Topics, rt)
					continue
				}
				resp.Topics = append(resp.Topics, metadataTopic(md, tm))
			}
		}
		c.reply(x, resp)
	})
}

// metadataResponse is the answer to req without its topics: the brokers,
// the cluster id and the controller.
func metadataResponse(nodeID int32, req *kmsg.MetadataRequest, md *messages.MetadataResponse) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, b := range md.GetBrokers() {
		host, port, ok := kafkaHostPort(b)
		if !ok || b.GetFenced() {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port = b.GetNodeId(), host, port
		if b.GetRack() != "" {
			rb.Rack = &b.Rack
		}
		resp.Brokers = append(resp.Brokers, rb)
	}
	slices.SortFunc(resp.Brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID - b.NodeID) })
	if md.GetClusterId() != "" {
		resp.ClusterID = &md.ClusterId
	}
	resp.ControllerID = nodeID
	return resp
}

// kafkaHostPort is where b's Kafka listener is, when it has one.
func kafkaHostPort(b *messages.Broker) (string, int32, bool) {
	host, portText, err := net.SplitHostPort(b.GetKafkaAddress())
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return "", 0, false
	}
	return host, int32(port), true
}

// metadataTopic is t as Kafka's metadata gives a topic.
func metadataTopic(md *messages.MetadataResponse, t *messages.TopicMetadata) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(t.GetName())
	rt.ErrorCode = kafkaCode(t.GetError())
	rt.IsInternal = t.GetInternal()
	if id, err := parseTopicID(t.GetTopicId()); err == nil {
		rt.TopicID = id
	}
	fenced := map[int32]bool{}
	for _, b := range md.GetBrokers() {
		if b.GetFenced() {
			fenced[b.GetNodeId()] = true
		}
	}
	for _, p := range t.GetPartitions() {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = p.GetPartition()
		rp.ErrorCode = kafkaCode(p.GetError())
		rp.Leader = -1
		if p.GetError() == messages.ErrorCode_NONE {
			rp.Leader = p.GetLeader()
		}
		rp.LeaderEpoch = p.GetLeaderEpoch()
		rp.Replicas = slices.Clone(p.GetReplicas())
		rp.ISR = slices.Clone(p.GetIsr())
		for _, r := range p.GetReplicas() {
			if fenced[r] {
				rp.OfflineReplicas = append(rp.OfflineReplicas, r)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	slices.SortFunc(rt.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
	return rt
}
