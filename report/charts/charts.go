// Package charts draws lulc's report pictures as PNG: with gonum/plot, the
// confusion matrix as a heat map, feature importance as bars and stacked
// bars of stage times; by hand, images of bands (RGB, gradients, masks
// highlighted), class maps in the scheme's colours and the quicklook, and
// their titled rows. Drawer hands the stages' drawings (confusion matrix,
// feature importance, quicklook) to stage.Options.Charts: the commands
// and the bench set it, and the stages import nothing of this package.
package charts

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// confusionGrid adapts a row-normalised confusion matrix to plotter.GridXYZ:
// x is the predicted class, y the reference class (top row first).
type confusionGrid struct{ m [][]float64 }

func (g confusionGrid) Dims() (c, r int)   { return len(g.m), len(g.m) }
func (g confusionGrid) Z(c, r int) float64 { return g.m[len(g.m)-1-r][c] }
func (g confusionGrid) X(c int) float64    { return float64(c) }
func (g confusionGrid) Y(r int) float64    { return float64(r) }

// Confusion writes a heat map of the confusion matrix, each reference row
// normalised to its recall shares, with a colour bar; the cells print the
// shares in %, or with counts the pixel counts.
func Confusion(path string, conf [][]int64, names []string, title string, counts bool) error {
	// Classes absent from both the reference and the predictions would
	// only add empty rows and columns: they are left out.
	conf, names = presentClasses(conf, names)
	k := len(conf)
	if k == 0 {
		return fmt.Errorf("chart %s: empty confusion matrix", path)
	}
	norm := make([][]float64, k)
	for a := range k {
		norm[a] = make([]float64, k)
		var row int64
		for _, v := range conf[a] {
			row += v
		}
		for b := range k {
			if row > 0 {
				norm[a][b] = float64(conf[a][b]) / float64(row)
			}
		}
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "predicted (each cell: % of its reference row)"
	if counts {
		p.X.Label.Text = "predicted (each cell: pixels)"
	}
	p.Y.Label.Text = "reference"
	pal := moreland.SmoothBlueRed()
	pal.SetMin(0)
	pal.SetMax(1)
	hm := plotter.NewHeatMap(confusionGrid{norm}, pal.Palette(64))
	hm.Min, hm.Max = 0, 1
	p.Add(hm)
	var labels plotter.XYLabels
	for a := range k {
		for b := range k {
			labels.XYs = append(labels.XYs, plotter.XY{X: float64(b), Y: float64(k - 1 - a)})
			text := fmt.Sprintf("%.0f", 100*norm[a][b])
			if counts {
				text = fmt.Sprint(conf[a][b])
			}
			labels.Labels = append(labels.Labels, text)
		}
	}
	if l, err := plotter.NewLabels(labels); err == nil {
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign, l.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
			l.TextStyle[i].Font.Size = vg.Points(7)
		}
		p.Add(l)
	}
	ticks := func(reverse bool) plot.ConstantTicks {
		var t plot.ConstantTicks
		for i, n := range names {
			pos := float64(i)
			if reverse {
				pos = float64(k - 1 - i)
			}
			t = append(t, plot.Tick{Value: pos, Label: n})
		}
		return t
	}
	p.X.Tick.Marker = ticks(false)
	p.Y.Tick.Marker = ticks(true)
	p.X.Tick.Label.Rotation = math.Pi / 4
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	// The colour bar, in its own plot to the right of the matrix.
	cb := plot.New()
	cb.Add(&plotter.ColorBar{ColorMap: pal, Vertical: true})
	cb.HideX()
	cb.Y.Label.Text = "% of reference row"
	cb.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "25"}, {Value: 0.5, Label: "50"}, {Value: 0.75, Label: "75"}, {Value: 1, Label: "100"}}
	size, bar := vg.Length(160+40*k), vg.Length(70)
	img := vgimg.New(size+bar, size)
	dc := draw.New(img)
	p.Draw(draw.Crop(dc, 0, -bar, 0, 0))
	// The bar spans the matrix's height, clear of its title and labels.
	cb.Draw(draw.Crop(dc, size+vg.Points(8), 0, size/4, -size/8))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

// presentClasses keeps the classes with a reference or a prediction.
func presentClasses(conf [][]int64, names []string) ([][]int64, []string) {
	var keep []int
	for a := range conf {
		var n int64
		for b := range conf {
			n += conf[a][b] + conf[b][a]
		}
		if n > 0 {
			keep = append(keep, a)
		}
	}
	out := make([][]int64, len(keep))
	var kept []string
	for i, a := range keep {
		out[i] = make([]int64, len(keep))
		for j, b := range keep {
			out[i][j] = conf[a][b]
		}
		if a < len(names) {
			kept = append(kept, names[a])
		}
	}
	return out, kept
}

// Importance writes a horizontal bar chart of feature importances.
func Importance(path string, names []string, values []float64, title string) error {
	if len(names) != len(values) || len(names) == 0 {
		return fmt.Errorf("chart %s: %d names for %d values", path, len(names), len(values))
	}
	// Largest at the top: bars go bottom to top, so in ascending order (a
	// stable sort keeps ties in feature order).
	order := make([]int, len(values))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return values[order[i]] < values[order[j]] })
	sn, sv := make([]string, len(order)), make([]float64, len(order))
	for i, o := range order {
		sn[i], sv[i] = names[o], values[o]
	}
	names, values = sn, sv
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "share of impurity decrease"
	bars, err := plotter.NewBarChart(plotter.Values(values), vg.Points(12))
	if err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{0x2b, 0x6c, 0xb0, 0xff}
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(names...)
	top := 0.0
	for _, v := range values {
		top = max(top, v)
	}
	p.X.Min, p.X.Max = 0, top*1.08 // room for the longest bar
	if err := p.Save(vg.Points(420), vg.Length(80+16*len(names)), path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}

// StackedBars writes one bar per group, stacked by series: values[s][g] is
// series s's value in group g.
func StackedBars(path string, groups, series []string, values [][]float64, title, unit string) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	colors := []color.RGBA{{0x2b, 0x6c, 0xb0, 0xff}, {0xe4, 0x96, 0x35, 0xff}, {0x39, 0x7d, 0x49, 0xff}, {0xc4, 0x28, 0x1b, 0xff}, {0x7a, 0x87, 0xc6, 0xff}}
	var below *plotter.BarChart
	for s, name := range series {
		bars, err := plotter.NewBarChart(plotter.Values(values[s]), vg.Points(40))
		if err != nil {
			return fmt.Errorf("chart %s: %w", path, err)
		}
		bars.Color = colors[s%len(colors)]
		bars.LineStyle.Width = 0
		if below != nil {
			bars.StackOn(below)
		}
		p.Add(bars)
		p.Legend.Add(name, bars)
		below = bars
	}
	p.Legend.Top = true
	p.NominalX(groups...)
	if err := p.Save(vg.Points(float64(200+90*len(groups))), vg.Points(320), path); err != nil {
		return fmt.Errorf("chart %s: %w", path, err)
	}
	return nil
}
