package expirybench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Phase is what one node is doing at a moment of the timeline.
type Phase int

// Node phases, in legend order.
const (
	// PhaseNone: no VM and none requested.
	PhaseNone Phase = iota
	// PhaseWaiting: a resize request for the node is queued for capacity.
	PhaseWaiting
	// PhaseBooting: the VM runs; its slurmd has not registered yet.
	PhaseBooting
	// PhaseIdle: registered, no job.
	PhaseIdle
	// PhaseBusy: registered, running a job.
	PhaseBusy
	// PhaseDrained: drained (make-before-break retired it), no job.
	PhaseDrained
	// PhaseDrainedBusy: drained, its last job still running.
	PhaseDrainedBusy
)

var phaseNames = map[Phase]string{
	PhaseNone: "no VM", PhaseWaiting: "waiting for capacity", PhaseBooting: "booting", PhaseIdle: "idle",
	PhaseBusy: "job running", PhaseDrained: "drained, idle", PhaseDrainedBusy: "drained, job ends",
}

func (p Phase) String() string { return phaseNames[p] }

// phaseColors colours the phases (PhaseNone is left blank).
var phaseColors = map[Phase]color.RGBA{
	PhaseWaiting:     {0xf4, 0xa2, 0x61, 0xff},
	PhaseBooting:     {0xe9, 0xc4, 0x6a, 0xff},
	PhaseIdle:        {0xa8, 0xda, 0xdc, 0xff},
	PhaseBusy:        {0x2a, 0x9d, 0x8f, 0xff},
	PhaseDrained:     {0xc3, 0xb6, 0xd9, 0xff},
	PhaseDrainedBusy: {0x6d, 0x59, 0x7a, 0xff},
}

var (
	belowColor  = color.RGBA{0xd6, 0x28, 0x28, 0xff}
	killColor   = color.RGBA{0xd6, 0x28, 0x28, 0xff}
	warmUpColor = color.RGBA{0xf0, 0xf0, 0xf0, 0xff}
)

// Timeline is a run's per-node phases, durations since the run's start.
type Timeline struct {
	Lanes []Lane
	// Kills are the job attempts killed (by an expiry or otherwise).
	Kills []Kill
	// Expiries are when VMs reached their max run duration.
	Expiries []time.Duration
	// BelowMin are the intervals with fewer usable nodes than
	// min_node_count (warm-up included).
	BelowMin []Interval
	// WindowStart and WindowEnd bound the measured period.
	WindowStart, WindowEnd time.Duration
}

// Lane is one node's phases, in time order, without PhaseNone.
type Lane struct {
	Node     string
	Segments []Segment
}

// Segment is one phase of one node.
type Segment struct {
	Start, End time.Duration
	Phase      Phase
}

// Kill is a job attempt killed on a node.
type Kill struct {
	Lane     int
	At       time.Duration
	ByExpiry bool
}

// Interval is a span of the run.
type Interval struct{ Start, End time.Duration }

// timeline accumulates segments during a run.
type timeline struct {
	lanes    [][]Segment
	kills    []Kill
	expiries []time.Duration
}

// add closes the slot's current phase at r.now and opens p.
func (t *timeline) add(r *runner, s *slot, p Phase) {
	if s.phase != PhaseNone && r.now.After(s.since) {
		t.lanes[s.index] = append(t.lanes[s.index], Segment{Start: s.since.Sub(r.start), End: r.now.Sub(r.start), Phase: s.phase})
	}
	s.phase, s.since = p, r.now
}

// close ends every open phase at the end of the run.
func (t *timeline) close(r *runner) {
	for _, s := range r.slots {
		t.add(r, s, PhaseNone)
	}
}

func (t *timeline) export(r *runner) Timeline {
	out := Timeline{Kills: t.kills, Expiries: t.expiries, WindowStart: r.winStart.Sub(r.start), WindowEnd: r.winEnd.Sub(r.start)}
	for i, segs := range t.lanes {
		out.Lanes = append(out.Lanes, Lane{Node: r.slots[i].name, Segments: segs})
	}
	for _, e := range r.meter.episodes {
		out.BelowMin = append(out.BelowMin, Interval{Start: e.Start, End: e.End})
	}
	return out
}

