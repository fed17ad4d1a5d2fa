package pipeline

import (
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lulc/lulc/decode"
	"github.com/lulc/lulc/raster"
	"github.com/lulc/lulc/resample"
)

// aheadReaders is how many goroutines read compressed tiles ahead: the
// reads are byte copies (from the page cache or the network), not decoding.
const aheadReaders = 8

// decodeAhead reads the compressed tiles of a tile's windows a row of
// windows at a time, ahead of the windows, and has the device decode each
// row's tiles in one batch (cuda.DecodeAhead), which keeps them for the
// windows: one warp decodes one tile at a few MB/s, so the device is fast
// only with thousands of tiles in flight, far more than one window has.
// The windows take their rectangles from it (take) and find the decoded
// tiles on the device. It runs at most two rows ahead of the oldest row
// with windows still in progress, bounding the compressed bytes held.
type decodeAhead struct {
	job    *windowJob
	rows   [][]raster.Grid
	row    map[[2]float64]int // window origin → row
	ready  []chan struct{}    // closed when the row's tiles are decoded (or failed)
	left   []int              // windows of the row not yet finished
	stop   chan struct{}
	exited chan struct{} // closed when run returns

	mu       sync.Mutex
	finished *sync.Cond
	rects    map[aheadKey]aheadRect
	err      error // the first failure: windows then read for themselves
	srcs     map[string]*raster.Source
	readNs   int64 // reading the compressed tiles, summed over readers
}

type aheadKey struct {
	origin [2]float64
	href   string
}

type aheadRect struct {
	raw *decode.Rect
	c   *resample.Coarse
}

// newDecodeAhead starts reading ahead over windows (in the order the
// workers take them); close must be called when the windows are done.
func newDecodeAhead(j *windowJob, windows []raster.Grid) *decodeAhead {
	a := &decodeAhead{job: j, row: map[[2]float64]int{}, stop: make(chan struct{}),
		rects: map[aheadKey]aheadRect{}, srcs: map[string]*raster.Source{}, exited: make(chan struct{})}
	a.finished = sync.NewCond(&a.mu)
	for _, w := range windows {
		o := origin(w)
		if n := len(a.rows); n == 0 || w.Transform[3] != a.rows[n-1][0].Transform[3] {
			a.rows = append(a.rows, nil)
		}
		a.rows[len(a.rows)-1] = append(a.rows[len(a.rows)-1], w)
		a.row[o] = len(a.rows) - 1
	}
	a.ready = make([]chan struct{}, len(a.rows))
	a.left = make([]int, len(a.rows))
	for i, r := range a.rows {
		a.ready[i] = make(chan struct{})
		a.left[i] = len(r)
	}
	go a.run()
	return a
}

func origin(w raster.Grid) [2]float64 { return [2]float64{w.Transform[0], w.Transform[3]} }

// run reads and decodes row after row. Stopped, it releases the windows
// still waiting (they then read for themselves).
func (a *decodeAhead) run() {
	defer close(a.exited)
	i := 0
	for ; i < len(a.rows); i++ {
		if i >= 2 && !a.waitRow(i-2) {
			break
		}
		if a.failed() == nil {
			if err := a.readRow(a.rows[i]); err != nil {
				a.fail(err)
			}
		}
		close(a.ready[i])
	}
	for ; i < len(a.rows); i++ {
		close(a.ready[i])
	}
}

// waitRow waits until every window of row i has finished, or the reader
// is stopped (false).
func (a *decodeAhead) waitRow(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.left[i] > 0 {
		select {
		case <-a.stop:
			return false
		default:
		}
		a.finished.Wait()
	}
	return true
}

// readRow reads the rectangles of every band of every date over the
// row's windows, then decodes their tiles on the device.
func (a *decodeAhead) readRow(row []raster.Grid) error {
	type job struct {
		w    raster.Grid
		href string
	}
	var jobs []job
	for _, w := range row {
		for _, d := range a.job.dates {
			for _, b := range d.bands {
				jobs = append(jobs, job{w, b.Href})
			}
		}
	}
	got := make([]aheadRect, len(jobs))
	var g errgroup.Group
	g.SetLimit(aheadReaders)
	for i, jb := range jobs {
		g.Go(func() error {
			t := time.Now()
			defer func() {
				a.mu.Lock()
				a.readNs += int64(time.Since(t))
				a.mu.Unlock()
			}()
			s, l, err := a.source(jb.href)
			if err != nil || l == nil {
				return err
			}
			raw, c, err := s.RawWindow(jb.w, l, a.job.cfg.Resampling.Reflectance == "bilinear")
			got[i] = aheadRect{raw, c}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	var rects []*decode.Rect
	for _, r := range got {
		if r.raw != nil {
			rects = append(rects, r.raw)
		}
	}
	if err := a.job.engine.decodeAhead(rects); err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, jb := range jobs {
		if got[i].raw != nil {
			a.rects[aheadKey{origin(jb.w), jb.href}] = got[i]
		}
	}
	return nil
}

// source returns the band's source (its geometry only: safe to share
// between readers, which read bytes through the layout) and its layout,
// nil when the engine does not decode it.
func (a *decodeAhead) source(href string) (*raster.Source, *raster.TileLayout, error) {
	a.mu.Lock()
	s, ok := a.srcs[href]
	a.mu.Unlock()
	if !ok {
		epsg, _ := a.job.crs.Load(href)
		e, _ := epsg.(int)
		var err error
		if s, err = raster.OpenKnownCRS(href, e); err != nil {
			return nil, nil, err
		}
		a.job.crs.Store(href, s.EPSG)
		a.mu.Lock()
		if old, ok := a.srcs[href]; ok {
			s.Close()
			s = old
		} else {
			a.srcs[href] = s
		}
		a.mu.Unlock()
	}
	return s, a.job.layout(s), nil
}

// take returns window w's rectangle of href, read and decoded ahead, and
// the band's source (for its geometry and nodata), waiting for its row; ok
// is false when the window must read it itself.
func (a *decodeAhead) take(w raster.Grid, href string) (*raster.Source, *decode.Rect, *resample.Coarse, bool) {
	o := origin(w)
	i, ok := a.row[o]
	if !ok {
		return nil, nil, nil, false
	}
	<-a.ready[i]
	a.mu.Lock()
	defer a.mu.Unlock()
	k := aheadKey{o, href}
	r, ok := a.rects[k]
	delete(a.rects, k)
	return a.srcs[href], r.raw, r.c, ok
}

// done records that window w has finished.
func (a *decodeAhead) done(w raster.Grid) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, ok := a.row[origin(w)]; ok {
		a.left[i]--
		a.finished.Broadcast()
	}
}

func (a *decodeAhead) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
		a.job.log.Warn("reading tiles ahead failed; windows read their own", "err", err)
	}
}

func (a *decodeAhead) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// close stops the reader and releases its sources; it returns how long
// the readers spent reading.
func (a *decodeAhead) close() time.Duration {
	close(a.stop)
	a.mu.Lock()
	a.finished.Broadcast()
	a.mu.Unlock()
	<-a.exited // the sources may be in use until then
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.srcs {
		s.Close()
	}
	return time.Duration(a.readNs)
}
