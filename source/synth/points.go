package synth

import (
	"container/heap"
	"slices"

	"github.com/lulc/lulc/geo/raster"
)

// Labelled points (Config.LabelPoints), as field data come: the label
// map sampled at points. A point is the centre of a label pixel whose
// centre lies inside the scene, in longitude and latitude, with that
// pixel's class (label noise included, as a surveyor's mistakes would
// be). The pixels are the LabelPoints with the smallest seeded hashes of
// their (row, column): a uniform sample without replacement that depends
// only on the seed and the label grid. Points are numbered (their FID) in
// the order of their hashes.

// PointsLayer and PointsField name the point layer and its class-code
// attribute in the GeoPackage that synth writes beside the label map.
const (
	PointsLayer = "points"
	PointsField = "class"
)

// pointsFile is the point layer's file name beside the label map.
func pointsFile(wcID string) string { return wcID + "_points.gpkg" }

// labelPoints samples cfg.LabelPoints points from the label raster.
func (s *scene) labelPoints(g *geometry, labels []uint8) []raster.LabelPoint {
	return s.samplePoints(g, labels, s.cfg.LabelPoints)
}

// samplePoints samples n points from the label raster.
func (s *scene) samplePoints(g *geometry, labels []uint8, n int) []raster.LabelPoint {
	if n <= 0 {
		return nil
	}
	w, h := g.label.Width, g.label.Height
	ext := float64(s.cfg.Size) * 10
	// The n smallest hashes seen so far, the largest on top.
	var top pixelHeap
	for row := range h {
		for col := range w {
			key := hash2(s.seed+seedPoints, int64(row), int64(col))
			if len(top) == n && key >= top[0].key {
				continue
			}
			if u, v := g.labelUVAt(row, col); u < 0 || v < 0 || u >= ext || v >= ext || labels[row*w+col] == 0 {
				continue
			}
			if len(top) == n {
				heap.Pop(&top)
			}
			heap.Push(&top, keyedPixel{key, row*w + col})
		}
	}
	slices.SortFunc(top, func(a, b keyedPixel) int {
		if a.key < b.key {
			return -1
		}
		if a.key > b.key {
			return 1
		}
		return a.i - b.i
	})
	t := g.label.Transform
	pts := make([]raster.LabelPoint, len(top))
	for j, p := range top {
		row, col := p.i/w, p.i%w
		pts[j] = raster.LabelPoint{X: t[0] + (float64(col)+0.5)*t[1], Y: t[3] + (float64(row)+0.5)*t[5], Class: labels[p.i]}
	}
	return pts
}

// keyedPixel is a label pixel (its index) and its hash.
type keyedPixel struct {
	key uint64
	i   int
}

// pixelHeap is a max-heap of keyed pixels by (key, index).
type pixelHeap []keyedPixel

func (h pixelHeap) Len() int { return len(h) }
func (h pixelHeap) Less(a, b int) bool {
	return h[a].key > h[b].key || h[a].key == h[b].key && h[a].i > h[b].i
}
func (h pixelHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pixelHeap) Push(x any)   { *h = append(*h, x.(keyedPixel)) }
func (h *pixelHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
