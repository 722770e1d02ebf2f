package kafka

// What the admin APIs share: configs as DescribeConfigs and CreateTopics
// (v5+) describe them, Depot's topic configs (actors/topic) under their
// Kafka names with Kafka's types, documentation and the broker configs
// whose values are their defaults, and the node's settings that Kafka
// names as broker configs; and the topics a request names, looked up in
// the connection's cache.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/depot-dev/depot/actors/topic"
	"github.com/depot-dev/depot/messages"
)

// Kafka's defaults for what a CreateTopics request leaves to the broker
// (-1): num.partitions, and default.replication.factor, Depot's default
// replication factor.
const (
	defaultNumPartitions     = 1
	defaultReplicationFactor = 1
)

// BrokerSettings are a node's settings that Kafka names as broker
// configs, which DescribeConfigs gives, read-only, for the node's broker
// resource. The zero value gives Depot's fixed defaults alone.
type BrokerSettings struct {
	// LogDirs are log.dirs, the node's log directories.
	LogDirs []string
	// Rack is broker.rack, "" for none.
	Rack string
	// Listener and Advertised are the Kafka addresses of listeners and
	// advertised.listeners (host:port), "" for none.
	Listener, Advertised string
	// Voters is controller.quorum.voters (id@host:port,...), "" for a
	// quorum of one.
	Voters string
	// ReplicaLagMax is replica.lag.time.max.ms.
	ReplicaLagMax time.Duration
	// RetentionCheckInterval is how often partitions apply retention,
	// log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// LeaderRebalanceInterval is leader.imbalance.check.interval.seconds;
	// negative, auto.leader.rebalance.enable is false. Zero leaves both
	// out.
	LeaderRebalanceInterval time.Duration
	// OffsetsTopicPartitions, OffsetsTopicSegmentBytes and
	// OffsetsTopicReplicationFactor are offsets.topic.num.partitions,
	// offsets.topic.segment.bytes and offsets.topic.replication.factor;
	// zero leaves each out.
	OffsetsTopicPartitions        int32
	OffsetsTopicSegmentBytes      int64
	OffsetsTopicReplicationFactor int32
}

// configKey is what DescribeConfigs says of a topic config beyond its
// value.
type configKey struct {
	typ kmsg.ConfigType
	// broker is the broker config whose value is the topic's default.
	broker string
	doc    string
}

// topicConfigKeys are Depot's topic configs (topic.DefaultConfig().Map()
// has the same keys) as Kafka describes them.
var topicConfigKeys = map[string]configKey{
	topic.ConfigSegmentBytes: {kmsg.ConfigTypeInt, "log.segment.bytes",
		"The largest size of a segment file of the log: a segment is rolled before an append would pass it."},
	topic.ConfigSegmentMs: {kmsg.ConfigTypeLong, "log.roll.ms",
		"How long after its first record a segment is rolled, even if it is not full, so that retention can delete it."},
	topic.ConfigRetentionMs: {kmsg.ConfigTypeLong, "log.retention.ms",
		"How long a segment is kept after its last record before it is deleted; -1 keeps every segment."},
	topic.ConfigRetentionBytes: {kmsg.ConfigTypeLong, "log.retention.bytes",
		"The size a partition's log is cut to by deleting its oldest segments; -1 for no limit."},
	topic.ConfigIndexIntervalBytes: {kmsg.ConfigTypeInt, "log.index.interval.bytes",
		"How many bytes of records are appended between two entries of the offset index."},
	topic.ConfigFlushMessages: {kmsg.ConfigTypeLong, "log.flush.interval.messages",
		"How many records are appended before the log is synced to disk; acks=all produces are synced in any case."},
	topic.ConfigFlushMs: {kmsg.ConfigTypeLong, "log.flush.interval.ms",
		"How long records appended may wait before the log is synced to disk; acks=all produces are synced in any case."},
	topic.ConfigMaxMessageBytes: {kmsg.ConfigTypeInt, "message.max.bytes",
		"The largest record batch a produce may append."},
	topic.ConfigCleanupPolicy: {kmsg.ConfigTypeList, "log.cleanup.policy",
		"What becomes of old segments: \"delete\", by retention; compaction is not supported."},
	topic.ConfigMinInsyncReplicas: {kmsg.ConfigTypeInt, "min.insync.replicas",
		"The fewest in-sync replicas with which an acks=all produce is taken; with fewer it is refused NOT_ENOUGH_REPLICAS."},
	topic.ConfigUncleanLeaderElection: {kmsg.ConfigTypeBoolean, "unclean.leader.election.enable",
		"Whether a replica outside the ISR may lead when no member of it is left, losing what only the ISR had."},
}

