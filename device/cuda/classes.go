package cuda

import (
	"fmt"

	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/geo/classrule"
)

// Classes fills buf (w.W × w.H) by lulc's class rule, the same bytes as
// w.Apply: the window's source pixels and lattice go up, a thread a
// destination pixel maps its footprint and votes (class_rule), and the
// classes come down by the device's class stream, waited for beside the
// owner so that a worker, not the owner, waits. A window beside the
// source, and one whose lattice is not tame (where the host's and the
// device's integer conversions could differ), is applied on the host.
func (d *Device) Classes(w *classrule.Window, buf []uint8) error {
	if len(buf) != w.W*w.H {
		return fmt.Errorf("cuda classes: a buffer of %d pixels for a %d × %d grid", len(buf), w.W, w.H)
	}
	if w.Beside || !w.Tame() {
		w.Apply(buf)
		return nil
	}
	nx, ny := classrule.LatticeSize(w.W, w.H)
	if w.W <= 0 || w.H <= 0 || w.SW <= 0 || w.SH <= 0 || len(w.Src) != w.SW*w.SH || len(w.U) != nx*ny || len(w.V) != nx*ny {
		return fmt.Errorf("cuda classes: a %d × %d window of %d pixels with %d and %d lattice nodes for a %d × %d grid",
			w.SW, w.SH, len(w.Src), len(w.U), len(w.V), w.W, w.H)
	}
	lxs, fxs := classrule.Edges(w.W)
	lys, fys := classrule.Edges(w.H)
	mode, hasNoData := int32(0), int32(0)
	if w.Mode {
		mode = 1
	}
	if w.HasNoData {
		hasNoData = 1
	}
	if !d.opt.UntouchedOutputs {
		// Faulted in here, not by the copy down under the lock (as
		// CompositeMirrored's outputs).
		touchPages(buf)
	}
	// The class buffers are the pool's, in use until the classes are
	// down: one window at a time.
	d.classes.Lock()
	defer d.classes.Unlock()
	var out driver.Buffer
	err := d.Do(func() error {
		if d.classStream == 0 {
			if err := driver.CreateStream(&d.classStream); err != nil {
				return err
			}
		}
		s, p := d.classStream, d.Pool()
		var st driver.Staging
		get := func(name string, n int) uint64 { return st.Buf(p.Get(name, uint64(n))).Ptr }
		src, u, v := get("classes.src", len(w.Src)), get("classes.u", 8*len(w.U)), get("classes.v", 8*len(w.V))
		lx, fx, ly, fy := get("classes.lx", 4*len(lxs)), get("classes.fx", 8*len(fxs)), get("classes.ly", 4*len(lys)), get("classes.fy", 8*len(fys))
		out = st.Buf(p.Get("classes.out", uint64(len(buf))))
		if st.Err != nil {
			return st.Err
		}
		for _, err := range []error{driver.PutOn(src, w.Src, s), driver.PutOn(u, w.U, s), driver.PutOn(v, w.V, s),
			driver.PutOn(lx, lxs, s), driver.PutOn(fx, fxs, s), driver.PutOn(ly, lys, s), driver.PutOn(fy, fys, s)} {
			if err != nil {
				return err
			}
		}
		return d.LaunchAsync(s, "class_rule", int64(len(buf)), src, int32(w.SW), int32(w.SH), u, v, int32(nx), lx, fx, ly, fy,
			int32(w.W), int32(w.H), mode, int32(w.NoData), hasNoData, out.Ptr)
	})
	if err == nil {
		err = d.Beside(func() error { return driver.GetOn(buf, out, d.classStream) })
	}
	if err != nil {
		return fmt.Errorf("cuda classes of a %d × %d grid: %w", w.W, w.H, err)
	}
	return nil
}
