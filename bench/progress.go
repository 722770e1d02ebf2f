package bench

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress bar settings: the rate is taken over the last rateSpan, and
// shown once the samples span minRateSpan; the bar counts in thousandths
// of the phase.
const (
	rateSpan    = 3 * time.Second
	minRateSpan = 250 * time.Millisecond
	barSteps    = 1000
)

// progress draws one progress bar per phase on a terminal. The bar shows
// how much of the phase is done, by whichever of its bounds (records, time)
// ends it; the line's end shows the count, the rate over the last few
// seconds and the time left (see phaseStatus). A nil *progress draws
// nothing. Safe for concurrent use.
type progress struct {
	w      io.Writer
	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	desc   string
	count  *atomic.Int64
	bounds phaseBounds
	window rateWindow
}

// phase finishes the current bar and starts one for a phase that ends at
// max records counted by count (0: no count bound) or after limit,
// whichever comes first.
func (p *progress) phase(desc string, max int64, limit time.Duration, count *atomic.Int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finishLocked()
	now := time.Now()
	p.desc, p.count = desc, count
	p.bounds = phaseBounds{max: max, start: now, deadline: now.Add(limit)}
	// The count may not start at zero (the tailing consumers have read
	// most of the records when their phase starts): the window starts
	// with it, so the first rate is not the whole count over an instant.
	p.window = rateWindow{span: rateSpan}
	p.window.add(now, count.Load())
	p.bar = progressbar.NewOptions64(barSteps,
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
	)
}

// update redraws the bar from the current count.
func (p *progress) update() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar == nil {
		return
	}
	now, count := time.Now(), p.count.Load()
	p.window.add(now, count)
	s := phaseStatus(p.bounds, &p.window, now, count)
	// Short of the end, so the bar stays up until the phase is over. The
	// bar is not throttled: update comes every 100 ms, and Describe draws
	// the line with the new fill.
	_ = p.bar.Set64(min(int64(s.done*barSteps), barSteps-1))
	p.bar.Describe(s.describe(p.desc, p.bounds.max))
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
		_ = p.bar.Finish()
		p.bar = nil
	}
}

// countSample is a phase's count at a moment.
type countSample struct {
	at    time.Time
	count int64
}

// rateWindow holds a phase's recent count samples, in time order, for a
// rate over the last span rather than since the phase began (which hides a
// stall) or since the last sample (which jumps with every batch). Not safe
// for concurrent use.
type rateWindow struct {
	span    time.Duration
	samples []countSample
}

// add appends the count at time at, and drops the samples no longer
// needed: it keeps the newest one at or before at - span as the window's
// start, so that once the phase is span old the window covers span.
func (w *rateWindow) add(at time.Time, count int64) {
	w.samples = append(w.samples, countSample{at: at, count: count})
	drop := 0
	for drop+1 < len(w.samples) && !w.samples[drop+1].at.After(at.Add(-w.span)) {
		drop++
	}
	w.samples = w.samples[drop:]
}

// rate is the records per second from the window's first sample to its
// last, and false while those are less than minRateSpan apart.
func (w *rateWindow) rate() (float64, bool) {
	if len(w.samples) < 2 {
		return 0, false
	}
	first, last := w.samples[0], w.samples[len(w.samples)-1]
	dt := last.at.Sub(first.at)
	if dt < minRateSpan {
		return 0, false
	}
	return float64(last.count-first.count) / dt.Seconds(), true
}

// phaseBounds are what ends a phase: max records (0: no count bound) or
// the deadline, whichever comes first.
type phaseBounds struct {
	max             int64
	start, deadline time.Time
}

// progressStatus is what the bar shows of a phase at a moment.
type progressStatus struct {
	count int64
	// done is the part of the phase behind, 0 to 1: of the records, when
	// the count bound ends the phase first at the current rate, else of
	// the time.
	done      float64
	rate      float64
	rateKnown bool
	// eta is the time left: the records left at the current rate or the
	// time to the deadline, whichever is shorter. Unknown while the rate
	// is and the phase has a count bound.
	eta      time.Duration
	etaKnown bool
}

// phaseStatus is the status at now of a phase with bounds b, its count and
// its recent samples w.
func phaseStatus(b phaseBounds, w *rateWindow, now time.Time, count int64) progressStatus {
	s := progressStatus{count: count}
	s.rate, s.rateKnown = w.rate()
	timeLeft := max(b.deadline.Sub(now), 0)
	timeDone := 1.0
	if total := b.deadline.Sub(b.start); total > 0 {
		timeDone = min(max(now.Sub(b.start).Seconds()/total.Seconds(), 0), 1)
	}
	if b.max <= 0 {
		s.done, s.eta, s.etaKnown = timeDone, timeLeft, true
		return s
	}
	countDone := min(max(float64(count)/float64(b.max), 0), 1)
	switch {
	case count >= b.max:
		s.done, s.eta, s.etaKnown = 1, 0, true
	case !s.rateKnown:
		s.done = max(countDone, timeDone)
	case s.rate > 0 && float64(b.max-count)/s.rate < timeLeft.Seconds():
		s.done, s.eta, s.etaKnown = countDone, time.Duration(float64(b.max-count)/s.rate*float64(time.Second)), true
	default:
		// Stalled, or too slow to reach max: the deadline ends it.
		s.done, s.eta, s.etaKnown = timeDone, timeLeft, true
	}
	return s
}

// describe is the text at the bar's end: the phase, its count (of max,
// when it has a count bound), the rate and the time left, each "-" while
// unknown.
func (s progressStatus) describe(phase string, max int64) string {
	count := fmt.Sprintf("%d %s", s.count, progressRecordUnit)
	if max > 0 {
		count = fmt.Sprintf("%d/%d %s", s.count, max, progressRecordUnit)
	}
	rate, eta := "-", "-"
	if s.rateKnown {
		rate = fmt.Sprintf("%.0f", s.rate)
	}
	if s.etaKnown {
		eta = s.eta.Round(time.Second).String()
	}
	return fmt.Sprintf("%s: %s, %s %s/s, %s left", phase, count, rate, progressRecordUnit, eta)
}