// describedConfig is one config as DescribeConfigs answers it.
type describedConfig struct {
	name     string
	value    *string
	source   kmsg.ConfigSource
	readOnly bool
	typ      kmsg.ConfigType
	doc      string
	synonyms []configSynonym
}

// configSynonym is a config whose value a described config takes, or
// would take: the topic's own, then the broker's default.
type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// describeTopicConfigs are a topic's configs, by name: each of effective
// (every key, its value in effect), from set when it is set on the topic
// (DYNAMIC_TOPIC_CONFIG) and otherwise its default (DEFAULT_CONFIG), with
// the synonyms Kafka gives: the topic's own setting, then the broker
// config of its default.
func describeTopicConfigs(effective, set map[string]string) []describedConfig {
	defaults := topic.DefaultConfig().Map()
	out := make([]describedConfig, 0, len(effective))
	for _, name := range sortedKeys(effective) {
		value := effective[name]
		key := topicConfigKeys[name]
		d := describedConfig{name: name, value: &value, source: kmsg.ConfigSourceDefaultConfig, typ: key.typ, doc: key.doc}
		if _, ok := set[name]; ok {
			d.source = kmsg.ConfigSourceDynamicTopicConfig
			d.synonyms = append(d.synonyms, configSynonym{name, value, kmsg.ConfigSourceDynamicTopicConfig})
		}
		if key.broker != "" {
			d.synonyms = append(d.synonyms, configSynonym{key.broker, defaults[name], kmsg.ConfigSourceDefaultConfig})
		}
		if d.typ == kmsg.ConfigTypeUnknown {
			d.typ = kmsg.ConfigTypeString
		}
		out = append(out, d)
	}
	return out
}

