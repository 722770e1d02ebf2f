package topic

import (
	"errors"
	"fmt"
	"strings"
)

// MaxNameLength is the longest legal topic name, as in Kafka: a
// partition directory "<topic>-<partition>" must still fit a 255-byte file
// name.
const MaxNameLength = 249

// ErrInvalidName is wrapped by ValidateName for a name Kafka would
// refuse.
var ErrInvalidName = errors.New("topic: invalid topic name")

// ValidateName checks name as Kafka's Topic.validate does: it must be
// non-empty, neither "." nor "..", at most MaxNameLength characters, and
// made only of ASCII letters, digits, '.', '_' and '-'. The error wraps
// ErrInvalidName and reads `topic: invalid topic name "x": reason`.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w %q: it is empty", ErrInvalidName, name)
	case name == "." || name == "..":
		return fmt.Errorf("%w %q: it cannot be \".\" or \"..\"", ErrInvalidName, name)
	case len(name) > MaxNameLength:
		return fmt.Errorf("%w %q: it is %d characters long, the limit is %d",
			ErrInvalidName, truncateName(name), len(name), MaxNameLength)
	}
	for i := 0; i < len(name); i++ {
		if !legalTopicChar(name[i]) {
			return fmt.Errorf("%w %q: byte %d (%q) is not an ASCII letter, digit, '.', '_' or '-'",
				ErrInvalidName, name, i, name[i])
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

// NamesCollide reports whether a and b would be the same name once '.'
// and '_' are treated as equal, as Kafka's Topic.hasCollision does: metric
// names replace '.' with '_', so "a.b" and "a_b" cannot both exist. Equal
// names collide too.
func NamesCollide(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	return strings.ReplaceAll(a, ".", "_") == strings.ReplaceAll(b, ".", "_")
}

// internalTopicPrefix marks the topics Depot keeps for itself, such as
// __consumer_offsets.
const internalTopicPrefix = "__"

// IsInternal reports whether name is an internal topic (starts with "__").
func IsInternal(name string) bool { return strings.HasPrefix(name, internalTopicPrefix) }
