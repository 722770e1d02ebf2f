package kafka

import "github.com/depot-dev/depot/messages"

// Kafka's error codes that Depot's actors have no ErrorCode for, or that
// a number of Depot's own took (see kafkaCode).
const (
	codeNone                     int16 = 0
	codeUnknownServerError       int16 = -1
	codeOffsetOutOfRange         int16 = 1
	codeCorruptMessage           int16 = 2
	codeUnknownTopicOrPartition  int16 = 3
	codeInvalidFetchSize         int16 = 4
	codeLeaderNotAvailable       int16 = 5
	codeNotLeaderOrFollower      int16 = 6
	codeRequestTimedOut          int16 = 7
	codeReplicaNotAvailable      int16 = 9
	codeOffsetMetadataTooLarge   int16 = 12
	codeCoordinatorNotAvailable  int16 = 15
	codeInvalidRequiredAcks      int16 = 21
	codeUnsupportedSASLMechanism int16 = 33
	codeIllegalSASLState         int16 = 34
	codeUnsupportedVersion       int16 = 35
	codeInvalidPartitions        int16 = 37
	codeInvalidReplicationFactor int16 = 38
	codeInvalidReplicaAssignment int16 = 39
	codeInvalidConfig            int16 = 40
	codeInvalidRequest           int16 = 42
	codeSecurityDisabled         int16 = 54
	codeGroupIDNotFound          int16 = 69
	codeFetchSessionIDNotFound   int16 = 70
	codeInvalidFetchSessionEpoch int16 = 71
	codeUnknownTopicID           int16 = 100
	codeFetchSessionTopicIDError int16 = 106
	codeUnsupportedEndpointType  int16 = 115
	codeRebootstrapRequired      int16 = 129
)

// kafkaCode is the Kafka error code of a Depot ErrorCode. The two agree in
// meaning; in number from 6 (NOT_LEADER_OR_FOLLOWER) up, but Depot's
// first five are Kafka's shifted by one, Kafka's UNKNOWN_SERVER_ERROR
// being -1, and LEADER_NOT_AVAILABLE is Depot's 1005.
func kafkaCode(c messages.ErrorCode) int16 {
	switch c {
	case messages.ErrorCode_NONE:
		return codeNone
	case messages.ErrorCode_UNKNOWN_SERVER_ERROR:
		return codeUnknownServerError
	case messages.ErrorCode_OFFSET_OUT_OF_RANGE:
		return codeOffsetOutOfRange
	case messages.ErrorCode_CORRUPT_MESSAGE:
		return codeCorruptMessage
	case messages.ErrorCode_UNKNOWN_TOPIC_OR_PARTITION:
		return codeUnknownTopicOrPartition
	case messages.ErrorCode_INVALID_FETCH_SIZE:
		return codeInvalidFetchSize
	case messages.ErrorCode_LEADER_NOT_AVAILABLE:
		return codeLeaderNotAvailable
	}
	if c < 0 || c > 1<<15-1 {
		return codeUnknownServerError
	}
	return int16(c)
}

// errorText is msg as a Kafka error message: nil when empty.
func errorText(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}
