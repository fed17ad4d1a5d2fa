package raster

import (
	"fmt"
	"math"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/classrule"
	"github.com/lulc/lulc/internal/netwait"
)

// Class rasters (labels) onto another grid take lulc's own rule
// (package classrule) rather than GDAL's warper: this file reads what the
// rule needs, the source window every footprint lies in and the corner
// lattice, exactly mapped by PROJ at its nodes.

// ClassWindow reads what lulc's class rule needs to map the source's band
// 1 onto dst with alg ("nearest" or "mode"): ok is false, and nothing is
// read, when Read would not take the rule (dst nested in the source, or
// another resampling), and Read is then the way.
func (s *Source) ClassWindow(dst geo.Grid, alg string) (w *classrule.Window, ok bool, err error) {
	if alg != "nearest" && alg != "mode" {
		return nil, false, nil
	}
	if _, _, _, _, nested := s.nested(dst); nested {
		return nil, false, nil
	}
	defer netwait.Track(s.Href)()
	w, err = s.readClassWindow(dst, alg)
	return w, err == nil, err
}

// readClassWindow reads the window and lays out the lattice for dst.
func (s *Source) readClassWindow(dst geo.Grid, alg string) (*classrule.Window, error) {
	cw := &classrule.Window{W: dst.Width, H: dst.Height, Mode: alg != "nearest"}
	cw.HasNoData = s.NoData != nil
	if cw.HasNoData {
		cw.NoData = uint8(*s.NoData)
	}
	// A window far beside the source (one of a tile's other label
	// rasters) needs only the lattice's rim to say so.
	if far, err := s.farBeside(dst); err != nil || far {
		cw.Beside = far
		return cw, err
	}
	u, v, err := s.cornerLattice(dst)
	if err != nil {
		return nil, err
	}
	// The source window every footprint lies in: the lattice's hull
	// (bilinear interpolation stays inside it), one pixel wider, clamped.
	x0, y0, x1, y1 := s.reach(u, v, 1)
	if x0 >= x1 || y0 >= y1 {
		cw.Beside = true
		return cw, nil
	}
	cw.SW, cw.SH = x1-x0, y1-y0
	cw.Src = make([]uint8, cw.SW*cw.SH)
	if err := s.ds.Bands()[0].Read(x0, y0, cw.Src, cw.SW, cw.SH); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Href, err)
	}
	// Columns and rows from here on are relative to the window.
	for k := range u {
		u[k] -= float64(x0)
		v[k] -= float64(y0)
	}
	cw.U, cw.V = u, v
	return cw, nil
}

// reprojectClasses fills buf with the source's band 1 on dst by the rule;
// alg is "nearest" or "mode".
func (s *Source) reprojectClasses(dst geo.Grid, alg string, buf []uint8) error {
	cw, err := s.readClassWindow(dst, alg)
	if err != nil {
		return err
	}
	cw.Apply(buf)
	return nil
}

// farBeside says whether dst lies beside the source by more than
// farMargin source pixels beyond the reach readClassWindow gives the
// lattice's hull, judged from the lattice's rim alone (its nodes on
// dst's edges, the same positions and so the same values as the whole
// lattice's): interior nodes of a smooth map stray from the rim's hull by
// a small part of a pixel (the bow of a projected 10 km edge is a few
// metres), so a window far beside by the rim is beside by the whole
// lattice, and reads nothing.
func (s *Source) farBeside(dst geo.Grid) (bool, error) {
	nx, ny := latticeSize(dst)
	var u, v []float64
	node := func(i, j int) {
		x, y := latticeNode(dst, i, j)
		u, v = append(u, x), append(v, y)
	}
	for i := range nx {
		node(i, 0)
		node(i, ny-1)
	}
	for j := 1; j < ny-1; j++ {
		node(0, j)
		node(nx-1, j)
	}
	if err := s.toPixels(dst.EPSG, u, v); err != nil {
		return false, err
	}
	// A node PROJ could not map (NaN) leaves the question to the whole
	// lattice.
	for k := range u {
		if u[k] != u[k] || v[k] != v[k] {
			return false, nil
		}
	}
	const farMargin = 2
	x0, y0, x1, y1 := s.reach(u, v, 1+farMargin)
	return x0 >= x1 || y0 >= y1, nil
}

// reach is the source window, clamped to the source, that the hull of
// the points u, v (source pixels) reaches, margin pixels wider.
func (s *Source) reach(u, v []float64, margin int) (x0, y0, x1, y1 int) {
	umin, umax, vmin, vmax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i := range u {
		umin, umax = min(umin, u[i]), max(umax, u[i])
		vmin, vmax = min(vmin, v[i]), max(vmax, v[i])
	}
	x0, y0 = max(0, int(math.Floor(umin))-margin), max(0, int(math.Floor(vmin))-margin)
	x1, y1 = min(s.Width, int(math.Ceil(umax))+margin), min(s.Height, int(math.Ceil(vmax))+margin)
	return x0, y0, x1, y1
}

// cornerLattice maps the lattice of dst's pixel corners (every
// classrule.Step pixels, and the last edge) into the source's pixel space:
// u (columns) and v (rows), row-major, ceil(W/step)+1 nodes a row.
func (s *Source) cornerLattice(dst geo.Grid) (u, v []float64, err error) {
	nx, ny := latticeSize(dst)
	u, v = make([]float64, nx*ny), make([]float64, nx*ny)
	for j := range ny {
		for i := range nx {
			u[j*nx+i], v[j*nx+i] = latticeNode(dst, i, j)
		}
	}
	if err := s.toPixels(dst.EPSG, u, v); err != nil {
		return nil, nil, err
	}
	return u, v, nil
}

// latticeSize is the lattice's nodes a row and a column for dst.
func latticeSize(dst geo.Grid) (nx, ny int) {
	return classrule.LatticeSize(dst.Width, dst.Height)
}

// latticeNode is node (i, j) of dst's lattice in dst's CRS.
func latticeNode(dst geo.Grid, i, j int) (x, y float64) {
	px := float64(min(i*classrule.Step, dst.Width))
	py := float64(min(j*classrule.Step, dst.Height))
	return dst.Transform[0] + px*dst.Transform[1], dst.Transform[3] + py*dst.Transform[5]
}

// toPixels maps points of EPSG:epsg, in place, into the source's pixel
// space (columns u, rows v).
func (s *Source) toPixels(epsg int, u, v []float64) error {
	if epsg != s.EPSG {
		t, err := s.transformerTo(epsg)
		if err != nil {
			return err
		}
		if err := t.Transform(u, v); err != nil {
			return fmt.Errorf("read %s onto EPSG:%d: %w", s.Href, epsg, err)
		}
	}
	for k := range u {
		u[k] = (u[k] - s.Transform[0]) / s.Transform[1]
		v[k] = (v[k] - s.Transform[3]) / s.Transform[5]
	}
	return nil
}

// transformerTo returns the source's transformer from EPSG:epsg into its
// own CRS, made on first use and kept with the source (a source serves
// one goroutine).
func (s *Source) transformerTo(epsg int) (*Transformer, error) {
	if s.toSource != nil && s.toSourceFrom == epsg {
		return s.toSource, nil
	}
	if s.toSource != nil {
		s.toSource.Close()
		s.toSource = nil
	}
	t, err := NewTransformer(epsg, s.EPSG)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.Href, err)
	}
	s.toSource, s.toSourceFrom = t, epsg
	return t, nil
}

// classRule says whether Read takes lulc's own rule for buf and alg.
func classRule(buf any, alg string) bool {
	_, u8 := buf.([]uint8)
	return u8 && (alg == "nearest" || alg == "mode")
}
