package bench

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws one progress bar per phase on a terminal. A nil *progress
// draws nothing. Safe for concurrent use.
type progress struct {
	w     io.Writer
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	count *atomic.Int64
}

// phase finishes the current bar and starts one of max records counted by
// count.
func (p *progress) phase(desc string, max int64, count *atomic.Int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
	if max <= 0 {
		max = -1 // no count bound: a spinner
	}
	p.bar = progressbar.NewOptions64(max,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(progressRecordUnit),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
	)
	p.count = count
}

// update moves the bar to the current count.
func (p *progress) update() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Set64(min(p.count.Load(), p.bar.GetMax64()))
	}
}

// finish clears the last bar.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
}

func (p *progress) finishLocked() {
	if p.bar != nil {
		_ = p.bar.Set64(min(p.count.Load(), p.bar.GetMax64()))
		_ = p.bar.Finish()
		p.bar = nil
	}
}
