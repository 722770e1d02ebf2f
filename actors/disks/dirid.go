package disks

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/depot-dev/depot/disk"
)

// MetaPropertiesFile is the file in each log directory that names it, as
// Kafka's meta.properties does. Its format is Java properties, one
// key=value a line, '#' starting a comment:
//
//	version=1
//	node.id=<the node that owns the directory>
//	directory.id=<22 characters: 16 random bytes, base64url without padding>
//	cluster.id=<the cluster's id, once the node has joined one>
//
// The directory id is what the metadata keeps for the directory of each
// partition (KIP-858), so that a path may change without the metadata
// changing. Other keys are kept by readers as they are and ignored.
const MetaPropertiesFile = "meta.properties"

// metaPropertiesVersion is the version of the format above.
const metaPropertiesVersion = 1

// ErrMetaProperties is wrapped by the errors of a meta.properties that
// cannot be used: damaged, of another version, or of another node.
var ErrMetaProperties = errors.New("disks: bad " + MetaPropertiesFile)

// MetaProperties is the content of a log directory's MetaPropertiesFile.
type MetaProperties struct {
	Version     int
	NodeID      int32
	DirectoryID string
	// ClusterID is the cluster the directory belongs to, "" until the
	// node has joined one.
	ClusterID string
}

// ParseMetaProperties decodes a meta.properties file. It never panics: a
// line that is not key=value, a missing or malformed key, or an unknown
// version is an error wrapping ErrMetaProperties.
func ParseMetaProperties(data []byte) (MetaProperties, error) {
	var mp MetaProperties
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' || text[0] == '!' {
			continue
		}
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return mp, fmt.Errorf("%w: line %d is not key=value", ErrMetaProperties, line)
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		seen[key] = true
		switch key {
		case "version":
			v, err := strconv.Atoi(value)
			if err != nil {
				return mp, fmt.Errorf("%w: version %q", ErrMetaProperties, value)
			}
			mp.Version = v
		case "node.id":
			v, err := strconv.ParseInt(value, 10, 32)
			if err != nil || v < 0 {
				return mp, fmt.Errorf("%w: node.id %q", ErrMetaProperties, value)
			}
			mp.NodeID = int32(v)
		case "directory.id":
			if !validDirID(value) {
				return mp, fmt.Errorf("%w: directory.id %q is not 16 bytes in base64url", ErrMetaProperties, value)
			}
			mp.DirectoryID = value
		case "cluster.id":
			mp.ClusterID = value
		}
	}
	if err := sc.Err(); err != nil {
		return mp, fmt.Errorf("%w: %w", ErrMetaProperties, err)
	}
	for _, key := range []string{"version", "node.id", "directory.id"} {
		if !seen[key] {
			return mp, fmt.Errorf("%w: no %s", ErrMetaProperties, key)
		}
	}
	if mp.Version != metaPropertiesVersion {
		return mp, fmt.Errorf("%w: version %d, want %d", ErrMetaProperties, mp.Version, metaPropertiesVersion)
	}
	return mp, nil
}

// Encode is the file's content.
func (mp MetaProperties) Encode() []byte {
	b := fmt.Appendf(nil, "version=%d\nnode.id=%d\ndirectory.id=%s\n", mp.Version, mp.NodeID, mp.DirectoryID)
	if mp.ClusterID != "" {
		b = fmt.Appendf(b, "cluster.id=%s\n", mp.ClusterID)
	}
	return b
}

// validDirID reports whether id is a directory id: 16 bytes in base64url
// without padding.
func validDirID(id string) bool {
	b, err := base64.RawURLEncoding.DecodeString(id)
	return err == nil && len(b) == 16
}

// NewDirID returns a new random directory id.
func NewDirID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// EnsureDirID returns the id of the log directory path of node nodeID,
// from its MetaPropertiesFile, which it first writes (durably) with a new
// id when there is none. A file that is damaged, or names another node, is
// an error and is left as it is: the directory may belong to another node.
func EnsureDirID(fsys disk.FS, path string, nodeID int32) (string, error) {
	mp, err := EnsureMetaProperties(fsys, path, nodeID)
	return mp.DirectoryID, err
}

// EnsureMetaProperties returns the MetaPropertiesFile of the directory path
// of node nodeID, which it first writes (durably) with a new directory id
// when there is none. A file that is damaged, or names another node, is an
// error and is left as it is: the directory may belong to another node.
func EnsureMetaProperties(fsys disk.FS, path string, nodeID int32) (MetaProperties, error) {
	file := filepath.Join(path, MetaPropertiesFile)
	data, err := disk.ReadFile(fsys, file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		mp := MetaProperties{Version: metaPropertiesVersion, NodeID: nodeID, DirectoryID: NewDirID()}
		if err := writeFileAtomic(fsys, path, MetaPropertiesFile, mp.Encode()); err != nil {
			return MetaProperties{}, fmt.Errorf("disks: writing %s: %w", file, err)
		}
		return mp, nil
	case err != nil:
		return MetaProperties{}, fmt.Errorf("disks: reading %s: %w", file, err)
	}
	mp, err := ParseMetaProperties(data)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("%s: %w", file, err)
	}
	if mp.NodeID != nodeID {
		return MetaProperties{}, fmt.Errorf("%w: %s belongs to node %d, not to this node %d", ErrMetaProperties, file, mp.NodeID, nodeID)
	}
	return mp, nil
}

// SetClusterID records clusterID in the MetaPropertiesFile of the directory
// path of node nodeID, durably. The file must exist (EnsureMetaProperties).
func SetClusterID(fsys disk.FS, path string, nodeID int32, clusterID string) error {
	mp, err := EnsureMetaProperties(fsys, path, nodeID)
	if err != nil {
		return err
	}
	if mp.ClusterID == clusterID {
		return nil
	}
	mp.ClusterID = clusterID
	if err := writeFileAtomic(fsys, path, MetaPropertiesFile, mp.Encode()); err != nil {
		return fmt.Errorf("disks: writing %s: %w", filepath.Join(path, MetaPropertiesFile), err)
	}
	return nil
}
