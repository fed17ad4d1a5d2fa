// Package stack holds one tile's analysis-ready stack in memory: the median
// composite as UInt16 digital numbers in lulc's encoding (reflectance =
// DN × Scale + Offset, DN 0 = no valid observation), then any temporal
// planes and layers in the same encoding (a layer through its map:
// features.Layer), the labels and the valid-observation counts, all on the
// tile's grid.
//
// Ingest fills a Tile window by window; sampling, prediction and
// evaluation read windows of it. A Tile may be read while it is filled
// (StartFilling, Await, EndFilling): a tile's prediction then follows its
// composite row by row. A one-pass job (lulc run) thereby never
// encodes the stack to a COG and decodes it again between stages. A Tile
// whose planes a device holds (NewElsewhere) keeps only its counts,
// labels and fill, for a prediction that reads its windows there. When
// tiles must wait for training, Spill writes a Tile in a raw format (a
// JSON header and the planes as little-endian arrays) that Load reads back
// at disk speed, with no codec on either side.
package stack

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/internal/atomicfs"
)

// Tile is a tile's stack in memory. Windows written at once by several
// goroutines must not overlap.
type Tile struct {
	Name          string
	Grid          geo.Grid
	Bands         []string
	Scale, Offset float64
	DN            [][]uint16 // per band, Grid.Width × Grid.Height, row-major; nil planes when held elsewhere (NewElsewhere)
	Labels        []uint8    // class codes, 0 where unlabelled
	Count         []uint8    // valid observations per pixel
	// Groups are the pixels' group ids (the features of vector labels,
	// 0: none) when the labels came from a vector layer, else nil. They
	// serve the draw, which comes before a tile is held: Spill does not
	// keep them.
	Groups []uint32
	// Weights are the pixels' weights (a vector label attribute, 0: never
	// drawn) when ingest burned them, else nil (every pixel's is 1). Like
	// Groups, they serve the draw only: Spill does not keep them.
	Weights []uint8

	// fill follows the writes while the tile is being filled (nil: the
	// tile is whole, or no reader waits for its rows).
	fill *filling
}

// filling is what a tile being filled knows of its writes: how many
// pixels of each row the windows have written, the first row not yet
// whole, which planes WriteLayers has stored, and how the fill ended.
type filling struct {
	mu       sync.Mutex
	changed  chan struct{} // closed, and replaced, whenever the tile gains rows or ends
	rows     []int32       // pixels written per row
	frontier int           // rows [0, frontier) are whole
	windowed int           // planes [0, windowed) come in windows, the rest whole
	layered  []bool        // planes [windowed, len(DN)) stored by WriteLayers
	layers   int           // how many of them are
	ended    bool
	err      error
}

// StartFilling marks the tile as being filled, so that Await follows its
// writes: the first windowed planes, the labels and the counts come in
// windows (Write), the planes after them whole (WriteLayers). The filler
// calls EndFilling when it is done, with or without an error.
func (t *Tile) StartFilling(windowed int) {
	t.fill = &filling{changed: make(chan struct{}), rows: make([]int32, t.Grid.Height),
		windowed: min(windowed, len(t.DN)), layered: make([]bool, len(t.DN))}
}

// EndFilling ends the fill StartFilling began. With err (the filler
// failed) every Await from then on returns it; without, the tile is whole.
func (t *Tile) EndFilling(err error) {
	f := t.fill
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return
	}
	f.ended, f.err = true, err
	close(f.changed)
}

