// Package cuda runs lulc's CUDA kernels (kernels/lulc.cu, embedded as a
// fatbin of machine code for sm_80 and sm_90 with the PTX for other GPUs)
// through package driver: a Device is a GPU with lulc's kernels loaded.
// It holds the GPU twins of the tile's stages, each behind the same
// interface as its CPU reference and tested against it bit for bit:
// decoding of compressed GeoTIFF tiles (package decode's twin), ahead of
// the windows into a tile cache in device memory; the window composite
// (package composite's); and a tile's composite kept in device memory
// (Mirror) with the two passes of package sampling's draw over it, and
// the blocks a prediction reads from it (Mirror.Block, Mirror.Valid). The
// twins of the model's stages (features, forest, area of applicability)
// are in package classifier, on the same Device.
package cuda

import (
	"fmt"
	"sync"

	"github.com/lulc/lulc/device/cuda/driver"
)

// Device is one GPU with lulc's kernels loaded, owned by a goroutine (see
// package driver): its Do, DoFirst, Launch and Pool are the driver's.
type Device struct {
	*driver.Device
	// tiles keeps decoded source tiles between windows (decodeRects);
	// tileCall counts its calls.
	tiles    *tileCache
	tileCall uint64
	// held is where the compressed tiles that DecodeAhead keeps lie, by
	// TileKey, until ReleaseAhead (owner goroutine only).
	held     map[string]heldTile
	heldBufs map[*heldBuffer]bool
	// ahead serialises DecodeAhead calls (one reader per lane, and lanes
	// may share a device): they share the device buffers of a row.
	ahead sync.Mutex
	// checks are batches decoded ahead whose tiles' statuses are still
	// on their way to the host (owner goroutine only); waited are those
	// whose tiles the last decodeRects read, having the null stream wait
	// for them (see checkAhead); rows is the stream that rows decoded
	// ahead go by (rowStream).
	checks []*aheadCheck
	waited []*aheadCheck
	rows   uintptr
	// spare are pinned status buffers that checked batches left.
	spare []pinnedStatus
	opt   Options
	// composite serializes windows' composites (CompositeMirrored),
	// whose buffers come from the pool; compStream is the stream their
	// outputs come down by (owner goroutine creates it).
	composite  sync.Mutex
	compStream uintptr
	// classes serializes Classes, whose buffers come from the pool;
	// classStream is the stream they run on (owner goroutine creates it).
	classes     sync.Mutex
	classStream uintptr
	// spareMirrors are planes mirrors that mapped tiles gave back
	// (Mirror.Recycle), for the next tiles of their shape: a tile's 3 GB
	// are then neither freed (cuMemFree waits for the device) nor
	// allocated again.
	mirrorsMu    sync.Mutex
	spareMirrors []*Mirror
}

// kernels returns the module the device loads: the embedded fatbin, or
// the PTX of Options.PTX.
func (d *Device) kernels() []byte {
	if d.opt.PTX != "" {
		return []byte(d.opt.PTX)
	}
	return fatbin
}

// kernelsName describes the module the device loads, for errors.
func (d *Device) kernelsName() string {
	if d.opt.PTX != "" {
		return "PTX " + ptxVersion(d.opt.PTX) + " of LULC_PTX"
	}
	return "fatbin"
}

// Options are a device's settings for comparing ways of working on one
// machine; the zero value is lulc's way. The command line sets them from
// the environment (docs/gpu.md); library code never reads it.
type Options struct {
	// PTX, when set, is the kernels to load instead of the embedded
	// fatbin (freshly compiled kernels tried on a GPU host before they
	// are committed; or the committed PTX, to measure the JIT).
	PTX string
	// Pageable copies the rows decoded ahead, and context windows' DNs,
	// straight from the host's pageable memory instead of through the
	// pinned staging.
	Pageable bool
	// TrainProfile has forest training wait for its kernels group by
	// group and log where the time went.
	TrainProfile bool
	// TopsOnly walks the forest with forest_walk, only the trees' top
	// levels in shared memory, instead of forest_sweep's whole trees.
	TopsOnly bool
	// AOAUnsplit measures each pixel's distances to every training point
	// in one block, instead of splitting the points across blocks.
	AOAUnsplit bool
	// OwnerCopies copies a context window's DNs to the device on the
	// owner goroutine, instead of beside it.
	OwnerCopies bool
	// WaitAll restores the waits from before the streams were kept
	// apart: the owner waits for each composite (for the whole device)
	// and each context window's pass (whose pixel list, memset and DIs
	// go by the null stream, which the pass waits for) instead of the
	// callers waiting beside it, and for each batch decoded ahead, to
	// check its tiles' statuses.
	WaitAll bool
	// BlockingSync has the device's waits sleep instead of spinning a
	// core (driver.OpenSched).
	BlockingSync bool
	// RowsOnNull decodes rows ahead on the null stream, one after
	// another with the composites, instead of on a stream of their own
	// beside them.
	RowsOnNull bool
	// UntouchedOutputs leaves a window's composite and classes outputs to
	// be faulted in by their copies down, under the device's composite
	// and classes locks, instead of touching their pages before.
	UntouchedOutputs bool
}

