package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/depot-dev/depot/disk"
)

// The fuzz targets check that the decoders of the WAL and snapshot files
// never panic, fail only with a *disk.CorruptionError inside the input
// wrapping ErrCorrupt, and that what decodes encodes back to the same
// bytes. Seeds come from f.Add and testdata/fuzz/.

func requireCorrupt(t *testing.T, err error, size int) {
	t.Helper()
	require.ErrorIs(t, err, ErrCorrupt)
	var ce *disk.CorruptionError
	require.True(t, errors.As(err, &ce), "not a *disk.CorruptionError: %v", err)
	require.GreaterOrEqual(t, ce.Offset, int64(0))
	require.LessOrEqual(t, ce.Offset, int64(size))
}

// seedWAL returns a WAL file of a base and a few batches, one replacing a
// suffix.
func seedWAL() []byte {
	b := appendBaseRecord(nil, 7, 2)
	b = appendBatchRecord(b, hardState(2, 1, 7), entries(8, 10, 2))
	b = appendBatchRecord(b, nil, []*raftpb.Entry{{Index: new(uint64(11)), Term: new(uint64(3)), Type: raftpb.EntryConfChangeV2.Enum()}})
	return appendBatchRecord(b, hardState(4, 4, 9), entries(10, 12, 4))
}

func FuzzDecodeRecord(f *testing.F) {
	wal := seedWAL()
	f.Add(wal)
	f.Add(wal[25:])
	f.Add(wal[25 : len(wal)-3])
	f.Add(appendBatchRecord(nil, nil, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The payload decoders, on bytes no checksum guards.
		if batch, problem := decodeBatch(b); problem == "" {
			require.Equal(t, b, appendBatchRecord(nil, batch.hardState, batch.entries)[recordHeaderSize:])
		}
		if index, term, ok := decodeBase(b); ok {
			require.Equal(t, b, appendBaseRecord(nil, index, term)[recordHeaderSize:])
		}

		typ, payload, n, err := decodeRecord(b)
		if err != nil {
			require.True(t, errors.Is(err, errShortRecord) || errors.Is(err, errBadRecord), "%v", err)
			return
		}
		require.LessOrEqual(t, n, len(b))
		require.Equal(t, b[:n], appendRecord(nil, typ, func(dst []byte) []byte { return append(dst, payload...) }))
		switch typ {
		case recordBase:
			index, term, ok := decodeBase(payload)
			if ok {
				require.Equal(t, b[:n], appendBaseRecord(nil, index, term))
			}
		case recordBatch:
			batch, problem := decodeBatch(payload)
			if problem == "" {
				require.Equal(t, b[:n], appendBatchRecord(nil, batch.hardState, batch.entries))
			}
		default:
			t.Fatalf("record of type %d decoded", typ)
		}
	})
}

func FuzzDecodeWAL(f *testing.F) {
	wal := seedWAL()
	f.Add(wal)
	f.Add(wal[:len(wal)-5])
	f.Add(appendBaseRecord(nil, 0, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWAL(b)
		if err != nil {
			requireCorrupt(t, err, len(b))
			return
		}
		require.LessOrEqual(t, w.size, int64(len(b)))
		require.GreaterOrEqual(t, w.size, int64(recordHeaderSize+basePayloadSize))
		prevTerm := w.baseTerm
		for i, e := range w.entries {
			require.Equal(t, w.baseIndex+1+uint64(i), e.GetIndex())
			require.GreaterOrEqual(t, e.GetTerm(), prevTerm)
			prevTerm = e.GetTerm()
		}
		if w.size < int64(len(b)) {
			require.Equal(t, -1, nextWholeRecord(b, int(w.size)), "a torn tail holds no whole record")
		}
		// Decoding what was kept keeps all of it, and the same log.
		again, err := decodeWAL(b[:w.size])
		require.NoError(t, err)
		require.Equal(t, w.size, again.size)
		require.Equal(t, len(w.entries), len(again.entries))
		for i := range w.entries {
			require.Equal(t, w.entries[i].GetTerm(), again.entries[i].GetTerm())
			require.True(t, bytes.Equal(w.entries[i].GetData(), again.entries[i].GetData()))
		}
	})
}

func FuzzDecodeSnapshot(f *testing.F) {
	snap := &raftpb.Snapshot{
		Data: []byte("state"),
		Metadata: &raftpb.SnapshotMetadata{
			Index:     new(uint64(42)),
			Term:      new(uint64(3)),
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, VotersOutgoing: []uint64{1, 2}, LearnersNext: []uint64{5}, AutoLeave: new(true)},
		},
	}
	good := appendSnapshot(nil, snap)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(appendSnapshot(nil, &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1))}}))
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= snapshotHeaderSize {
			// The same bytes with a checksum that fits, to reach the fields.
			fixed := bytes.Clone(b)
			copy(fixed, snapshotMagic)
			binary.LittleEndian.PutUint32(fixed[4:], crc32.Checksum(fixed[snapshotHeaderSize:], castagnoli))
			if snap, err := decodeSnapshot(fixed); err != nil {
				requireCorrupt(t, err, len(fixed))
			} else {
				require.Equal(t, fixed, appendSnapshot(nil, snap))
			}
		}
		snap, err := decodeSnapshot(b)
		if err != nil {
			requireCorrupt(t, err, len(b))
			return
		}
		require.Equal(t, b, appendSnapshot(nil, snap))
	})
}