// describeBrokerConfigs are node nodeID's broker configs, by name, every
// one read-only: those its settings give (STATIC_BROKER_CONFIG), and
// Depot's fixed ones and the defaults of topic configs (DEFAULT_CONFIG).
// maxRequestBytes and queuedMaxRequestBytes are the listener's bounds.
func describeBrokerConfigs(nodeID int32, s BrokerSettings, maxRequestBytes int32, queuedMaxRequestBytes int64) []describedConfig {
	var out []describedConfig
	add := func(name, value string, source kmsg.ConfigSource, typ kmsg.ConfigType, doc string) {
		v := value
		out = append(out, describedConfig{name: name, value: &v, source: source, readOnly: true, typ: typ, doc: doc})
	}
	static, fixed := kmsg.ConfigSourceStaticBrokerConfig, kmsg.ConfigSourceDefaultConfig
	id := strconv.FormatInt(int64(nodeID), 10)
	add("node.id", id, static, kmsg.ConfigTypeInt, "The node's id.")
	add("broker.id", id, static, kmsg.ConfigTypeInt, "The node's id.")
	if s.Rack != "" {
		add("broker.rack", s.Rack, static, kmsg.ConfigTypeString, "The node's rack, which replica placement spreads partitions over.")
	}
	if len(s.LogDirs) > 0 {
		add("log.dirs", strings.Join(s.LogDirs, ","), static, kmsg.ConfigTypeString, "The node's log directories, which hold its partitions.")
	}
	if s.Listener != "" {
		add("listeners", "PLAINTEXT://"+s.Listener, static, kmsg.ConfigTypeString, "Where the node takes Kafka clients.")
	}
	if s.Advertised != "" {
		add("advertised.listeners", "PLAINTEXT://"+s.Advertised, static, kmsg.ConfigTypeString, "The node's Kafka address as metadata gives it out.")
	}
	if s.Voters != "" {
		add("controller.quorum.voters", s.Voters, static, kmsg.ConfigTypeList, "The voters of the controller quorum, id@host:port.")
	}
	if s.ReplicaLagMax > 0 {
		add("replica.lag.time.max.ms", strconv.FormatInt(s.ReplicaLagMax.Milliseconds(), 10), static, kmsg.ConfigTypeLong,
			"How long a follower may be behind its leader before it leaves the ISR.")
	}
	if s.RetentionCheckInterval > 0 {
		add("log.retention.check.interval.ms", strconv.FormatInt(s.RetentionCheckInterval.Milliseconds(), 10), static, kmsg.ConfigTypeLong,
			"How often partitions apply retention and roll by age.")
	}
	if s.LeaderRebalanceInterval != 0 {
		add("auto.leader.rebalance.enable", strconv.FormatBool(s.LeaderRebalanceInterval > 0), static, kmsg.ConfigTypeBoolean,
			"Whether the active controller makes each partition's preferred replica its leader again where it can.")
		if s.LeaderRebalanceInterval > 0 {
			add("leader.imbalance.check.interval.seconds", strconv.FormatInt(int64(s.LeaderRebalanceInterval/time.Second), 10), static, kmsg.ConfigTypeLong,
				"How often preferred leaders are elected again.")
		}
	}
	if s.OffsetsTopicPartitions > 0 {
		add("offsets.topic.num.partitions", strconv.FormatInt(int64(s.OffsetsTopicPartitions), 10), static, kmsg.ConfigTypeInt,
			"The partitions of __consumer_offsets, which holds the groups' committed offsets.")
	}
	if s.OffsetsTopicSegmentBytes > 0 {
		add("offsets.topic.segment.bytes", strconv.FormatInt(s.OffsetsTopicSegmentBytes, 10), static, kmsg.ConfigTypeInt,
			"The segment.bytes of __consumer_offsets.")
	}
	if s.OffsetsTopicReplicationFactor > 0 {
		add("offsets.topic.replication.factor", strconv.FormatInt(int64(s.OffsetsTopicReplicationFactor), 10), fixed, kmsg.ConfigTypeShort,
			"The replicas of __consumer_offsets's partitions once as many nodes are live.")
	}
	add("socket.request.max.bytes", strconv.FormatInt(int64(maxRequestBytes), 10), static, kmsg.ConfigTypeInt,
		"The largest request the node reads; a larger one closes its connection.")
	add("queued.max.request.bytes", strconv.FormatInt(queuedMaxRequestBytes, 10), static, kmsg.ConfigTypeLong,
		"The bytes of requests read and not yet answered on all connections together.")
	add("num.partitions", strconv.Itoa(defaultNumPartitions), fixed, kmsg.ConfigTypeInt,
		"The partitions of a topic created without a count.")
	add("default.replication.factor", strconv.Itoa(defaultReplicationFactor), fixed, kmsg.ConfigTypeInt,
		"The replicas of each partition of a topic created without a replication factor.")
	add("auto.create.topics.enable", "false", fixed, kmsg.ConfigTypeBoolean,
		"Whether a topic is created when a client first names it: never, Depot creates topics only when told to.")
	add("delete.topic.enable", "true", fixed, kmsg.ConfigTypeBoolean, "Whether topics can be deleted.")
	defaults := topic.DefaultConfig().Map()
	for name, key := range topicConfigKeys {
		add(key.broker, defaults[name], fixed, key.typ, "The default of topic config "+name+": "+key.doc)
	}
	slices.SortFunc(out, func(a, b describedConfig) int { return strings.Compare(a.name, b.name) })
	return out
}