// Options returns the settings the device was opened with.
func (d *Device) Options() Options { return d.opt }

// kernelNames are the kernels of lulc.cu that the Go side launches.
var kernelNames = []string{"features", "features_wide", "reflectance", "context_rows", "context_cols", "features_context", "context_at", "crop", "median", "bin", "forest_predict", "rf_boot", "rf_root", "rf_hist", "rf_split", "rf_split_tiny", "rf_partition", "composite", "upsample_bilinear", "inflate", "tiff_unpack", "gather_tiles",
	"draw_count", "draw_collect", "place_u16", "place_u8", "mirror_block", "mirror_valid", "aoa_near", "aoa_finish", "aoa_pairs", "affine_plane", "forest_walk", "forest_sweep8", "forest_sweep12", "forest_sweep16", "forest_sweep32", "class_rule"}

// kernelBlocks are the threads a block of Launch for the kernels that
// take other than 256: forest_predict's shared-memory row buffer is sized
// for 128 threads (forest_walk's for 256, the default).
var kernelBlocks = map[string]int64{"forest_predict": 128}

// Open retains device index's primary context on a new owner goroutine
// and loads lulc's kernels (opt.PTX's, when set).
func Open(index int, opt Options) (*Device, error) {
	g, err := driver.OpenSched(index, opt.BlockingSync)
	if err != nil {
		return nil, err
	}
	d := &Device{Device: g, opt: opt, held: map[string]heldTile{}, heldBufs: map[*heldBuffer]bool{}}
	if err := g.LoadModule(d.kernels(), kernelNames, kernelBlocks); err != nil {
		g.Close()
		return nil, fmt.Errorf("load lulc kernels (%s): %w", d.kernelsName(), err)
	}
	return d, nil
}

// Close releases the device; closing a nil Device (the CPU) does nothing.
func (d *Device) Close() {
	if d == nil {
		return
	}
	// No batch decoded ahead, composite, nor classes, is then waited
	// for beside the owner (DecodeAhead settles its batches' pinned
	// statuses, which Close frees).
	d.ahead.Lock()
	defer d.ahead.Unlock()
	d.composite.Lock()
	defer d.composite.Unlock()
	d.classes.Lock()
	defer d.classes.Unlock()
	d.Do(func() error {
		// Whatever is still queued (rows decoded ahead, their statuses)
		// finishes before its buffers go.
		driver.Synchronize()
		d.mirrorsMu.Lock()
		for _, m := range d.spareMirrors {
			m.dn.Free()
		}
		d.spareMirrors = nil
		d.mirrorsMu.Unlock()
		if d.compStream != 0 {
			driver.DestroyStream(d.compStream)
			d.compStream = 0
		}
		if d.classStream != 0 {
			driver.DestroyStream(d.classStream)
			d.classStream = 0
		}
		if d.rows != 0 {
			driver.DestroyStream(d.rows)
			d.rows = 0
		}
		d.tiles.release()
		for h := range d.heldBufs {
			h.buf.Free()
		}
		for _, c := range d.checks {
			c.event.Destroy()
			driver.FreeHost(c.status.ptr)
		}
		for _, p := range d.spare {
			driver.FreeHost(p.ptr)
		}
		d.checks, d.spare, d.waited = nil, nil, nil
		return nil
	})
	d.Device.Close()
}
