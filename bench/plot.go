package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/depot-dev/depot/actors/client"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot colours: produce, tailing consume, catch-up consume.
var (
	colorProduce = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorTail    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorConsume = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
)

// WritePlot draws rep as a PNG at path: above, records/s per 100 ms
// interval over the run (produce, tailing consume, catch-up consume); below,
// the latency distributions as HDR percentile plots (x is 1/(1-q) on a log
// scale, so 10 is p90, 1000 is p99.9; y is labelled at every decade and at
// each distribution's p99).
func WritePlot(rep *Report, path string) error {
	through, err := throughputPlot(rep)
	if err != nil {
		return err
	}
	lat, err := latencyPlot(rep)
	if err != nil {
		return err
	}
	img := vgimg.New(10*vg.Inch, 9*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(12), PadY: vg.Points(24)}
	canvases := plot.Align([][]*plot.Plot{{through}, {lat}}, tiles, dc)
	through.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: plot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("bench: plot: %w", err)
	}
	return nil
}

// rates turns cumulative samples into records/s per interval, at the
// interval's end.
func rates(series []Sample, count func(Sample) int64) plotter.XYs {
	var xys plotter.XYs
	for i := 1; i < len(series); i++ {
		dt := (series[i].At - series[i-1].At).Seconds()
		if dt <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: series[i].At.Seconds(), Y: float64(count(series[i])-count(series[i-1])) / dt})
	}
	return xys
}

func throughputPlot(rep *Report) (*plot.Plot, error) {
	p := plot.New()
	cfg := rep.Config
	p.Title.Text = fmt.Sprintf("Depot throughput: %d B records, %d partition(s), %d producer(s), acks=%s", cfg.RecordSize, cfg.Partitions, cfg.Producers, client.FormatAcks(cfg.Acks))
	p.X.Label.Text = "seconds since start"
	p.Y.Label.Text = "records/s (per 100 ms)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	lines := []struct {
		name  string
		c     color.Color
		count func(Sample) int64
		show  bool
	}{
		{"produce (acknowledged)", colorProduce, func(s Sample) int64 { return s.Produced }, true},
		{"tailing consume", colorTail, func(s Sample) int64 { return s.Tailed }, cfg.Workload == WorkloadBoth},
		{"catch-up consume", colorConsume, func(s Sample) int64 { return s.Consumed }, cfg.Workload != WorkloadProduce},
	}
	for _, l := range lines {
		xys := rates(rep.Series, l.count)
		if !l.show || len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		line.Color = l.c
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(l.name, line)
	}
	p.Y.Min = 0
	p.Y.Max *= 1.3 // room for the legend
	p.Y.Tick.Marker = thousands{}
	return p, nil
}

func latencyPlot(rep *Report) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "Latency by percentile (HDR): x = 1/(1-q), 10 = p90, 100 = p99, 1000 = p99.9"
	p.X.Label.Text = "1/(1-q)"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Scale = plot.LogScale{}
	p.Add(plotter.NewGrid())
	hs := []struct {
		name string
		c    color.Color
		h    *Latencies
	}{
		{"produce ack (Produce call to promise)", colorProduce, rep.Ack},
		{"end-to-end (Produce call to Poll)", colorTail, rep.EndToEnd},
	}
	drawn := 0
	lowest := math.Inf(1)
	var p99 []float64
	for _, s := range hs {
		if s.h == nil {
			continue
		}
		if s.h.Count() > 0 {
			p99 = append(p99, s.h.QuantileMs(0.99))
		}
		var xys plotter.XYs
		for _, pt := range s.h.Percentiles() {
			y := max(pt.Ms, 0.001)
			lowest = min(lowest, y)
			xys = append(xys, plotter.XY{X: pt.X, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: plot: %w", err)
		}
		line.Color = s.c
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.name, line)
		drawn++
	}
	p.Y.Tick.Marker = latencyTicks{p99: p99}
	if drawn == 0 {
		// An empty log axis cannot be drawn: show a decade of each.
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 1, 10, 0.1, 1
		return p, nil
	}
	// Whole decades, so both ends are labelled; the legend sits at the
	// bottom right, under the lines' flat tails, in the decade or so below
	// the lowest latency.
	p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lowest / 10))))
	p.Y.Max = math.Pow10(int(math.Ceil(math.Log10(p.Y.Max))))
	p.X.Max = max(p.X.Max, 10)
	return p, nil
}

// labelGap is the least distance between two labels of the latency axis,
// as a share of its height.
const labelGap = 0.05

// latencyTicks marks the latency axis (milliseconds, log scale): a
// labelled tick at every decade in range (0.01, 0.1, 1, 10, ...), minor
// ticks at 2 to 9 times each, and a labelled tick at each p99 ("p99 4.21").
// A decade gives its label up to a p99 too close to it to read both, and
// p99s that close share one label ("p99 4.1 / 4.3").
type latencyTicks struct {
	p99 []float64
}

func (t latencyTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	gap := labelGap * math.Log10(hi/lo)
	near := func(a, b float64) bool { return math.Abs(math.Log10(a/b)) < gap }

	// The p99s in range, ascending, those too close to the first of a
	// group joined into its label.
	var values []float64
	for _, v := range t.p99 {
		if v >= lo && v <= hi {
			values = append(values, v)
		}
	}
	slices.Sort(values)
	var p99 []plot.Tick
	for _, v := range values {
		if n := len(p99); n > 0 && near(p99[n-1].Value, v) {
			p99[n-1].Label += " / " + formatMs(v)
			continue
		}
		p99 = append(p99, plot.Tick{Value: v, Label: "p99 " + formatMs(v)})
	}

	var ticks []plot.Tick
	for e := int(math.Floor(math.Log10(lo))); math.Pow10(e) <= hi; e++ {
		decade := math.Pow10(e)
		for i := 1; i <= 9; i++ {
			v := float64(i) * decade
			if v < lo || v > hi {
				continue
			}
			tick := plot.Tick{Value: v}
			if i == 1 && !slices.ContainsFunc(p99, func(p plot.Tick) bool { return near(p.Value, v) }) {
				tick.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, tick)
		}
	}
	return append(ticks, p99...)
}

// formatMs is a latency in milliseconds to 3 significant digits, without
// an exponent: 0.0512, 4.21, 45, 1230.
func formatMs(v float64) string {
	rounded, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	return strconv.FormatFloat(rounded, 'f', -1, 64)
}

// thousands labels the default ticks as 250k rather than 250000.00.
type thousands struct{}

func (thousands) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value/1000, 'f', -1, 64) + "k"
		}
	}
	return ticks
}