// Await blocks until rows [0, rows) of every plane, the labels and the
// counts are written, returning at once for a tile not being filled. It
// returns the filler's error if the fill ended with one, the context's
// if ctx ends first, and nil when the fill ended whole even if fewer
// rows were written (a filler that skips windows leaves them nodata, as
// it would have without a reader waiting).
func (t *Tile) Await(ctx context.Context, rows int) error {
	f := t.fill
	if f == nil {
		return nil
	}
	for {
		f.mu.Lock()
		ready := rows <= 0 || f.frontier >= rows && f.layers == len(f.layered)-f.windowed
		ended, err, changed := f.ended, f.err, f.changed
		f.mu.Unlock()
		switch {
		case err != nil:
			return fmt.Errorf("tile %s: %w", t.Name, err)
		case ready || ended:
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wrote counts a window's pixels into its rows and wakes the waiters
// when the whole rows reach further.
func (f *filling) wrote(y, w, h, width int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for r := y; r < y+h; r++ {
		f.rows[r] += int32(w)
	}
	moved := false
	for f.frontier < len(f.rows) && int(f.rows[f.frontier]) >= width {
		f.frontier++
		moved = true
	}
	if moved {
		f.wake()
	}
}

// stored marks planes [first, first+n) as stored whole.
func (f *filling) stored(first, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := max(first, f.windowed); p < first+n; p++ {
		if !f.layered[p] {
			f.layered[p] = true
			f.layers++
		}
	}
	f.wake()
}

// wake tells the waiters that something changed (under f.mu).
func (f *filling) wake() {
	if !f.ended {
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// WriteGroups keeps the tile's group ids (a sink of vector labels' tiles).
func (t *Tile) WriteGroups(ids []uint32) error {
	if len(ids) != t.Grid.Width*t.Grid.Height {
		return fmt.Errorf("tile %s: %d group ids for %d×%d pixels", t.Name, len(ids), t.Grid.Width, t.Grid.Height)
	}
	t.Groups = ids
	return nil
}

// WriteWeights keeps the tile's pixel weights (a sink of vector labels'
// tiles with a weight field).
func (t *Tile) WriteWeights(w []uint8) error {
	if len(w) != t.Grid.Width*t.Grid.Height {
		return fmt.Errorf("tile %s: %d pixel weights for %d×%d pixels", t.Name, len(w), t.Grid.Width, t.Grid.Height)
	}
	t.Weights = w
	return nil
}

// New allocates a tile of the given bands on grid g.
func New(name string, g geo.Grid, bands []string, scale, offset float64) *Tile {
	t := NewElsewhere(name, g, bands, scale, offset)
	for b := range t.DN {
		t.DN[b] = make([]uint16, g.Width*g.Height)
	}
	return t
}

// NewElsewhere is New for a tile whose planes a device holds (lulc run's
// map on a GPU reads its windows from the device's copy of the composite):
// the tile keeps the counts, the labels and the fill's progress, and
// Write skips the planes, which HasPlanes says it lacks.
func NewElsewhere(name string, g geo.Grid, bands []string, scale, offset float64) *Tile {
	n := g.Width * g.Height
	return &Tile{Name: name, Grid: g, Bands: slices.Clone(bands), Scale: scale, Offset: offset,
		DN: make([][]uint16, len(bands)), Labels: make([]uint8, n), Count: make([]uint8, n)}
}

// HasPlanes says whether the tile holds its planes' DNs (not so for
// NewElsewhere's, whose ReadBand must not be called).
func (t *Tile) HasPlanes() bool {
	for _, p := range t.DN {
		if p == nil {
			return false
		}
	}
	return true
}

// Bytes is the memory the tile's planes take.
func (t *Tile) Bytes() int64 {
	n := int64(t.Grid.Width) * int64(t.Grid.Height)
	planes := int64(0)
	for _, p := range t.DN {
		if p != nil {
			planes++
		}
	}
	return n*2*planes + 2*n
}

// Write stores a window: the DNs of the tile's first len(dn) planes, the
// counts and the labels, each w×h and row-major, with its top-left pixel
// at (x, y). Planes after them (a stack's layers) come whole, by
// WriteLayers.
func (t *Tile) Write(x, y, w, h int, dn [][]uint16, count, labels []uint8) error {
	if len(dn) > len(t.DN) {
		return fmt.Errorf("tile %s: window of %d bands, the tile has %d", t.Name, len(dn), len(t.DN))
	}
	if x < 0 || y < 0 || x+w > t.Grid.Width || y+h > t.Grid.Height {
		return fmt.Errorf("tile %s: window %d×%d at (%d, %d) is outside the %d×%d grid", t.Name, w, h, x, y, t.Grid.Width, t.Grid.Height)
	}
	for b := range dn {
		if t.DN[b] != nil { // nil: the plane is held elsewhere
			putWindow(t.DN[b], t.Grid.Width, x, y, w, h, dn[b])
		}
	}
	putWindow(t.Count, t.Grid.Width, x, y, w, h, count)
	putWindow(t.Labels, t.Grid.Width, x, y, w, h, labels)
	// A window of fewer planes than the fill's windowed ones leaves the
	// others unwritten: its rows are not counted, so that readers wait
	// for the fill's end.
	if t.fill != nil && len(dn) >= t.fill.windowed {
		t.fill.wrote(y, w, h, t.Grid.Width)
	}
	return nil
}

// WriteLayers stores whole planes from plane first on: a stack's layers,
// made apart from its windows. The tile keeps the slices.
func (t *Tile) WriteLayers(first int, planes [][]uint16) error {
	n := t.Grid.Width * t.Grid.Height
	if first < 0 || first+len(planes) > len(t.DN) {
		return fmt.Errorf("tile %s: planes %d to %d of %d", t.Name, first, first+len(planes), len(t.DN))
	}
	for k, p := range planes {
		if len(p) != n {
			return fmt.Errorf("tile %s: a plane of %d pixels for %d×%d", t.Name, len(p), t.Grid.Width, t.Grid.Height)
		}
		t.DN[first+k] = p
	}
	if t.fill != nil {
		t.fill.stored(first, len(planes))
	}
	return nil
}

// ReadBand copies band b's DNs over a window into dst (w×h, row-major).
func (t *Tile) ReadBand(b, x, y, w, h int, dst []uint16) {
	getWindow(t.DN[b], t.Grid.Width, x, y, w, h, dst)
}

// ReadLabels copies the labels over a window into dst (w×h, row-major).
func (t *Tile) ReadLabels(x, y, w, h int, dst []uint8) {
	getWindow(t.Labels, t.Grid.Width, x, y, w, h, dst)
}

func putWindow[T any](plane []T, stride, x, y, w, h int, src []T) {
	for r := range h {
		copy(plane[(y+r)*stride+x:][:w], src[r*w:][:w])
	}
}

func getWindow[T any](plane []T, stride, x, y, w, h int, dst []T) {
	for r := range h {
		copy(dst[r*w:][:w], plane[(y+r)*stride+x:][:w])
	}
}

// spillHeader is the JSON line that starts a spilled tile.
type spillHeader struct {
	Magic  string   `json:"magic"`
	Name   string   `json:"name"`
	Grid   geo.Grid `json:"grid"`
	Bands  []string `json:"bands"`
	Scale  float64  `json:"scale"`
	Offset float64  `json:"offset"`
}

const spillMagic = "lulc-stack-spill-1"

// Spill writes the tile to path (atomically): a JSON header line, then the
// DN planes, the labels and the counts as little-endian arrays.
func (t *Tile) Spill(path string) error {
	tmp := atomicfs.TempName(path)
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("spill tile %s: %w", t.Name, err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	hdr, _ := json.Marshal(spillHeader{spillMagic, t.Name, t.Grid, t.Bands, t.Scale, t.Offset})
	werr := errors.Join(writeAll(bw, append(hdr, '\n')), writePlanes(bw, t))
	werr = errors.Join(werr, bw.Flush(), f.Close())
	if werr == nil {
		werr = os.Rename(tmp, path)
	}
	if werr != nil {
		os.Remove(tmp)
		return fmt.Errorf("spill tile %s to %s: %w", t.Name, path, werr)
	}
	return nil
}

func writeAll(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	return err
}

func writePlanes(w io.Writer, t *Tile) error {
	for _, p := range t.DN {
		if err := binary.Write(w, binary.LittleEndian, p); err != nil {
			return err
		}
	}
	if err := writeAll(w, t.Labels); err != nil {
		return err
	}
	return writeAll(w, t.Count)
}

// Load reads a tile written by Spill.
func Load(path string) (*Tile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load spilled tile: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load spilled tile: %w", err)
	}
	t, err := decode(f, fi.Size())
	if err != nil {
		return nil, fmt.Errorf("load spilled tile %s: %w", path, err)
	}
	return t, nil
}

// decode reads a spilled tile of size bytes from r. The header must
// account for every byte before any plane is allocated, so that a damaged
// header cannot ask for memory the file does not back.
func decode(r io.Reader, size int64) (*Tile, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var h spillHeader
	if err := json.Unmarshal(line, &h); err != nil || h.Magic != spillMagic {
		return nil, errors.New("not a lulc spill file")
	}
	n := int64(h.Grid.Width) * int64(h.Grid.Height)
	if h.Grid.Width <= 0 || h.Grid.Height <= 0 || n > 1<<31 || len(h.Bands) == 0 || len(h.Bands) > 64 {
		return nil, fmt.Errorf("implausible grid %d×%d with %d bands", h.Grid.Width, h.Grid.Height, len(h.Bands))
	}
	if want := int64(len(line)) + n*(2*int64(len(h.Bands))+2); size != want {
		return nil, fmt.Errorf("%d bytes, the header's %d×%d grid of %d bands needs %d", size, h.Grid.Width, h.Grid.Height, len(h.Bands), want)
	}
	t := New(h.Name, h.Grid, h.Bands, h.Scale, h.Offset)
	for _, p := range t.DN {
		if err := binary.Read(br, binary.LittleEndian, p); err != nil {
			return nil, err
		}
	}
	for _, p := range [][]uint8{t.Labels, t.Count} {
		if _, err := io.ReadFull(br, p); err != nil {
			return nil, err
		}
	}
	return t, nil
}
