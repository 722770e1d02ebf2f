package disk

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/wire"
)

func TestAppendValidated(t *testing.T) {
	l, err := Open(NewMemFS(), "/p/t-0", Options{Config: DefaultConfig()})
	require.NoError(t, err)
	defer l.Close()
	for i := 0; i < 3; i++ {
		b := wire.NewBuilder(wire.NoProducer)
		b.Append(int64(i), nil, []byte{byte(i)}, nil)
		b.Append(int64(i), nil, []byte{byte(i)}, nil)
		batch, err := b.AppendTo(nil)
		require.NoError(t, err)
		h, err := wire.Validate(batch)
		require.NoError(t, err)
		res, err := l.AppendValidated(batch, h)
		require.NoError(t, err)
		require.Equal(t, int64(2*i), res.BaseOffset)
		require.Equal(t, int64(2*i+1), res.LastOffset)
		// A header that does not describe the bytes is refused.
		_, err = l.AppendValidated(append(batch, 0), h)
		require.ErrorIs(t, err, ErrNotOneBatch)
	}
	data, err := l.Read(0, 1<<20, nil)
	require.NoError(t, err)
	n := 0
	_, err = wire.Batches(data, func(batch []byte, h wire.Header) error {
		require.Equal(t, int64(2*n), h.BaseOffset)
		n++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, 3, n)
}
