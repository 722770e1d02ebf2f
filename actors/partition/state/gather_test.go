package state

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/depot-dev/depot/messages"
)

// gatherEvent is one thing that happens to a Gather of three parts, all
// asked at the start, and the step it should give.
type gatherEvent struct {
	answered int // part that answers with bytes (failed), when >= 0
	bytes    int
	failed   bool
	woke     int // part woken with readable (changed), when >= 0
	readable int
	changed  bool
	expired  bool
	want     GatherStep
}

func answers(part, bytes int, want GatherStep) gatherEvent {
	return gatherEvent{answered: part, bytes: bytes, woke: -1, want: want}
}

func fails(part int, want GatherStep) gatherEvent {
	return gatherEvent{answered: part, failed: true, woke: -1, want: want}
}

func wakes(part, readable int, want GatherStep) gatherEvent {
	return gatherEvent{answered: -1, woke: part, readable: readable, want: want}
}

func changes(part int, want GatherStep) gatherEvent {
	return gatherEvent{answered: -1, woke: part, changed: true, want: want}
}

func expires(want GatherStep) gatherEvent {
	return gatherEvent{answered: -1, woke: -1, expired: true, want: want}
}

var (
	stepNone   = GatherStep{}
	stepAnswer = GatherStep{Answer: true}
	stepPark   = GatherStep{Park: true}
)

func askAgain(parts ...int) GatherStep { return GatherStep{Ask: parts} }

// A gather is answered once every part asked has answered and together
// they hold min_bytes, or one failed, or it may not wait, or its wait has
// passed; otherwise it is parked, and parts woken by their partitions are
// asked again once they may make up min_bytes, or at once when one
// changed.
func TestGather(t *testing.T) {
	for _, tc := range []struct {
		name     string
		minBytes int
		wait     bool
		events   []gatherEvent
	}{
		{name: "enough at once", minBytes: 100, wait: true, events: []gatherEvent{
			answers(0, 60, stepNone), answers(1, 0, stepNone), answers(2, 40, stepAnswer),
		}},
		{name: "enough but one part has not answered", minBytes: 10, wait: true, events: []gatherEvent{
			answers(0, 500, stepNone), answers(2, 0, stepNone), expires(stepNone), answers(1, 0, stepAnswer),
		}},
		{name: "an error answers at once", minBytes: 100, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), fails(1, stepNone), answers(2, 0, stepAnswer),
		}},
		{name: "no wait asked", minBytes: 100, wait: false, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepAnswer),
		}},
		{name: "nothing asked", minBytes: 0, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepAnswer),
		}},
		{name: "parked then expired", minBytes: 1, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark), expires(stepAnswer),
		}},
		{name: "parked then woken by one part", minBytes: 1, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
			wakes(1, 70, askAgain(1)), answers(1, 70, stepAnswer),
		}},
		{name: "woken in steps until min_bytes", minBytes: 100, wait: true, events: []gatherEvent{
			answers(0, 30, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
			wakes(2, 40, stepNone), wakes(1, 20, stepNone), wakes(2, 10, askAgain(2, 1)),
			answers(1, 20, stepNone), answers(2, 50, stepAnswer),
		}},
		{name: "asked again, still short, parked on", minBytes: 100, wait: true, events: []gatherEvent{
			answers(0, 30, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
			wakes(0, 80, askAgain(0)), answers(0, 60, stepNone),
			wakes(1, 50, askAgain(1)), answers(1, 40, stepAnswer),
		}},
		{name: "woken before parked", minBytes: 1, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), wakes(0, 10, stepNone), answers(1, 0, stepNone), answers(2, 0, askAgain(0)), answers(0, 10, stepAnswer),
		}},
		{name: "a wake while asked is in the answer", minBytes: 1, wait: true, events: []gatherEvent{
			wakes(0, 10, stepNone), answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark), expires(stepAnswer),
		}},
		{name: "a part that changed is asked whatever min_bytes", minBytes: 1 << 20, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
			changes(2, askAgain(2)), fails(2, stepAnswer),
		}},
		{name: "expired while asked again", minBytes: 100, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
			wakes(0, 100, askAgain(0)), expires(stepNone), answers(0, 10, stepAnswer),
		}},
		{name: "an answer not asked for", minBytes: 1, wait: true, events: []gatherEvent{
			answers(0, 0, stepNone), answers(0, 99, stepNone), answers(1, 0, stepNone), answers(2, 0, stepPark),
		}},
		{name: "an error wins over a wake", minBytes: 100, wait: true, events: []gatherEvent{
			fails(0, stepNone), changes(0, stepNone), answers(1, 0, stepNone), answers(2, 0, stepAnswer),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGather(3, tc.minBytes, tc.wait)
			for i := range 3 {
				g.Ask(i)
			}
			require.Equal(t, stepNone, g.Start())
			for n, e := range tc.events {
				var got GatherStep
				switch {
				case e.answered >= 0:
					got = g.Answered(e.answered, e.bytes, e.failed)
				case e.woke >= 0:
					got = g.Woke(e.woke, e.readable, e.changed)
				default:
					got = g.Expired()
				}
				require.Equal(t, e.want, got, "event %d", n)
			}
		})
	}
}