// describedFor are configs as a DescribeConfigs resource answers them:
// those named, or every one when names is nil; synonyms and documentation
// when asked.
func describedFor(configs []describedConfig, names []string, synonyms, documentation bool) []kmsg.DescribeConfigsResponseResourceConfig {
	out := []kmsg.DescribeConfigsResponseResourceConfig{}
	for _, d := range configs {
		if names != nil && !slices.Contains(names, d.name) {
			continue
		}
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.ReadOnly, rc.Source, rc.ConfigType = d.name, d.value, d.readOnly, d.source, d.typ
		rc.IsDefault = d.source == kmsg.ConfigSourceDefaultConfig
		if synonyms {
			for _, s := range d.synonyms {
				rs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				rs.Name, rs.Value, rs.Source = s.name, kmsg.StringPtr(s.value), s.source
				rc.ConfigSynonyms = append(rc.ConfigSynonyms, rs)
			}
		}
		if documentation && d.doc != "" {
			rc.Documentation = kmsg.StringPtr(d.doc)
		}
		out = append(out, rc)
	}
	return out
}

// createdConfigs are a created topic's configs as CreateTopics (v5+)
// answers them.
func createdConfigs(md *messages.TopicMetadata) []kmsg.CreateTopicsResponseTopicConfig {
	var out []kmsg.CreateTopicsResponseTopicConfig
	for _, d := range describeTopicConfigs(md.GetConfigs(), md.GetConfigsSet()) {
		rc := kmsg.NewCreateTopicsResponseTopicConfig()
		rc.Name, rc.Value, rc.Source = d.name, d.value, int8(d.source)
		out = append(out, rc)
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// resourceKey names a config resource, to find one named twice.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// namedTwice are the keys that stand more than once in keys: a topic or
// config resource a request names twice, which Kafka refuses.
func namedTwice[K comparable](keys []K) map[K]bool {
	seen := make(map[K]int, len(keys))
	for _, k := range keys {
		seen[k]++
	}
	out := map[K]bool{}
	for k, n := range seen {
		if n > 1 {
			out[k] = true
		}
	}
	return out
}

// alterResources has each config resource of an AlterConfigs or
// IncrementalAlterConfigs request changed, and calls answer(i, code,
// message) for each, once the last is answered, then done. A topic's
// change is changes(i) as an AlterTopicConfigsRequest to the metadata
// actor, or a refusal (code and message) it gives itself; a broker's is
// refused, as its configs are the node's settings; a resource named twice,
// and any other type, is refused INVALID_REQUEST.
func (c *conn) alterResources(ctx actor.Context, keys []resourceKey, changes func(i int) (*messages.AlterTopicConfigsRequest, int16, string),
	answer func(i int, code int16, message *string), done func()) {
	twice := namedTwice(keys)
	waiting := 0
	for i, k := range keys {
		switch {
		case twice[k]:
			answer(i, codeInvalidRequest, kmsg.StringPtr(fmt.Sprintf("%s %q is named more than once in the request", k.typ, k.name)))
		case k.typ == kmsg.ConfigResourceTypeBroker || k.typ == kmsg.ConfigResourceTypeBrokerLogger:
			answer(i, codeInvalidRequest, kmsg.StringPtr("broker configs cannot be changed while the node runs: "+
				"they are its settings (flags, config file, DEPOT_* variables), changed by restarting it with others"))
		case k.typ != kmsg.ConfigResourceTypeTopic:
			answer(i, codeInvalidRequest, kmsg.StringPtr(fmt.Sprintf("resource type %s has no configs here: topics do", k.typ)))
		default:
			m, code, msg := changes(i)
			if code != codeNone {
				answer(i, code, kmsg.StringPtr(msg))
				continue
			}
			waiting++
			c.ask(ctx, c.l.cfg.Metadata, m, c.l.cfg.RequestTimeout, func(res any, err error) {
				waiting--
				r, ok := res.(*messages.AlterTopicConfigsResponse)
				switch {
				case err != nil || !ok:
					answer(i, askErrorCode(err), nil)
				default:
					answer(i, kafkaCode(r.GetError()), errorText(r.GetErrorMessage()))
				}
				if waiting == 0 {
					done()
				}
			})
		}
	}
	if waiting == 0 {
		done()
	}
}
