package controller

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/depot-dev/depot/actors/metadata"
	"github.com/depot-dev/depot/disk"
	"github.com/depot-dev/depot/messages"
	"github.com/depot-dev/depot/wire"
)

// Reading the metadata log of a single node, as versions before the raft
// quorum wrote it: a disk.Log in the metadata directory itself, of Kafka
// record batches whose values are proto-marshalled messages.MetadataRecord.
// A quorum of one that starts with no raft state takes its image as the
// first entry of the raft log; the old files stay where they are, and are
// not read again once the raft log holds them.
const (
	// legacyReadBytes is how much of the old log replay reads at once.
	legacyReadBytes = 1 << 20
)

// hasLegacyLog reports whether dir holds segments of the old metadata log.
func hasLegacyLog(fsys disk.FS, dir string) (bool, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, name := range names {
		if strings.HasSuffix(name, ".log") {
			return true, nil
		}
	}
	return false, nil
}

// readLegacyLog replays the old metadata log in dir into an image, folding
// paths of log directories into ids with legacy. A torn tail is cut by the
// log's recovery, losing only the change that was never answered.
func readLegacyLog(fsys disk.FS, dir string, legacy metadata.LegacyDirs, logger *logrus.Entry) (*metadata.Image, int, error) {
	logCfg := disk.DefaultConfig()
	logCfg.RetentionMs = -1
	logCfg.RetentionBytes = -1
	log, err := disk.Open(fsys, dir, disk.Options{Config: logCfg, LeaderEpoch: disk.NoLeaderEpoch, Logger: logger})
	if err != nil {
		return nil, 0, fmt.Errorf("controller: open metadata log %s: %w", dir, err)
	}
	defer log.Close()
	var (
		buf     []byte
		records int
	)
	delta := metadata.NewDelta(metadata.Empty(), legacy)
	offset := log.StartOffset()
	for offset < log.EndOffset() {
		buf, err = log.Read(offset, legacyReadBytes, buf[:0])
		if err != nil {
			return nil, records, fmt.Errorf("controller: read metadata log %s at offset %d: %w", dir, offset, err)
		}
		start := offset
		_, err = wire.Batches(buf, func(batch []byte, h wire.Header) error {
			err := wire.Records(batch, func(r wire.Record) error {
				var rec messages.MetadataRecord
				if err := proto.Unmarshal(r.Value, &rec); err != nil {
					return fmt.Errorf("%w %s: record at offset %d: %w", ErrMetadataLog, dir, r.Offset, err)
				}
				if err := delta.Replay(&rec); err != nil {
					logger.WithError(err).Warn("metadata record not replayed as written")
				}
				records++
				return nil
			})
			offset = h.NextOffset()
			return err
		})
		if err != nil {
			return nil, records, err
		}
		if offset == start {
			return nil, records, fmt.Errorf("%w %s: no whole batch at offset %d", ErrMetadataLog, dir, offset)
		}
	}
	return delta.Apply(), records, nil
}