// A part refused up front counts as failed: the gather is answered once
// the others have answered, at once when none was asked.
func TestGatherRefused(t *testing.T) {
	g := NewGather(2, 1, true)
	g.Refuse(0)
	g.Ask(1)
	require.Equal(t, stepNone, g.Start())
	require.Equal(t, stepAnswer, g.Answered(1, 0, false))

	g = NewGather(2, 1, true)
	g.Refuse(0)
	g.Refuse(1)
	require.Equal(t, stepAnswer, g.Start())

	g = NewGather(0, 1, true)
	require.Equal(t, stepPark, g.Start(), "no part: nothing will come, parked until its wait passes")
}

// The parts' answers are trimmed to max_bytes in order, the first with
// records kept whole.
func TestFitResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sizes    []int
		maxBytes int
		want     []int
	}{
		{"no bound", []int{5, 0, 7}, 0, []int{5, 0, 7}},
		{"all fit", []int{5, 0, 7}, 12, []int{5, 0, 7}},
		{"the last cut", []int{5, 0, 7}, 10, []int{5, 0, 5}},
		{"the first whole, the rest none", []int{0, 50, 7}, 10, []int{0, 50, 0}},
		{"nothing", []int{0, 0}, 10, []int{0, 0}},
		{"no parts", nil, 10, []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, FitResponse(tc.sizes, tc.maxBytes))
		})
	}
}

// Records are cut after the last whole batch within the bound.
func TestWholeBatchesWithin(t *testing.T) {
	a, b := testBatch(t, "a"), testBatch(t, "bb", "cc")
	records := append(append([]byte(nil), a...), b...)
	for _, tc := range []struct {
		name string
		n    int
		want []byte
	}{
		{"all", len(records), records},
		{"more than all", 10 * len(records), records},
		{"one short", len(records) - 1, a},
		{"the first", len(a), a},
		{"within the first", len(a) - 1, []byte{}},
		{"none", 0, []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, WholeBatchesWithin(records, tc.n))
		})
	}
}

// A fetch of several partitions with a negative max_bytes, or naming a
// partition twice, is refused whole.
func TestValidateFetchPartitions(t *testing.T) {
	part := func(topic string, partition int32) *messages.FetchPartition {
		return &messages.FetchPartition{Topic: topic, Partition: partition}
	}
	for _, tc := range []struct {
		name string
		req  *messages.FetchPartitionsRequest
		want messages.ErrorCode
	}{
		{"empty", &messages.FetchPartitionsRequest{}, messages.ErrorCode_NONE},
		{"several", &messages.FetchPartitionsRequest{MaxBytes: 10, Partitions: []*messages.FetchPartition{part("a", 0), part("a", 1), part("b", 0)}}, messages.ErrorCode_NONE},
		{"a part's own sizes are its partition's", &messages.FetchPartitionsRequest{Partitions: []*messages.FetchPartition{{Topic: "a", MaxBytes: -1}}}, messages.ErrorCode_NONE},
		{"negative max_bytes", &messages.FetchPartitionsRequest{MaxBytes: -1}, messages.ErrorCode_INVALID_FETCH_SIZE},
		{"twice", &messages.FetchPartitionsRequest{Partitions: []*messages.FetchPartition{part("a", 0), part("b", 0), part("a", 0)}}, messages.ErrorCode_INVALID_REQUEST},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ValidateFetchPartitions(tc.req).Code)
		})
	}
}
