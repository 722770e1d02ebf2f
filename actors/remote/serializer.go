package remote

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/depot-dev/depot/messages"
)

// aliasSerializer is a protoactor remote serializer that reads the
// messages carrying record bytes, ProduceRequest (alone or several in a
// ProduceRequests), ReplicaFetchResponse and FetchResponse, with their
// records fields aliasing
// the envelope's data instead of copying it
// (protobuf-go copies every bytes field it decodes). Any other type, and
// every Serialize and GetTypeName, is exactly protoactor's proto
// serializer (id 0).
//
// No sender ever names it: a sender writes serializer id 0 on the wire, and
// only remoteCodec, receiving a batch into a buffer nobody reuses, rewrites
// the id of a large envelope of an aliased type (see aliasedType) to
// aliasSerializerID in the decoded struct it hands protoactor (see
// remoteCodec.Unmarshal). So the wire format is proto's and stock
// protoactor peers interoperate.
//
// A message decoded by it owns the bytes its Records alias only as far as
// the caller's input is never reused: remoteCodec, which knows the
// transport the input's buffer belongs to, notes each Records it is going
// to give before protoactor calls Deserialize (see receivedHolds), since
// protoactor keeps its serializers for the whole process and gives them
// no actor system. Deserialize never modifies its input. It holds no
// state and is safe for concurrent use.
type aliasSerializer struct{}

// aliasProbe is what aliasSerializer returns for aliasProbeTypeName, so that
// init can find the id protoactor gave it.
type aliasProbe struct{}

const (
	// aliasProbeTypeName is a type name no protobuf message has (it is not
	// a valid full name), recognised only by aliasSerializer.
	aliasProbeTypeName = "depot alias serializer probe"
	// maxSerializerProbe bounds the ids probed for aliasSerializer.
	maxSerializerProbe = 64
)

var (
	// produceRequestName, produceRequestsName and fetchResponseName are
	// the type names protoactor sends for the messages that carry
	// records: "depot.ProduceRequest", "depot.ProduceRequests" (several
	// ProduceRequests in one) and "depot.FetchResponse".
	produceRequestName  = string(proto.MessageName(&messages.ProduceRequest{}))
	produceRequestsName = string(proto.MessageName(&messages.ProduceRequests{}))
	fetchResponseName   = string(proto.MessageName(&messages.FetchResponse{}))
	// produceRecordsField and fetchRecordsField are the numbers of their
	// records fields (5 and 7).
	produceRecordsField = recordsField(&messages.ProduceRequest{})
	fetchRecordsField   = recordsField(&messages.FetchResponse{})

	// aliasSerializerID is aliasSerializer's index among protoactor's
	// serializers, or -1 if it was not found, which turns aliasing off:
	// every envelope is then read by proto as before. Set once by init.
	aliasSerializerID int32 = -1
)

// aliasedType reports whether remoteCodec hands large envelopes of the
// named type to aliasSerializer: ProduceRequest, ProduceRequests and
// ReplicaFetchResponse. A partition appends their records and drops them
// at once. A
// FetchResponse's records end in the hands of a consumer's user, who may
// keep one record for long: aliased, it would keep the received buffer,
// taken from the pool and sized for the whole message, out of the pool as
// long, where a copy keeps only its own chunk.
func aliasedType(name string) bool {
	return name == produceRequestName || name == produceRequestsName || name == replicaFetchResponseName
}

func recordsField(m proto.Message) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName("records").Number()
}

func init() {
	remote.RegisterSerializer(aliasSerializer{})
	aliasSerializerID = findAliasSerializer()
}

// findAliasSerializer is the id under which remote.Deserialize reaches
// aliasSerializer, or -1. protoactor keeps its serializers in an
// unexported slice (proto at 0, JSON at 1, then each RegisterSerializer),
// so ids are probed in turn; an id past the end panics, and so does
// proto's for an unknown type name, both recovered.
func findAliasSerializer() int32 {
	for id := int32(0); id < maxSerializerProbe; id++ {
		v, inRange := probeSerializer(id)
		if !inRange {
			break
		}
		if _, ok := v.(aliasProbe); ok {
			return id
		}
	}
	return -1
}

// probeSerializer asks serializer id for aliasProbeTypeName. inRange is
// false once id is past the last serializer.
func probeSerializer(id int32) (v any, inRange bool) {
	defer func() {
		if r := recover(); r != nil {
			v = nil
			re, ok := r.(runtime.Error)
			inRange = !ok || !strings.Contains(re.Error(), "index out of range")
		}
	}()
	v, _ = remote.Deserialize(nil, aliasProbeTypeName, id)
	return v, true
}

var (
	// errUnknownType is returned for a type name this binary does not
	// know, where protoactor's proto serializer dereferences nil.
	errUnknownType = errors.New("depot: remote serializer: unknown message type")
	// errNotProto is returned by Serialize and GetTypeName for a value that
	// is not a protobuf message.
	errNotProto = errors.New("depot: remote serializer: not a protobuf message")
)

// Serialize is proto.Marshal, as protoactor's proto serializer does it.
func (aliasSerializer) Serialize(msg any) ([]byte, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%w: %T", errNotProto, msg)
	}
	return proto.Marshal(m)
}

