package quorum

import (
	"encoding/binary"
	"hash/crc32"

	"go.etcd.io/raft/v3/raftpb"
)

// appendSnapshot appends the snapshot file of snap (layout in the package
// doc).
func appendSnapshot(dst []byte, snap *raftpb.Snapshot) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic...)
	dst = append(dst, 0, 0, 0, 0)
	md := snap.GetMetadata()
	dst = binary.LittleEndian.AppendUint64(dst, md.GetIndex())
	dst = binary.LittleEndian.AppendUint64(dst, md.GetTerm())
	cs := md.GetConfState()
	for _, ids := range [][]uint64{cs.GetVoters(), cs.GetLearners(), cs.GetVotersOutgoing(), cs.GetLearnersNext()} {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(ids)))
		for _, id := range ids {
			dst = binary.LittleEndian.AppendUint64(dst, id)
		}
	}
	if cs.GetAutoLeave() {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(snap.GetData())))
	dst = append(dst, snap.GetData()...)
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[start+snapshotHeaderSize:], castagnoli))
	return dst
}

// snapshotReader reads the fields of a snapshot file after its checksum,
// remembering the first problem: each read after it returns zero.
type snapshotReader struct {
	b       []byte
	off     int
	problem string
	at      int
}

func (r *snapshotReader) fail(problem string) {
	if r.problem == "" {
		r.problem, r.at = problem, r.off
	}
}

func (r *snapshotReader) uint64() uint64 {
	if r.problem != "" || len(r.b)-r.off < 8 {
		r.fail("cut short")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *snapshotReader) ids() []uint64 {
	if r.problem != "" || len(r.b)-r.off < 4 {
		r.fail("cut short")
		return nil
	}
	n := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	if uint64(n) > uint64((len(r.b)-r.off)/8) {
		r.fail("id count larger than the file")
		return nil
	}
	if n == 0 {
		return nil
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = r.uint64()
	}
	return ids
}

// decodeSnapshot decodes a snapshot file. Damage gives a
// *disk.CorruptionError, without a path, wrapping ErrCorrupt. The data
// aliases b.
func decodeSnapshot(b []byte) (*raftpb.Snapshot, error) {
	if len(b) < snapshotHeaderSize || string(b[:4]) != snapshotMagic {
		return nil, corruptf("", 0, "not a snapshot file")
	}
	if crc32.Checksum(b[snapshotHeaderSize:], castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, corruptf("", 4, "snapshot checksum mismatch")
	}
	r := &snapshotReader{b: b, off: snapshotHeaderSize}
	index := r.uint64()
	term := r.uint64()
	cs := &raftpb.ConfState{
		Voters:         r.ids(),
		Learners:       r.ids(),
		VotersOutgoing: r.ids(),
		LearnersNext:   r.ids(),
	}
	switch {
	case r.problem != "":
	case r.off >= len(b):
		r.fail("cut short")
	case b[r.off] > 1:
		r.fail("auto leave neither 0 nor 1")
	default:
		cs.AutoLeave = new(b[r.off] == 1)
		r.off++
	}
	size := r.uint64()
	if r.problem == "" && size != uint64(len(b)-r.off) {
		r.fail("data length does not end the file")
	}
	if r.problem != "" {
		return nil, corruptf("", int64(r.at), "snapshot %s", r.problem)
	}
	snap := &raftpb.Snapshot{
		Metadata: &raftpb.SnapshotMetadata{ConfState: cs, Index: new(index), Term: new(term)},
	}
	if size > 0 {
		snap.Data = b[r.off:]
	}
	return snap, nil
}
