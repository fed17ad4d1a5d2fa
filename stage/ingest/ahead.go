package ingest

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/geo/resample"
	"github.com/lulc/lulc/internal/meminfo"
)

// aheadReaders is how many goroutines read compressed tiles ahead: the
// reads are byte copies (from the page cache or the network), not decoding.
const aheadReaders = 8

// aheadRows is how many rows of windows the reader runs ahead of the
// oldest row with windows still in progress. With two, the reader and the
// windows waited for each other for about 3 s of a 12-date tile's 7 s of
// windows; with three, 1.4–1.7 s, and the windows ended 1.0–1.4 s sooner
// (four gained nothing more while the reader was the bottleneck). Once
// rows crossed to the device through pinned staging and were planned
// while the row before was read, the reader waited 2.1–2.9 s for the
// windows with three, and four made the ingest 0.26 s faster in the
// median (five was slower; docs/benchmarks.md, issue 15). A row holds
// its compressed bytes on the host until the device holds them (or, on
// the CPU, until its windows are done): aheadBudget bounds them; the
// device's copies, engine.aheadDeviceBudget.
const aheadRows = 4

// aheadBudget is how many bytes of compressed tiles the rows in progress
// may hold on the host before the reader waits for them to be handed to
// the device or for their windows (it always reads one row when none is
// in progress): a quarter of the memory available, at
// least 2 GiB (8 GiB where unknown), and at most a quarter of the Go
// heap's limit (lulc run sets it from memory_gb). A 12-date full tile's
// row holds about 1.3 GB; a year of scenes', several times that. Held
// beyond the heap's limit, rows of a 24-date tile kept the collector
// running without pause (measured: docs/benchmarks.md, "A year of
// dates").
func aheadBudget(set int64) int64 {
	if set > 0 {
		return set
	}
	budget := int64(8 << 30)
	if avail := meminfo.Available(); avail > 0 {
		budget = max(2<<30, int64(avail/4))
	}
	if limit := heapLimit(); limit > 0 {
		budget = min(budget, max(1<<30, limit/4))
	}
	return budget
}

// DecodeAhead reads the compressed tiles of a tile's windows a row of
// windows at a time, ahead of the windows, and has the device decode each
// row's tiles in one batch (cuda.DecodeAhead), which keeps them for the
// windows: one warp decodes one tile at a few MB/s, so the device is fast
// only with thousands of tiles in flight, far more than one window has.
// The windows take their rectangles from it (take) and find the decoded
// tiles on the device. On the CPU (bands read over a network) the device's
// steps do nothing and each window decodes its rectangles from the row's
// bytes: reading ahead is what hides the ranges' round trips. It runs at
// most aheadRows rows ahead of the oldest row with windows still in
// progress, bounding the compressed bytes held.
type DecodeAhead struct {
	job    *windowJob
	rows   [][]geo.Grid
	row    map[[2]float64]int // window origin → row
	ready  []chan struct{}    // closed when the row's tiles are decoded (or failed)
	Left   []int              // windows of the row not yet finished
	stop   chan struct{}
	exited chan struct{} // closed when run returns

	mu       sync.Mutex
	finished *sync.Cond
	rects    map[aheadKey]aheadRect
	err      error // the first failure: windows then read for themselves
	srcs     map[string]*raster.Source
	readNs   int64 // reading the compressed tiles, summed over readers
	// Where the reader's and the windows' time goes (logged at close):
	// fetching rows (wall: planning, laying out, reading), the device's
	// decoding (wall), the reader held back by earlier rows, and windows
	// waiting for their row (summed over windows).
	fetchNs, decodeNs, heldNs, waitNs int64
	planNs                            int64 // of fetchNs, planning and laying out (wall)
	// The bytes of the tiles read for the previous row and for this one
	// (the reader's own): a coarse band's halo reaches one row back.
	prevBytes, rowBytes map[string]rowTile
	// budget bounds the compressed bytes of the rows in progress on the
	// host; deviceBudget, those the device holds for the windows (rows
	// handed over). fetched holds each row's, once planned.
	budget, deviceBudget int64
	fetched              []int64
	// A row is handed over once the device holds its compressed tiles:
	// the host's copy is gone, and the windows pass cuda.Held for them.
	// The device keeps a row's batch until every row whose windows use
	// its tiles (itself, and those reaching back into it, up to lastUse)
	// is done; planned counts the rows laid out so far.
	handed   []bool
	batches  []*cuda.AheadBatch
	lastUse  []int
	released []bool
	planned  int
	spare    map[decode.Format][]byte // a handed-over row's buffer, for the next (buffer)
	maxRows  int                      // the most rows in progress at once, row i counted as it is read
	narrow   bool                     // logged that rows are too large to read ahead
}