// GetTypeName is the message's full protobuf name, as protoactor's proto
// serializer gives it.
func (aliasSerializer) GetTypeName(msg any) (string, error) {
	m, ok := msg.(proto.Message)
	if !ok {
		return "", fmt.Errorf("%w: %T", errNotProto, msg)
	}
	return string(proto.MessageName(m)), nil
}

// Deserialize decodes b as the message named typeName. The Records of a
// ProduceRequest, a FetchResponse or a ReplicaFetchResponse's partitions
// alias b (its capacity ends where it does,
// so an append cannot spill over what follows it in b); everything else is
// decoded by proto, which copies.
func (aliasSerializer) Deserialize(typeName string, b []byte) (any, error) {
	switch typeName {
	case produceRequestName:
		m := &messages.ProduceRequest{}
		records, err := unmarshalAliasing(b, produceRecordsField, m)
		if err != nil {
			return nil, err
		}
		m.Records = records
		return m, nil
	case produceRequestsName:
		m, err := unmarshalProduceRequests(b)
		if err != nil {
			return nil, err
		}
		return m, nil
	case replicaFetchResponseName:
		m, err := unmarshalReplicaFetchResponse(b)
		if err != nil {
			return nil, err
		}
		return m, nil
	case fetchResponseName:
		m := &messages.FetchResponse{}
		records, err := unmarshalAliasing(b, fetchRecordsField, m)
		if err != nil {
			return nil, err
		}
		m.Records = records
		return m, nil
	case aliasProbeTypeName:
		return aliasProbe{}, nil
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(typeName))
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", errUnknownType, typeName, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, err
	}
	return m, nil
}

// unmarshalProduceRequests decodes b as a ProduceRequests whose requests'
// Records alias b, as a ProduceRequest's do. Fields other than the
// requests, and requests of another wire type, are left to proto, as
// unmarshalAliasing leaves them.
func unmarshalProduceRequests(b []byte) (*messages.ProduceRequests, error) {
	m := &messages.ProduceRequests{}
	reqs, err := unmarshalAliasingParts(b, m, 1, produceRecordsField,
		func() *messages.ProduceRequest { return &messages.ProduceRequest{} },
		func(r *messages.ProduceRequest, records []byte) { r.Records = records })
	if err != nil {
		return nil, err
	}
	m.Requests = reqs
	return m, nil
}

// unmarshalReplicaFetchResponse decodes b as a ReplicaFetchResponse whose
// partitions' Records alias b, as unmarshalProduceRequests does for its
// requests.
func unmarshalReplicaFetchResponse(b []byte) (*messages.ReplicaFetchResponse, error) {
	m := &messages.ReplicaFetchResponse{}
	parts, err := unmarshalAliasingParts(b, m, replicaPartitionsField, replicaRecordsField,
		func() *messages.ReplicaFetchedPartition { return &messages.ReplicaFetchedPartition{} },
		func(p *messages.ReplicaFetchedPartition, records []byte) { p.Records = records })
	if err != nil {
		return nil, err
	}
	m.Partitions = parts
	return m, nil
}

// unmarshalAliasingParts decodes b into m but for the repeated message
// field parts, whose elements it returns, in order: each is a newPart
// decoded by unmarshalAliasing, whose records setRecords sets, aliasing b.
// An element of another wire type is left to proto.
func unmarshalAliasingParts[P proto.Message](b []byte, m proto.Message, parts, records protowire.Number, newPart func() P, setRecords func(P, []byte)) ([]P, error) {
	var ps []P
	err := unmarshalTaking(b, m, func(num protowire.Number, v []byte) error {
		if num != parts {
			return errNotTaken
		}
		p := newPart()
		r, err := unmarshalAliasing(v, records, p)
		if err != nil {
			return err
		}
		setRecords(p, r)
		ps = append(ps, p)
		return nil
	})
	return ps, err
}

// unmarshalAliasing decodes b into m but for the bytes field records, whose
// value is returned as a sub-slice of b (nil if absent). As in proto, the
// last occurrence of the field wins; an occurrence with another wire type
// is an unknown field, kept in m's unknown fields like any other.
// Malformed bytes are an error, as they are to proto.
func unmarshalAliasing(b []byte, records protowire.Number, m proto.Message) ([]byte, error) {
	var alias []byte
	err := unmarshalTaking(b, m, func(num protowire.Number, v []byte) error {
		if num != records {
			return errNotTaken
		}
		alias = v[:len(v):len(v)]
		return nil
	})
	if err != nil {
		return nil, err
	}
	return alias, nil
}

// errNotTaken is what a take func of unmarshalTaking returns for a field
// it leaves to proto.
var errNotTaken = errors.New("field not taken")

// unmarshalTaking decodes b into m, handing each field of wire type bytes
// to take with its value (a sub-slice of b) first: the fields take leaves
// (returning errNotTaken) are gathered, in their order, into a small buffer
// that proto decodes into m. Another error of take is returned as it is.
func unmarshalTaking(b []byte, m proto.Message, take func(num protowire.Number, v []byte) error) error {
	var rest []byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		size := protowire.ConsumeFieldValue(num, typ, b[n:])
		if size < 0 {
			return protowire.ParseError(size)
		}
		err := errNotTaken
		if typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n : n+size])
			err = take(num, v)
		}
		switch {
		case errors.Is(err, errNotTaken):
			rest = append(rest, b[:n+size]...)
		case err != nil:
			return err
		}
		b = b[n+size:]
	}
	return proto.Unmarshal(rest, m)
}
