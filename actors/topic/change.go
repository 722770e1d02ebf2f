package topic

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ErrInvalidChange is wrapped by ApplyChanges for a request that cannot be
// applied whatever the values: a key changed twice, or a SET without a
// value.
var ErrInvalidChange = errors.New("topic: invalid config change")

// Op is what a Change does to its key, as Kafka's IncrementalAlterConfigs
// names the operations.
type Op int

const (
	// OpSet sets the key to the value.
	OpSet Op = iota
	// OpDelete removes the key from the configs set: it takes its default.
	OpDelete
	// OpAppend adds the value's items to a list config, those it does not
	// hold yet, in order.
	OpAppend
	// OpSubtract removes the value's items from a list config.
	OpSubtract
)

// String is the operation's name as Kafka spells it.
func (o Op) String() string {
	switch o {
	case OpSet:
		return "SET"
	case OpDelete:
		return "DELETE"
	case OpAppend:
		return "APPEND"
	case OpSubtract:
		return "SUBTRACT"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Change is one change of a topic's configs. Value is nil where the
// request had none (Kafka's null).
type Change struct {
	Key   string
	Op    Op
	Value *string
}

// listKeys are the configs whose value is a comma-separated list, which
// APPEND and SUBTRACT work on.
var listKeys = map[string]bool{ConfigCleanupPolicy: true}

// IsListConfig reports whether key's value is a comma-separated list.
func IsListConfig(key string) bool { return listKeys[key] }

// ApplyChanges returns the configs set on a topic after changes: with
// replace, those the changes set and nothing else (Kafka's AlterConfigs,
// whose keys left out take their defaults again); without it, set with
// the changes applied in order (IncrementalAlterConfigs). set is not
// modified.
//
// A key named twice, or a SET or APPEND without a value, is an error
// wrapping ErrInvalidChange; an unknown key, APPEND or SUBTRACT of a key
// that is not a list, or an operation it does not know, one wrapping
// ErrInvalidConfig. APPEND to a key not set starts from its default.
// Values are checked by ParseConfig, not here.
func ApplyChanges(set map[string]string, replace bool, changes []Change) (map[string]string, error) {
	out := maps.Clone(set)
	if replace || out == nil {
		out = map[string]string{}
	}
	seen := make(map[string]bool, len(changes))
	defaults := DefaultConfig().Map()
	for _, c := range changes {
		if seen[c.Key] {
			return nil, fmt.Errorf("%w: %s is changed twice", ErrInvalidChange, c.Key)
		}
		seen[c.Key] = true
		if _, known := defaults[c.Key]; !known {
			return nil, fmt.Errorf("%w: unknown key %q", ErrInvalidConfig, c.Key)
		}
		if c.Value == nil && (c.Op == OpSet || c.Op == OpAppend) {
			return nil, fmt.Errorf("%w: %s %s has no value", ErrInvalidChange, c.Op, c.Key)
		}
		switch c.Op {
		case OpSet:
			out[c.Key] = *c.Value
		case OpDelete:
			delete(out, c.Key)
		case OpAppend, OpSubtract:
			if !listKeys[c.Key] {
				return nil, fmt.Errorf("%w: %s is not a list, so it takes no %s", ErrInvalidConfig, c.Key, c.Op)
			}
			current, ok := out[c.Key]
			if !ok {
				current = defaults[c.Key]
			}
			var value string
			if c.Value != nil {
				value = *c.Value
			}
			if c.Op == OpAppend {
				out[c.Key] = joinList(appendItems(splitList(current), splitList(value)))
			} else {
				out[c.Key] = joinList(subtractItems(splitList(current), splitList(value)))
			}
		default:
			return nil, fmt.Errorf("%w: %s: unknown operation %s", ErrInvalidConfig, c.Key, c.Op)
		}
	}
	return out, nil
}

// splitList is a list config's items, trimmed, empty ones left out.
func splitList(value string) []string {
	var out []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func joinList(items []string) string { return strings.Join(items, ",") }

// appendItems is list with the items of more it does not hold added, in
// order.
func appendItems(list, more []string) []string {
	for _, item := range more {
		if !slices.Contains(list, item) {
			list = append(list, item)
		}
	}
	return list
}

// subtractItems is list without the items of less.
func subtractItems(list, less []string) []string {
	return slices.DeleteFunc(list, func(item string) bool { return slices.Contains(less, item) })
}