// rowTile is a tile's bytes as a row's rectangles take them (cuda.Held
// once the device holds them) and the row that read them.
type rowTile struct {
	b   []byte
	row int
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
func newDecodeAhead(j *windowJob, windows []geo.Grid) *DecodeAhead {
	a := &DecodeAhead{job: j, row: map[[2]float64]int{}, stop: make(chan struct{}),
		rects: map[aheadKey]aheadRect{}, srcs: map[string]*raster.Source{}, prevBytes: map[string]rowTile{}, rowBytes: map[string]rowTile{}, spare: map[decode.Format][]byte{}, exited: make(chan struct{})}
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
	a.Left = make([]int, len(a.rows))
	a.fetched = make([]int64, len(a.rows))
	a.handed, a.released = make([]bool, len(a.rows)), make([]bool, len(a.rows))
	a.batches, a.lastUse = make([]*cuda.AheadBatch, len(a.rows)), make([]int, len(a.rows))
	a.budget, a.deviceBudget = aheadBudget(j.hooks.AheadBudget), j.engine.AheadDeviceBudget()
	for i, r := range a.rows {
		a.ready[i] = make(chan struct{})
		a.Left[i] = len(r)
		a.lastUse[i] = i
	}
	go a.run()
	return a
}

func origin(w geo.Grid) [2]float64 { return [2]float64{w.Transform[0], w.Transform[3]} }

// run reads row after row and has the device decode each row while the
// next is read, in three stages: a planner goroutine lays out the rows'
// tiles, a reader goroutine reads each planned row's tiles (while the
// next row is planned), and this one has the device decode them and
// releases their windows, in order. Stopped, it releases the windows
// still waiting (they then read for themselves).
func (a *DecodeAhead) run() {
	defer close(a.exited)
	planned := make(chan *fetchedRow, 1)
	var planner sync.WaitGroup
	planner.Go(func() {
		defer close(planned)
		for i := range a.rows {
			t := time.Now()
			if i >= aheadRows && !a.waitRow(i-aheadRows) || !a.waitBytes(i) {
				return
			}
			a.mu.Lock()
			a.heldNs += int64(time.Since(t))
			a.mu.Unlock()
			f := &fetchedRow{i: i}
			if a.failed() == nil {
				f.err = a.planRow(f, a.rows[i])
			}
			select {
			case planned <- f:
			case <-a.stop:
				return
			}
		}
	})
	rows := make(chan *fetchedRow, 1)
	go func() {
		defer close(rows)
		for f := range planned {
			if f.err == nil && a.failed() == nil {
				f.err = a.readRow(f)
			}
			select {
			case rows <- f:
			case <-a.stop:
				return
			}
		}
	}()
	next := 0
	for f := range rows {
		// After a failure no row is decoded or stored: a row planned
		// before it may point into buffers never read (the row that failed,
		// or tiles it shares with the row before), so its windows read
		// for themselves.
		if f.err == nil && f.batch != nil && a.failed() == nil {
			t := time.Now()
			f.err = a.job.engine.DecodeAhead(f.batch)
			a.mu.Lock()
			a.decodeNs += int64(time.Since(t))
			a.mu.Unlock()
		}
		if f.err != nil {
			a.fail(f.err)
		} else if f.batch != nil && a.failed() == nil {
			a.store(f)
		}
		// The row's host buffers go with f: the readers' destinations and,
		// once the device holds them, the batch's bytes, whose buffers the
		// next rows reuse.
		if f.batch != nil && f.batch.Held() && a.failed() == nil {
			a.recycle(f.bufs)
		}
		f.reads, f.jobs, f.got, f.bufs = nil, nil, nil, nil
		close(a.ready[f.i])
		next = f.i + 1
	}
	for ; next < len(a.rows); next++ {
		close(a.ready[next])
	}
	// The planner may still be planning a row (opening sources) after a
	// stop: close must not release the sources before it is done.
	planner.Wait()
}

// fetchedRow is a row laid out (its reads, the batch of its new tiles),
// then read, waiting for the device: each window's band and its
// rectangle. Once a row has failed, later rows are not read, and run
// uses none of them.
type fetchedRow struct {
	i     int
	jobs  []aheadJob
	got   []aheadRect
	reads []*fileReads
	batch *cuda.AheadBatch
	bufs  map[decode.Format][]byte // the row's compressed tiles, by format
	err   error
}

type aheadJob struct {
	w    geo.Grid
	href string
}

// waitRow waits until every window of row i has finished, or the reader
// is stopped (false).
func (a *DecodeAhead) waitRow(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.Left[i] > 0 {
		select {
		case <-a.stop:
			return false
		default:
		}
		a.finished.Wait()
	}
	return true
}

// waitBytes waits until the rows in progress hold few enough compressed
// bytes that row i, expected to be as large as the row before it, fits
// beside them: on the host (rows read, not yet handed to the device, or,
// on the CPU, their windows not all done) and on the device (rows handed
// over, not yet released); or until none is in progress. False when the
// reader is stopped.
func (a *DecodeAhead) waitBytes(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		var host, device, next int64
		busy := 0
		for j := range i {
			if a.Left[j] > 0 {
				busy++
			}
			switch {
			case a.handed[j] && !a.released[j]:
				device += a.fetched[j]
			case !a.handed[j] && a.Left[j] > 0:
				host += a.fetched[j]
			}
		}
		if i > 0 {
			next = a.fetched[i-1]
		}
		// A row is read whenever none is on the host (the device holds
		// those before it, or none is in progress), however large.
		hostOK := host == 0 || host+next <= a.budget
		deviceOK := device == 0 || device+next <= a.deviceBudget
		if busy == 0 || hostOK && deviceOK {
			a.maxRows = max(a.maxRows, busy+1) // row i too
			return true
		}
		if !hostOK && !a.narrow {
			// Once: reading waits for the windows because the host's
			// budget, which follows the heap's limit, is full.
			a.narrow = true
			a.job.log.Info("read ahead: the rows read fill the host's budget, so the next row waits for the windows; raise memory_gb to read further ahead",
				"row_bytes", next, "held_bytes", host, "budget_bytes", a.budget)
		}
		select {
		case <-a.stop:
			return false
		default:
		}
		a.finished.Wait()
	}
}

