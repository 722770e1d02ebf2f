package partition

import (
	"fmt"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// A batch the log refuses for what it holds is the producer's fault: it is
// answered CORRUPT_MESSAGE, and the log directory stays up.
func TestAppendErrorsOfABadBatch(t *testing.T) {
	a := &partitionActor{logger: logrus.NewEntry(logrus.New())}
	for _, err := range []error{wire.ErrBadCRC, wire.ErrShort, wire.ErrBadLength, wire.ErrBadMagic,
		wire.ErrRecordCount, wire.ErrCompression, wire.ErrLeaderEpoch} {
		code, msg := a.appendError(nil, fmt.Errorf("disk: append: %w", err))
		require.Equal(t, messages.ErrorCode_CORRUPT_MESSAGE, code, "%v", err)
		require.Contains(t, msg, err.Error())
	}
}
