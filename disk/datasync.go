package disk

// dataSyncer is a File that can make its written bytes durable without the
// metadata a later read does not need, such as its modification time (on
// Linux, fdatasync). The size of a file that grew is such metadata: it is
// synced too.
type dataSyncer interface {
	SyncData() error
}

// syncData makes f's written bytes durable: with SyncData where f can,
// else with Sync.
func syncData(f File) error {
	if d, ok := f.(dataSyncer); ok {
		return d.SyncData()
	}
	return f.Sync()
}

// fileSystemSyncer is a File that can make its whole file system durable
// at once, and then tell whether its own bytes failed to reach the device:
// on Linux, syncfs(2), which writes back every dirty file and commits the
// journal once, and then sync_file_range(2) waiting on the file, which
// costs no I/O once syncfs has run and reports a writeback error of this
// file that no earlier call on its descriptor reported. syncfs alone
// reports errors for the file system as a whole, and only once for all its
// descriptors: without the check, a file whose writeback failed while
// syncfs reported the error to another caller would be taken for durable.
type fileSystemSyncer interface {
	// SyncFileSystem syncs the file system of the file; an error wrapping
	// errNoFileSystemSync when it cannot, which changes nothing.
	SyncFileSystem() error
	// CheckWriteback waits for the writeback of the file's bytes and
	// returns the error of any that failed since the descriptor last
	// reported one.
	CheckWriteback() error
}