// planRow plans the rectangles of every band of every date over the
// row's windows and lays out each tile not read for the row before (the
// halo of coarse bands reaches into the previous row's tiles) once, in one
// buffer per tile format laid out for the device, for readRow.
func (a *DecodeAhead) planRow(f *fetchedRow, row []geo.Grid) error {
	start := time.Now()
	defer func() {
		a.mu.Lock()
		a.fetchNs += int64(time.Since(start))
		a.planNs += int64(time.Since(start))
		a.mu.Unlock()
	}()
	for _, w := range row {
		for _, d := range a.job.dates {
			for _, b := range d.bands {
				f.jobs = append(f.jobs, aheadJob{w, b.Href})
			}
		}
	}
	f.got = make([]aheadRect, len(f.jobs))
	layouts := make([]*raster.TileLayout, len(f.jobs))
	var g errgroup.Group
	g.SetLimit(aheadReaders)
	for i, jb := range f.jobs {
		g.Go(func() error {
			s, l, err := a.source(jb.href)
			if err != nil || l == nil {
				return err
			}
			raw, c, err := s.RawWindowPlan(jb.w, l, a.job.cfg.Resampling.Reflectance == "bilinear")
			f.got[i], layouts[i] = aheadRect{raw, c}, l
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	reads, batch, bufs, err := a.layOut(f.i, f.got, layouts)
	if err != nil {
		return err
	}
	f.bufs = bufs
	a.mu.Lock()
	a.fetched[f.i] = batch.Bytes()
	a.mu.Unlock()
	f.reads, f.batch = reads, batch
	return nil
}

// readRow reads a planned row's tiles into their places.
func (a *DecodeAhead) readRow(f *fetchedRow) error {
	if f.i == a.job.hooks.AheadFail-1 {
		return fmt.Errorf("row %d: a read failed (test)", f.i)
	}
	start := time.Now()
	defer func() {
		a.mu.Lock()
		a.fetchNs += int64(time.Since(start))
		a.mu.Unlock()
	}()
	var g errgroup.Group
	g.SetLimit(aheadReaders)
	for _, rd := range f.reads {
		g.Go(func() error {
			t := time.Now()
			err := raster.ReadRangesInto(rd.path, rd.offs, rd.sizes, rd.dst)
			a.mu.Lock()
			a.readNs += int64(time.Since(t))
			a.mu.Unlock()
			return err
		})
	}
	return g.Wait()
}

// buffer returns a buffer of n bytes for a row's tiles of format f: the
// spare one of a row handed over when it is large enough, else a new one
// with a sixteenth to spare, so that the next rows (about as large) fit.
// Reusing it saves the zeroing and page faults of a fresh one: 10 s of
// the planner's time over a 48-date tile's rows of 7 GB (docs/benchmarks.md,
// "A year of dates"). The bytes between tiles are not zeroed: the decoder
// reads none past a tile's size.
func (a *DecodeAhead) buffer(f decode.Format, n uint64) []byte {
	a.mu.Lock()
	b := a.spare[f]
	delete(a.spare, f)
	a.mu.Unlock()
	if uint64(cap(b)) >= n {
		return b[:n]
	}
	b = nil // let the collector have it before the larger one is made
	return make([]byte, n, n+n/16)
}

// recycle keeps a handed-over row's buffers for the next rows: one a
// format, the largest.
func (a *DecodeAhead) recycle(bufs map[decode.Format][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for f, b := range bufs {
		if cap(b) > cap(a.spare[f]) {
			a.spare[f] = b
		}
	}
}

// store makes a decoded row's rectangles available to its windows, and
// keeps its batch for release when the device holds its tiles.
func (a *DecodeAhead) store(f *fetchedRow) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.batches[f.i] = f.batch
	a.handed[f.i] = f.batch.Held()
	a.finished.Broadcast() // the host's budget has room again
	for i, jb := range f.jobs {
		if f.got[i].raw != nil {
			a.rects[aheadKey{origin(jb.w), jb.href}] = f.got[i]
		}
	}
}

// fileReads is what one reader reads from one file: ranges into buffers.
type fileReads struct {
	path        string
	offs, sizes []uint64
	dst         [][]byte
}

// layOut gives every tile of the rectangles its bytes: those read for the
// previous row again, the others a place in this row's buffer of their
// format (each once), listed by file for the readers; and the batch of the
// new ones for the device.
func (a *DecodeAhead) layOut(row int, rects []aheadRect, layouts []*raster.TileLayout) ([]*fileReads, *cuda.AheadBatch, map[decode.Format][]byte, error) {
	var uses []int // the earlier rows whose tiles this one takes
	// A tile's place in its format's buffer, and the reader that fills it.
	type place struct {
		f    decode.Format
		at   uint64
		size uint32
		fr   *fileReads
		k    int // its range in fr
	}
	places := map[string]*place{}
	end := map[decode.Format]uint64{}
	var formats []decode.Format
	type tileRef struct {
		r   *decode.Rect
		i   int
		key string
	}
	var refs []tileRef
	byFile := map[string]*fileReads{}
	var reads []*fileReads
	keys := map[decode.Format][]string{}
	offs := map[decode.Format][]uint64{}
	sizes := map[decode.Format][]uint32{}
	for k, ar := range rects {
		r, l := ar.raw, layouts[k]
		if r == nil {
			continue
		}
		for j := range r.TH {
			for i := range r.TW {
				t := r.Tile(i, j)
				if l.Sizes[t] == 0 {
					continue
				}
				key := cuda.TileKey(r, i, j)
				if b, ok := a.prevBytes[key]; ok {
					r.Tiles[j*r.TW+i] = b.b
					a.rowBytes[key] = b
					uses = append(uses, b.row)
					continue
				}
				refs = append(refs, tileRef{r, j*r.TW + i, key})
				if _, ok := places[key]; ok {
					continue
				}
				f := r.Format
				if _, ok := end[f]; !ok {
					formats = append(formats, f)
				}
				fr := byFile[l.Path]
				if fr == nil {
					fr = &fileReads{path: l.Path}
					byFile[l.Path] = fr
					reads = append(reads, fr)
				}
				p := &place{f, end[f], uint32(l.Sizes[t]), fr, len(fr.offs)}
				places[key] = p
				end[f] += (l.Sizes[t] + 3) &^ 3
				keys[f], offs[f], sizes[f] = append(keys[f], key), append(offs[f], p.at), append(sizes[f], p.size)
				fr.offs, fr.sizes = append(fr.offs, l.Offsets[t]), append(fr.sizes, l.Sizes[t])
			}
		}
	}
	bufs := map[decode.Format][]byte{}
	for _, f := range formats {
		bufs[f] = a.buffer(f, end[f]+8)
	}
	for _, fr := range reads {
		fr.dst = make([][]byte, len(fr.offs))
	}
	for key, p := range places {
		b := bufs[p.f][p.at : p.at+uint64(p.size) : p.at+uint64(p.size)]
		p.fr.dst[p.k] = b
		if a.job.engine.HoldsAheadFormat(p.f) {
			// The device will hold the tile: the rectangles (and the next
			// row's) never point into the host's buffer, which goes once
			// the row is handed over.
			b = cuda.Held
		}
		a.rowBytes[key] = rowTile{b, row}
	}
	for _, ref := range refs {
		ref.r.Tiles[ref.i] = a.rowBytes[ref.key].b
	}
	a.mu.Lock()
	for _, u := range uses {
		a.lastUse[u] = max(a.lastUse[u], row)
	}
	a.planned = row + 1
	free := a.releasable(false)
	a.mu.Unlock()
	for _, b := range free {
		a.job.engine.ReleaseAhead(b)
	}
	batch := cuda.NewAheadBatch()
	for _, f := range formats {
		if err := batch.Add(f, bufs[f], offs[f], sizes[f], keys[f]); err != nil {
			return nil, nil, nil, err
		}
	}
	// Tiles read for this row may serve the next one; older ones not.
	a.prevBytes, a.rowBytes = a.rowBytes, map[string]rowTile{}
	return reads, batch, bufs, nil
}

// source returns the band's source (its geometry only: safe to share
// between readers, which read bytes through the layout) and its layout,
// nil when the engine does not decode it.
func (a *DecodeAhead) source(href string) (*raster.Source, *raster.TileLayout, error) {
	a.mu.Lock()
	s, ok := a.srcs[href]
	a.mu.Unlock()
	if !ok {
		var err error
		if s, err = a.job.openSource(href); err != nil {
			return nil, nil, err
		}
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
func (a *DecodeAhead) take(w geo.Grid, href string) (*raster.Source, *decode.Rect, *resample.Coarse, bool) {
	o := origin(w)
	i, ok := a.row[o]
	if !ok {
		return nil, nil, nil, false
	}
	t := time.Now()
	<-a.ready[i]
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waitNs += int64(time.Since(t))
	k := aheadKey{o, href}
	r, ok := a.rects[k]
	delete(a.rects, k)
	return a.srcs[href], r.raw, r.c, ok
}

// done records that window w has finished, and has the device free the
// tiles no window will need any more.
func (a *DecodeAhead) done(w geo.Grid) {
	a.mu.Lock()
	if i, ok := a.row[origin(w)]; ok {
		a.Left[i]--
		a.finished.Broadcast()
	}
	free := a.releasable(false)
	a.mu.Unlock()
	for _, b := range free {
		a.job.engine.ReleaseAhead(b)
	}
}

// releasable returns the batches the device may free (all of them once
// the reader has stopped), marking them released; under a.mu. A batch
// goes once the rows that take its tiles are done and the row after the
// last of them has been laid out without them (a row takes tiles only
// from the row before it, so no later row will).
func (a *DecodeAhead) releasable(all bool) []*cuda.AheadBatch {
	var free []*cuda.AheadBatch
	for k, b := range a.batches {
		if b == nil || a.released[k] {
			continue
		}
		last := a.lastUse[k]
		ok := all || a.planned > last+1 || last == len(a.rows)-1
		for j := k; ok && !all && j <= last; j++ {
			ok = a.Left[j] == 0
		}
		if ok {
			a.released[k] = true
			free = append(free, b)
		}
	}
	if len(free) > 0 {
		a.finished.Broadcast() // the device's budget has room again
	}
	return free
}

func (a *DecodeAhead) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
		a.job.log.Warn("reading tiles ahead failed; windows read their own", "err", err)
	}
}

func (a *DecodeAhead) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// close stops the reader and releases its sources; it returns how long
// the readers spent reading.
func (a *DecodeAhead) close() time.Duration {
	close(a.stop)
	a.mu.Lock()
	a.finished.Broadcast()
	a.mu.Unlock()
	<-a.exited // the sources may be in use until then
	a.mu.Lock()
	free := a.releasable(true)
	a.mu.Unlock()
	for _, b := range free {
		a.job.engine.ReleaseAhead(b)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.srcs {
		s.Close()
	}
	sec := func(ns int64) float64 { return time.Duration(ns).Seconds() }
	a.job.log.Info("read ahead", "rows", len(a.rows), "fetch_s", sec(a.fetchNs), "plan_s", sec(a.planNs),
		"read_worker_s", sec(a.readNs), "device_decode_s", sec(a.decodeNs), "held_s", sec(a.heldNs), "windows_waiting_worker_s", sec(a.waitNs),
		"rows_in_progress_max", a.maxRows, "budget_bytes", a.budget)
	return time.Duration(a.readNs)
}
