package bench

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/geo/decode"
	"github.com/lulc/lulc/geo/raster"
)

// DecodeRun is one way of decoding every tile: its wall time and its
// throughput in decoded bytes a second.
type DecodeRun struct {
	Engine  string  `json:"engine"` // gdal, go, gpu kernels (w warps a block), gpu with transfers
	Seconds float64 `json:"seconds"`
	GBps    float64 `json:"decoded_gb_per_s"`
	Note    string  `json:"note,omitempty"`
}

// DecodeReport is what `lulc bench decode` measured: every full-resolution
// tile of every GeoTIFF under a directory, decoded by GDAL on a number of
// threads, by lulc's Go twin on as many, and by the device's kernels, with
// the device's samples compared with the twin's byte for byte.
type DecodeReport struct {
	Command    string      `json:"command"`
	Host       HostInfo    `json:"host"`
	Dir        string      `json:"dir"`
	Files      int         `json:"files"`
	Tiles      int         `json:"tiles"`
	Formats    []string    `json:"formats"`
	Compressed int64       `json:"compressed_bytes"`
	Decoded    int64       `json:"decoded_bytes"`
	Threads    int         `json:"threads"`
	ReadRaw    float64     `json:"read_raw_seconds"` // reading the compressed bytes (ReadRanges), once
	Runs       []DecodeRun `json:"runs"`
	// GPUSameAsTwin is true when every tile the device decoded equals the
	// Go twin's bytes; the twin is tested against GDAL in package raster.
	GPUSameAsTwin *bool    `json:"gpu_same_as_twin,omitempty"`
	Skipped       []string `json:"skipped,omitempty"` // files read by neither lulc decoder, and why
}

// decodeFile is one GeoTIFF's tiles: its layout and compressed bytes.
type decodeFile struct {
	layout raster.TileLayout
	tiles  [][]byte // in layout order; nil for tiles never written
}

