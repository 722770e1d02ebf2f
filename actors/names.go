package actors

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Names of a node's well-known actors: any process reaches one as
// actor.NewPID(nodeAddress, name). Each is defined here and nowhere else.
const (
	// MetadataActorName is the node's metadata (controller) actor.
	MetadataActorName = "metadata"
	// PlacementActorName is the node's placement actor, which chooses log
	// directories and runs the balancer.
	PlacementActorName = "placement"
	// PartitionManagerName is the partition manager; partition actors are
	// its children, so their names start with it.
	PartitionManagerName = "partitions"
	// GroupCoordinatorName is the group coordinator; each group's actor is
	// its child, GroupActorName(group).
	GroupCoordinatorName = "groups"
	// KafkaListenerName is the Kafka protocol listener's actor; each
	// client connection's actor is its child.
	KafkaListenerName = "kafka"
)

// AwaitRegistration asks a node's metadata actor to answer, with a
// *Registration, once the node is registered and unfenced, or its
// registration was refused.
type AwaitRegistration struct{}

// Registration answers AwaitRegistration: Err is why the cluster refused
// the node (another cluster's data dir, a node id in use), nil once the
// node is registered and unfenced, and its partition manager has been told
// (MetadataCaughtUp).
type Registration struct {
	Err error
}

// MetadataCaughtUp tells a node's partition manager that the node's
// metadata has caught up with the cluster's: the node is registered with
// the active controller and unfenced in this incarnation, and the changes
// to its partitions applied before that were handed to the manager first.
// Sent by the node's metadata actor, once.
type MetadataCaughtUp struct{}

// PartitionActorName is the stable name of a partition's actor on its node:
// "partitions/<topic>-<partition>", the partition manager
// (PartitionManagerName) spawning each partition as its child
// "<topic>-<partition>". With the leader's address it makes the partition's
// PID: actor.NewPID(address, PartitionActorName(topic, partition)).
func PartitionActorName(topic string, partition int32) string {
	return PartitionManagerName + "/" + topic + "-" + strconv.FormatInt(int64(partition), 10)
}

// LogDirActorName is the stable name of the log-dir actor of the directory
// path on its node.
func LogDirActorName(path string) string { return "logdir:" + filepath.Clean(path) }

// maxGroupNameBytes bounds the part of a group actor's name that comes
// from the group id; longer ids are shortened and hashed.
const maxGroupNameBytes = 180

// GroupActorName is the name of group's actor under the coordinator
// (GroupCoordinatorName): "groups/<escaped id>". The escape keeps ASCII
// letters, digits, '.', '_' and '-' and writes every other byte of the id
// as %XX (upper-case hex), so '/' and '%' never appear unescaped and
// distinct ids give distinct names. An escaped id longer than 180 bytes is
// cut to its first 147 bytes followed by '~' and the first 16 bytes of the
// SHA-256 of the id in hex (180 bytes in all); '~' never appears otherwise.
func GroupActorName(group string) string {
	return GroupCoordinatorName + "/" + GroupChildName(group)
}

// GroupChildName is the last element of GroupActorName(group): the name
// the coordinator spawns the group's actor under.
func GroupChildName(group string) string {
	var b strings.Builder
	for i := 0; i < len(group); i++ {
		c := group[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	name := b.String()
	if len(name) <= maxGroupNameBytes {
		return name
	}
	sum := sha256.Sum256([]byte(group))
	return name[:maxGroupNameBytes-1-32] + "~" + hex.EncodeToString(sum[:16])
}
