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
