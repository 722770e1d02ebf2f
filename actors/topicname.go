package actors

import (
	"errors"
	"fmt"
	"strings"
)

// MaxTopicNameLength is the longest legal topic name, as in Kafka: a
// partition directory "<topic>-<partition>" must still fit a 255-byte file
// name.
const MaxTopicNameLength = 249

// ErrInvalidTopicName is wrapped by ValidateTopicName for a name Kafka would
// refuse.
var ErrInvalidTopicName = errors.New("actors: invalid topic name")

// ValidateTopicName checks name as Kafka's Topic.validate does: it must be
// non-empty, neither "." nor "..", at most MaxTopicNameLength characters, and
// made only of ASCII letters, digits, '.', '_' and '-'. The error wraps
// ErrInvalidTopicName and reads `actors: invalid topic name "x": reason`.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w %q: it is empty", ErrInvalidTopicName, name)
	case name == "." || name == "..":
		return fmt.Errorf("%w %q: it cannot be \".\" or \"..\"", ErrInvalidTopicName, name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("%w %q: it is %d characters long, the limit is %d",
			ErrInvalidTopicName, truncateName(name), len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicChar(name[i]) {
			return fmt.Errorf("%w %q: byte %d (%q) is not an ASCII letter, digit, '.', '_' or '-'",
				ErrInvalidTopicName, name, i, name[i])
		}
	}
	return nil
}

func legalTopicChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// truncateName shortens an over-long name for an error message.
func truncateName(name string) string {
	const keep = 40
	if len(name) <= keep {
		return name
	}
	return name[:keep] + "..."
}

// TopicNamesCollide reports whether a and b would be the same name once '.'
// and '_' are treated as equal, as Kafka's Topic.hasCollision does: metric
// names replace '.' with '_', so "a.b" and "a_b" cannot both exist. Equal
// names collide too.
func TopicNamesCollide(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	return strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// internalTopicPrefix marks the topics Depot keeps for itself, such as
// __consumer_offsets.
const internalTopicPrefix = "__"

// IsInternalTopic reports whether name is an internal topic (starts with "__").
func IsInternalTopic(name string) bool { return strings.HasPrefix(name, internalTopicPrefix) }