// lanesPlotter draws a Timeline: lane i at y = i, the below-minimum row at
// y = belowRow; x in unit (days or hours) since the start of the run.
type lanesPlotter struct {
	tl   Timeline
	unit time.Duration
}

const (
	belowRow   = -1.5
	laneHeight = 0.8
)

func (lp lanesPlotter) x(d time.Duration) float64 { return float64(d) / float64(lp.unit) }

// DataRange implements plot.DataRanger: the whole run, every lane.
func (lp lanesPlotter) DataRange() (xmin, xmax, ymin, ymax float64) {
	return 0, lp.x(lp.tl.WindowEnd), belowRow - 0.5, float64(len(lp.tl.Lanes)) - 0.5
}

// Plot implements plot.Plotter.
func (lp lanesPlotter) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	x := lp.x
	box := func(x0, x1, y0, y1 float64, clr color.Color) {
		pts := []vg.Point{{X: trX(x0), Y: trY(y0)}, {X: trX(x1), Y: trY(y0)}, {X: trX(x1), Y: trY(y1)}, {X: trX(x0), Y: trY(y1)}}
		c.FillPolygon(clr, c.ClipPolygonXY(pts))
	}
	box(0, x(lp.tl.WindowStart), belowRow-0.5, float64(len(lp.tl.Lanes))-0.5, warmUpColor)
	for i, l := range lp.tl.Lanes {
		y := float64(i)
		for _, s := range l.Segments {
			if clr, ok := phaseColors[s.Phase]; ok {
				box(x(s.Start), x(s.End), y-laneHeight/2, y+laneHeight/2, clr)
			}
		}
	}
	for _, b := range lp.tl.BelowMin {
		// Widen very short intervals to a visible width (0.6 pt).
		x0, x1 := trX(x(b.Start)), trX(x(b.End))
		if x1-x0 < 0.6 {
			x1 = x0 + 0.6
		}
		y0, y1 := trY(belowRow-laneHeight/2), trY(belowRow+laneHeight/2)
		c.FillPolygon(belowColor, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
	edge := draw.LineStyle{Color: color.Gray{0x60}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}
	if ws := x(lp.tl.WindowStart); ws >= p.X.Min && ws <= p.X.Max {
		c.StrokeLine2(edge, trX(ws), trY(belowRow-0.5), trX(ws), trY(float64(len(lp.tl.Lanes))-0.5))
	}
	kill := draw.GlyphStyle{Color: killColor, Radius: vg.Points(3.5), Shape: draw.CrossGlyph{}}
	for _, k := range lp.tl.Kills {
		c.DrawGlyph(kill, vg.Point{X: trX(x(k.At)), Y: trY(float64(k.Lane))})
	}
}

// sans is the typeface of the pictures.
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func setFonts(p *plot.Plot) {
	for _, s := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label} {
		size := s.Font.Size
		s.Font = font.From(sans, size)
	}
}

// TimeRange selects the part of the run a timeline shows, as durations
// since the start of the run; the zero value shows the whole run.
type TimeRange struct{ From, To time.Duration }

// panel is one result's plot over tr.
func panel(res *Result, tr TimeRange) *plot.Plot {
	p := plot.New()
	setFonts(p)
	p.Title.Text = fmt.Sprintf("%s — static availability %s (node-time %s), %d jobs killed by expiry, overlap %.1f node-h",
		res.Strategy.Name, pct(res.Availability), pct(res.NodeTimeAvailability), res.JobsKilled, res.Overlap.Hours())
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.Title.Padding = vg.Points(4)
	if tr.To <= tr.From {
		tr = TimeRange{0, res.Timeline.WindowEnd}
	}
	unit, unitName, step := 24*time.Hour, "days", 1.0
	if span := tr.To - tr.From; span <= 2*24*time.Hour {
		unit, unitName, step = time.Hour, "hours", math.Max(1, math.Ceil(span.Hours()/16))
	}
	p.X.Label.Text = unitName + " since the pool was created (× job killed)"
	if tr.From < res.Timeline.WindowStart {
		p.X.Label.Text = unitName + " since the pool was created (grey: warm-up, not measured; × job killed)"
	}
	p.X.Label.TextStyle.Font.Size = vg.Points(9)
	p.Y.Label.Text = "node"
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	lp := lanesPlotter{tl: res.Timeline, unit: unit}
	p.Add(lp)
	p.X.Min, p.X.Max = lp.x(tr.From), lp.x(tr.To)
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ts []plot.Tick
		for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
			ts = append(ts, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
		}
		return ts
	})
	ticks := []plot.Tick{{Value: belowRow, Label: "< min"}}
	for i := range res.Timeline.Lanes {
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: fmt.Sprint(i)})
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	p.Y.Tick.Label.Font.Size = vg.Points(7)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	return p
}