// Decode measures tile decoding on the GeoTIFFs under dir with threads
// host threads (0: every CPU), on dev too when it is not nil.
func Decode(ctx context.Context, dir string, threads int, dev *cuda.Device, command, version string) (*DecodeReport, error) {
	if threads <= 0 {
		threads = hostInfo(version).Cores
	}
	rep := &DecodeReport{Command: command, Host: hostInfo(version), Dir: dir, Threads: threads}
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(strings.ToLower(p), ".tif") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench decode: %w", err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("bench decode: no .tif files under %s", dir)
	}
	sort.Strings(paths)
	t := time.Now()
	var files []*decodeFile
	formats := map[string]bool{}
	for _, p := range paths {
		f, err := readDecodeFile(p)
		if err != nil {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		files = append(files, f)
		fm := f.layout.Format()
		formats[fmt.Sprintf("%s predictor %d, %d-bit, %d×%d tiles", fm.Compression, fm.Predictor, 8*fm.SampleBytes, fm.W, fm.H)] = true
		for _, raw := range f.tiles {
			if raw != nil {
				rep.Tiles++
				rep.Compressed += int64(len(raw))
				rep.Decoded += int64(fm.W * fm.H * fm.SampleBytes)
			}
		}
	}
	rep.ReadRaw = time.Since(t).Seconds()
	rep.Files = len(files)
	for f := range formats {
		rep.Formats = append(rep.Formats, f)
	}
	sort.Strings(rep.Formats)
	if len(files) == 0 {
		return nil, fmt.Errorf("bench decode: no tiled single-band GeoTIFF under %s", dir)
	}
	gb := float64(rep.Decoded) / 1e9
	run := func(engine string, f func() error) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		t := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("bench decode %s: %w", engine, err)
		}
		s := time.Since(t).Seconds()
		rep.Runs = append(rep.Runs, DecodeRun{Engine: engine, Seconds: s, GBps: gb / s})
		return nil
	}
	if err := run(fmt.Sprintf("gdal, %d threads", threads), func() error { return decodeGDAL(files, threads) }); err != nil {
		return nil, err
	}
	if err := run(fmt.Sprintf("go twin, %d threads", threads), func() error { return decodeTwin(files, threads, nil) }); err != nil {
		return nil, err
	}
	if dev != nil {
		if err := decodeGPU(rep, files, threads, dev); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// readDecodeFile reads a GeoTIFF's layout and compressed tiles.
func readDecodeFile(path string) (*decodeFile, error) {
	s, err := raster.Open(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	l, err := s.Layout()
	if err != nil {
		return nil, err
	}
	if l.DataType != "Byte" && l.DataType != "UInt16" {
		return nil, fmt.Errorf("%s samples", l.DataType)
	}
	if !decode.Supported(l.Compression, l.Predictor) {
		return nil, fmt.Errorf("%s with predictor %d: %w", l.Compression, l.Predictor, decode.ErrUnsupported)
	}
	// The whole band as one rectangle: every tile, in layout order.
	r, err := l.Rect(0, 0, l.Width, l.Height, nil)
	if err != nil {
		return nil, err
	}
	return &decodeFile{layout: l, tiles: r.Tiles}, nil
}

type tileJob struct {
	f    *decodeFile
	i    int
	file int
}

func eachTileJob(files []*decodeFile, threads int, work func(worker int, j tileJob) error) error {
	jobs := make(chan tileJob, 256)
	errs := make([]error, threads)
	var wg sync.WaitGroup
	for w := range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if errs[w] == nil {
					errs[w] = work(w, j)
				}
			}
		}()
	}
	for fi, f := range files {
		for i, raw := range f.tiles {
			if raw != nil {
				jobs <- tileJob{f, i, fi}
			}
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeGDAL reads every tile's window through GDAL, each thread with its
// own handles (so GDAL's block cache serves no tile twice).
func decodeGDAL(files []*decodeFile, threads int) error {
	handles := make([]map[int]*raster.Source, threads)
	for i := range handles {
		handles[i] = map[int]*raster.Source{}
	}
	defer func() {
		for _, h := range handles {
			for _, s := range h {
				s.Close()
			}
		}
	}()
	bufs := make([][]byte, threads)
	bufs16 := make([][]uint16, threads)
	return eachTileJob(files, threads, func(w int, j tileJob) error {
		s, ok := handles[w][j.file]
		if !ok {
			var err error
			if s, err = raster.Open(j.f.layout.Path); err != nil {
				return err
			}
			handles[w][j.file] = s
		}
		l := j.f.layout
		x, y := (j.i%l.TilesX)*l.Block[0], (j.i/l.TilesX)*l.Block[1]
		tw, th := min(l.Block[0], l.Width-x), min(l.Block[1], l.Height-y)
		if l.DataType == "Byte" {
			if len(bufs[w]) < tw*th {
				bufs[w] = make([]byte, l.Block[0]*l.Block[1])
			}
			return raster.ReadBandWindowInto(s, 1, x, y, tw, th, bufs[w][:tw*th])
		}
		if len(bufs16[w]) < tw*th {
			bufs16[w] = make([]uint16, l.Block[0]*l.Block[1])
		}
		return raster.ReadBandWindowInto(s, 1, x, y, tw, th, bufs16[w][:tw*th])
	})
}

// decodeTwin decodes every tile with package decode; with sink, each
// tile's samples (as little-endian bytes) go to it.
func decodeTwin(files []*decodeFile, threads int, sink func(file, tile int, b []byte)) error {
	return eachTileJob(files, threads, func(w int, j tileJob) error {
		fm := j.f.layout.Format()
		var b []byte
		if fm.SampleBytes == 1 {
			px := make([]uint8, fm.W*fm.H)
			if err := decode.Tile(px, j.f.tiles[j.i], fm.Compression, fm.Predictor, fm.BigEndian, fm.W, fm.H); err != nil {
				return fmt.Errorf("%s tile %d: %w", j.f.layout.Path, j.i, err)
			}
			b = px
		} else {
			px := make([]uint16, fm.W*fm.H)
			if err := decode.Tile(px, j.f.tiles[j.i], fm.Compression, fm.Predictor, fm.BigEndian, fm.W, fm.H); err != nil {
				return fmt.Errorf("%s tile %d: %w", j.f.layout.Path, j.i, err)
			}
			if sink != nil {
				b = make([]byte, 2*len(px))
				for k, v := range px {
					b[2*k], b[2*k+1] = byte(v), byte(v>>8)
				}
			}
		}
		if sink != nil {
			sink(j.file, j.i, b)
		}
		return nil
	})
}

// decodeGPU times the device's decoding of every tile, batched by format,
// with 1, 2, 4 and 8 warps (tiles) to a block, then checks its bytes
// against the Go twin's.
func decodeGPU(rep *DecodeReport, files []*decodeFile, threads int, dev *cuda.Device) error {
	type group struct {
		f      decode.Format
		tiles  [][]byte
		origin [][2]int // file, tile
	}
	groups := map[decode.Format]*group{}
	var order []decode.Format
	for fi, f := range files {
		fm := f.layout.Format()
		if !cuda.Decodable(fm) {
			rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s: %s not decoded on the device", f.layout.Path, fm.Compression))
			continue
		}
		g, ok := groups[fm]
		if !ok {
			g = &group{f: fm}
			groups[fm] = g
			order = append(order, fm)
		}
		for i, raw := range f.tiles {
			if raw != nil {
				g.tiles = append(g.tiles, raw)
				g.origin = append(g.origin, [2]int{fi, i})
			}
		}
	}
	if len(order) == 0 {
		return nil
	}
	var decoded int64
	for _, fm := range order {
		decoded += int64(len(groups[fm].tiles) * fm.W * fm.H * fm.SampleBytes)
	}
	gb := float64(decoded) / 1e9
	var with DecodeRun
	for _, warps := range []int{1, 2, 4, 8} {
		var kern, in, out time.Duration
		var compressed int64
		for _, fm := range order {
			t, err := cuda.TimeDecodeTiles(dev, groups[fm].tiles, fm, 5, warps)
			if err != nil {
				return fmt.Errorf("bench decode gpu: %w", err)
			}
			kern, in, out, compressed = kern+t.Kernels, in+t.In, out+t.Out, compressed+t.Compressed
		}
		rep.Runs = append(rep.Runs, DecodeRun{Engine: fmt.Sprintf("gpu kernels, %d warps a block", warps), Seconds: kern.Seconds(),
			GBps: gb / kern.Seconds(), Note: "inflate and unpack, one warp a tile; median of 5 after a warm-up"})
		if warps == 4 {
			all := in + kern + out
			with = DecodeRun{Engine: "gpu with transfers", Seconds: all.Seconds(), GBps: gb / all.Seconds(),
				Note: fmt.Sprintf("%.2f GB in (%.3f s), kernels %.3f s, %.2f GB out (%.3f s), pageable memory",
					float64(compressed)/1e9, in.Seconds(), kern.Seconds(), gb, out.Seconds())}
		}
	}
	rep.Runs = append(rep.Runs, with)
	// The device's bytes against the twin's, tile by tile.
	want := map[[2]int][]byte{}
	var mu sync.Mutex
	if err := decodeTwin(files, threads, func(file, tile int, b []byte) {
		mu.Lock()
		want[[2]int{file, tile}] = b
		mu.Unlock()
	}); err != nil {
		return err
	}
	same := true
	for _, fm := range order {
		g := groups[fm]
		got, err := cuda.DecodeTiles(dev, g.tiles, fm)
		if err != nil {
			return fmt.Errorf("bench decode gpu: %w", err)
		}
		tb := fm.W * fm.H * fm.SampleBytes
		for k, o := range g.origin {
			if !bytes.Equal(got[k*tb:(k+1)*tb], want[o]) {
				same = false
				fmt.Fprintf(os.Stderr, "bench decode: %s tile %d differs between the device and the Go twin\n", files[o[0]].layout.Path, o[1])
			}
		}
	}
	rep.GPUSameAsTwin = &same
	return nil
}

// DecodeMarkdown renders the report as a table.
func DecodeMarkdown(r *DecodeReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# lulc bench decode\n\n`%s`\n\n", r.Command)
	fmt.Fprintf(&b, "Host: %s, %d CPUs; GPU: %s; lulc %s.\n\n", r.Host.CPU, r.Host.Cores, orNone(r.Host.GPU), r.Host.Lulc)
	fmt.Fprintf(&b, "%d files under %s, %d tiles (%s): %.2f GB compressed, %.2f GB decoded; raw bytes read in %.2f s.\n\n",
		r.Files, r.Dir, r.Tiles, strings.Join(r.Formats, "; "), float64(r.Compressed)/1e9, float64(r.Decoded)/1e9, r.ReadRaw)
	b.WriteString("| engine | seconds | decoded GB/s | note |\n|---|---:|---:|---|\n")
	for _, x := range r.Runs {
		fmt.Fprintf(&b, "| %s | %.3f | %.2f | %s |\n", x.Engine, x.Seconds, x.GBps, x.Note)
	}
	if r.GPUSameAsTwin != nil {
		fmt.Fprintf(&b, "\nDevice bytes identical to the Go twin's: %v.\n", *r.GPUSameAsTwin)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "\n- skipped %s", s)
	}
	b.WriteString("\n")
	return b.String()
}
