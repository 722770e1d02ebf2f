package disk

import "sync"

// pageDropper is a File that can ask the OS to drop a range of itself
// from the page cache (on Linux, posix_fadvise with POSIX_FADV_DONTNEED).
// Dirty pages and pages under writeback stay: nothing unwritten is lost,
// and a later read of a dropped page reads it from the device.
type pageDropper interface {
	DropPages(offset, n int64) error
}

// dropBehind keeps the newest bytes a node's logs write in the OS page
// cache, up to a bound, and asks the OS to drop the older ones once they
// are on their way to the device: the segments report each range whose
// writeback they start (see writebackBytes), oldest first, and once the
// ranges reported add up to more than the bound, the oldest are dropped
// until they no longer do.
//
// Readers at the tail (followers, consumers keeping up) read what was just
// written, so the newest bytes are the ones worth keeping. Left to itself
// the kernel keeps every written page until memory runs short, so that
// each write takes a page never used before. Where memory is lent lazily
// by a hypervisor (Firecracker, and virtio-balloon's free page reporting)
// the first touch of such a page costs a fault in the host, and copying
// written bytes into new pages costs several times what copying them into
// recycled ones does: measured on a 2-core Firecracker VM, a 3 GB write
// in 256 KiB writes took 4.8-5.7 s of kernel time, and 1.1-1.3 s when the
// pages written behind it were dropped as it went. Under a memory cgroup the same bound keeps a busy
// node's writes from pushing the cgroup into reclaim.
//
// Safe for concurrent use: every log of a node reports to the one bound.
type dropBehind struct {
	bound int64

	mu     sync.Mutex
	held   int64          // bytes of ranges
	ranges []writtenRange // oldest first
}

// writtenRange is a range of a file whose writeback was started.
type writtenRange struct {
	file      *cachedFile
	offset, n int64
}

// written reports that the writeback of n bytes of f at offset started,
// and drops the oldest ranges reported while those held exceed the bound.
// A nil dropBehind (a cache with no bound) keeps nothing and drops nothing.
func (d *dropBehind) written(f *cachedFile, offset, n int64) {
	if d == nil || n <= 0 {
		return
	}
	d.mu.Lock()
	if last := len(d.ranges) - 1; last >= 0 && d.ranges[last].file == f && d.ranges[last].offset+d.ranges[last].n == offset {
		d.ranges[last].n += n
	} else {
		d.ranges = append(d.ranges, writtenRange{file: f, offset: offset, n: n})
	}
	d.held += n
	var drop []writtenRange
	for d.held > d.bound {
		r := d.ranges[0]
		d.ranges[0] = writtenRange{}
		d.ranges = d.ranges[1:]
		d.held -= r.n
		drop = append(drop, r)
	}
	d.mu.Unlock()
	for _, r := range drop {
		r.file.dropPages(r.offset, r.n)
	}
}