// Picture geometry.
const (
	pictureWidth = 11 * vg.Inch
	headerHeight = 0.45 * vg.Inch
	legendHeight = 0.4 * vg.Inch
)

// panelHeight grows with the number of lanes.
func panelHeight(lanes int) vg.Length {
	return vg.Points(90) + vg.Points(11)*vg.Length(lanes+2)
}

// WriteTimeline draws the results' timelines over tr (the zero TimeRange:
// the whole run), one panel per result stacked top to bottom under a
// title, with a legend, to path: SVG when path ends in .svg, PNG when it
// ends in .png.
func WriteTimeline(path, title string, results []*Result, tr TimeRange) error {
	if len(results) == 0 {
		return fmt.Errorf("no results to draw")
	}
	ph := panelHeight(len(results[0].Timeline.Lanes))
	h := headerHeight + legendHeight + ph*vg.Length(len(results))
	var cw vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		cw = vgsvg.New(pictureWidth, h)
	case ".png":
		cw = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(pictureWidth, h), vgimg.UseDPI(110))}
	default:
		return fmt.Errorf("timeline %s: want a .svg or .png file", path)
	}
	dc := draw.New(cw)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	hdr := text.Style{Color: color.Black, Font: font.From(sans, 12), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	dc.FillText(hdr, vg.Point{X: pictureWidth / 2, Y: h - vg.Points(6)}, title)

	for i, res := range results {
		top := h - headerHeight - ph*vg.Length(i)
		c := draw.Crop(dc, vg.Points(6), -vg.Points(12), top-ph-dc.Min.Y, top-dc.Max.Y)
		c.Max.Y -= vg.Points(6)
		panel(res, tr).Draw(c)
	}
	drawLegend(dc, legendHeight)

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := cw.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// drawLegend draws one row of colour keys along the bottom of dc.
func drawLegend(dc draw.Canvas, height vg.Length) {
	sty := text.Style{Color: color.Black, Font: font.From(sans, 9), XAlign: draw.XLeft, YAlign: draw.YCenter, Handler: plot.DefaultTextHandler}
	y := dc.Min.Y + height/2
	x := dc.Min.X + vg.Points(50)
	sw := vg.Points(14)
	key := func(clr color.Color, label string) {
		dc.FillPolygon(clr, []vg.Point{{X: x, Y: y - sw/2}, {X: x + sw, Y: y - sw/2}, {X: x + sw, Y: y + sw/2}, {X: x, Y: y + sw/2}})
		x += sw + vg.Points(4)
		dc.FillText(sty, vg.Point{X: x, Y: y}, label)
		// Room for a viewer's fallback font, wider than the one measured.
		x += sty.Width(label)*1.1 + vg.Points(16)
	}
	for _, p := range []Phase{PhaseWaiting, PhaseBooting, PhaseIdle, PhaseBusy, PhaseDrained, PhaseDrainedBusy} {
		key(phaseColors[p], p.String())
	}
	key(belowColor, "usable nodes < min")
	dc.DrawGlyph(draw.GlyphStyle{Color: killColor, Radius: vg.Points(4), Shape: draw.CrossGlyph{}}, vg.Point{X: x + sw/2, Y: y})
	x += sw + vg.Points(4)
	dc.FillText(sty, vg.Point{X: x, Y: y}, "job killed")
}

func pct(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }

// FirstExpiry is when the first VM of any of the results reached its max
// run duration in the measured period (since the start of the run), and
// false when none did.
func FirstExpiry(results []*Result) (time.Duration, bool) {
	first, ok := time.Duration(0), false
	for _, r := range results {
		for _, e := range r.Timeline.Expiries {
			if e >= r.Timeline.WindowStart && e < r.Timeline.WindowEnd && (!ok || e < first) {
				first, ok = e, true
			}
		}
	}
	return first, ok
}
