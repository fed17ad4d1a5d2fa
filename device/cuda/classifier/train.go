package classifier

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/internal/progress"
	"github.com/lulc/lulc/learn/forest"
)

// Training layout constants. A task (node) with more rows than smallRows
// has its histograms built by several blocks of histChunk rows each into
// global memory; smaller ones are built and scanned by one block in shared
// memory. partChunk is the rows per block of the partition kernel.
const (
	smallRows  = 8192
	histChunk  = 16384
	partChunk  = 4096
	splitBlock = 128
)

// Train grows a forest on the GPUs: the same trees, bit for bit, as
// forest.Train on the same data and parameters. The trees are shared out
// over the devices in contiguous ranges of tree ids (each tree's bootstrap
// and feature draws depend only on its id, so where it grows changes
// nothing), and the forest lists them in id order. On each device trees
// are grown level by level in batches as large as its memory allows;
// logf (may be nil) hears about batching and about retries after running
// out of memory. Once ctx is done (an interrupt) every device stops before
// its next tree level and Train returns ctx's error.
func Train(ctx context.Context, devs []*cuda.Device, x *forest.Binned, y []uint8, classes int, p forest.Params, logf func(format string, args ...any)) (*forest.Forest, error) {
	return train(ctx, devs, trainSet{x: x, y: y, classes: classes}, p, logf)
}

// train is Train on d (its nbins found here).
func train(ctx context.Context, devs []*cuda.Device, d trainSet, p forest.Params, logf func(format string, args ...any)) (*forest.Forest, error) {
	x, y, classes := d.x, d.y, d.classes
	if len(devs) == 0 {
		return nil, errors.New("gpu train: no device")
	}
	if err := forest.CheckData(x, y, classes, p); err != nil {
		return nil, err
	}
	if classes > 32 {
		return nil, fmt.Errorf("gpu train: %d classes (the GPU forest handles at most 32)", classes)
	}
	if int64(x.N) >= 1<<31 {
		return nil, fmt.Errorf("gpu train: %d rows (at most %d)", x.N, 1<<31-1)
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	d.nbins = maxCode(x.Codes) + 1
	n := min(len(devs), p.Trees)
	trees := make([][]forest.Tree, n)
	imp := make([][][]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		ids := make([]uint64, 0, (k+1)*p.Trees/n-k*p.Trees/n)
		for t := k * p.Trees / n; t < (k+1)*p.Trees/n; t++ {
			ids = append(ids, uint64(t))
		}
		wg.Go(func() {
			trees[k], imp[k], errs[k] = trainOn(ctx, devs[k], d, p, ids, logf)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("gpu train: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return forest.NewForest(classes, x.F, slices.Concat(trees...), slices.Concat(imp...)), nil
}

// trainSet is what the trees grow on: the binned rows x with their class
// indices y, the number of classes, and the bins a feature's codes take;
// maxBatch, when set, is the most trees a device grows at once (tests
// lower it to grow in several batches).
type trainSet struct {
	x                        *forest.Binned
	y                        []uint8
	classes, nbins, maxBatch int
}

// trainOn grows the trees ids on one device.
func trainOn(ctx context.Context, dev *cuda.Device, d trainSet, p forest.Params, ids []uint64, logf func(format string, args ...any)) ([]forest.Tree, [][]float64, error) {
	x, y, classes, nbins := d.x, d.y, d.classes, d.nbins
	e := &grower{dev: dev, x: x, classes: classes, p: p, mtry: p.Mtry(x.F), nbins: nbins, mem: driver.Pool{},
		profile: dev.Options().TrainProfile, prof: map[string]time.Duration{}}
	if err := dev.Do(func() error {
		var err error
		if e.codes, err = driver.Upload(x.Codes); err != nil {
			return fmt.Errorf("gpu train: upload %d×%d codes to GPU %d: %w", x.N, x.F, dev.Index, err)
		}
		if e.y, err = driver.Upload(y); err != nil {
			return fmt.Errorf("gpu train: upload labels to GPU %d: %w", dev.Index, err)
		}
		return nil
	}); err != nil {
		e.close()
		return nil, nil, err
	}
	defer e.close()

	free, _, err := dev.MemInfo()
	if err != nil {
		return nil, nil, err
	}
	// Each tree of a batch needs its weights and two row lists (12 bytes
	// a row); keep a quarter of the free memory for histograms and tables.
	perTree := 12 * uint64(x.N)
	batch := min(len(ids), int(free*3/4/perTree))
	if d.maxBatch > 0 {
		batch = min(batch, d.maxBatch)
	}
	if batch < 1 {
		return nil, nil, fmt.Errorf("gpu train: one tree over %d rows needs %.1f GB of memory on GPU %d, %.1f GB are free", x.N, float64(perTree)/1e9, dev.Index, float64(free)/1e9)
	}
	if batch < len(ids) {
		logf("gpu train: GPU %d grows %d trees in batches of %d (device memory)", dev.Index, len(ids), batch)
	}
	start := time.Now()
	trees := make([]forest.Tree, 0, len(ids))
	imp := make([][]float64, 0, len(ids))
	for t0 := 0; t0 < len(ids); {
		n := min(batch, len(ids)-t0)
		tr, ti, err := forest.Grow(ctx, e, ids[t0:t0+n], classes, x.F, p)
		if err != nil {
			if errors.Is(err, driver.ErrorOutOfMemory) && n > 1 {
				batch = n / 2
				logf("gpu train: out of memory on GPU %d with %d trees at once; retrying with %d", dev.Index, n, batch)
				e.freeBatch()
				continue
			}
			return nil, nil, err
		}
		trees, imp = append(trees, tr...), append(imp, ti...)
		t0 += n
		progress.Step(ctx, n)
	}
	nodes := 0
	for _, t := range trees {
		nodes += len(t.Feature)
	}
	logf("gpu train: GPU %d grew trees %d–%d, %d nodes in %.2f s over %d levels: splits %.2f s, partitions %.2f s, tree building on the host %.2f s",
		dev.Index, ids[0], ids[len(ids)-1], nodes, time.Since(start).Seconds(), e.levels, e.splitTime.Seconds(), e.partTime.Seconds(),
		(time.Since(start) - e.splitTime - e.partTime).Seconds())
	if e.profile {
		logf("gpu train profile, GPU %d: %v", dev.Index, e.prof)
	}
	return trees, imp, nil
}

// maxCode returns the largest code in a binned matrix.
func maxCode(codes []uint8) int {
	parts := runtime.GOMAXPROCS(0)
	m := make([]uint8, parts)
	var wg sync.WaitGroup
	for k := range parts {
		wg.Go(func() {
			lo, hi := len(codes)*k/parts, len(codes)*(k+1)/parts
			for _, c := range codes[lo:hi] {
				m[k] = max(m[k], c)
			}
		})
	}
	wg.Wait()
	top := 0
	for _, v := range m {
		top = max(top, int(v))
	}
	return top
}

// grower is the GPU forest.Grower. A handle is an index into the current
// level's node tables: node h's rows are rows[cur][base[h] : base[h]+size[h]]
// of tree tree[h] (base includes tree × N).
type grower struct {
	dev     *cuda.Device
	x       *forest.Binned
	classes int
	p       forest.Params
	mtry    int
	nbins   int

	codes, y driver.Buffer
	w        driver.Buffer    // bootstrap weights, batch × N
	rows     [2]driver.Buffer // the ping-pong row lists
	batch    int
	cur      int
	mem      driver.Pool

	base []int64
	size []int32
	tree []int32

	// Where the time goes, for the log: split and partition calls (host
	// tables, transfers and kernels) and levels grown.
	splitTime, partTime time.Duration
	levels              int
	// With cuda.Options.TrainProfile, kernels are waited for one group at a
	// time and timed apart.
	profile bool
	prof    map[string]time.Duration
	last    time.Time
}

// mark, when profiling, waits for the queued kernels and charts the time
// since the last mark to name.
func (e *grower) mark(name string) {
	if !e.profile {
		return
	}
	driver.Synchronize()
	now := time.Now()
	if name != "" {
		e.prof[name] += now.Sub(e.last)
	}
	e.last = now
}

func (e *grower) close() {
	e.dev.Do(func() error {
		e.freeBatchLocked()
		for _, b := range []driver.Buffer{e.codes, e.y} {
			if b.Ptr != 0 {
				b.Free()
			}
		}
		e.mem.Release()
		return nil
	})
}

func (e *grower) freeBatch() { e.dev.Do(func() error { e.freeBatchLocked(); return nil }) }

func (e *grower) freeBatchLocked() {
	for _, b := range []driver.Buffer{e.w, e.rows[0], e.rows[1]} {
		if b.Ptr != 0 {
			b.Free()
		}
	}
	e.w, e.rows, e.batch = driver.Buffer{}, [2]driver.Buffer{}, 0
}

// Roots draws the batch's bootstraps and lists each tree's rows.
func (e *grower) Roots(trees []uint64) ([][]int64, []int, error) {
	n := int64(e.x.N)
	t := len(trees)
	counts := make([]uint64, t*e.classes)
	cursor := make([]uint32, t)
	err := e.dev.Do(func() error {
		if e.batch != t {
			e.freeBatchLocked()
			var err error
			if e.w, err = driver.Alloc(uint64(t) * uint64(n) * 4); err != nil {
				return fmt.Errorf("gpu train: weights for %d trees: %w", t, err)
			}
			for k := range e.rows {
				if e.rows[k], err = driver.Alloc(uint64(t) * uint64(n) * 4); err != nil {
					return fmt.Errorf("gpu train: row lists for %d trees: %w", t, err)
				}
			}
			e.batch = t
		}
		if err := driver.Memset32(e.w.Ptr, 0, uint64(t)*uint64(n)); err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		var st driver.Staging
		ids := st.Ptr(driver.Put(e.mem, "trees", trees))
		if st.Err != nil {
			return st.Err
		}
		boot := int32(0)
		if e.p.Bootstrap {
			boot = 1
		}
		grid := uint32(min((int64(t)*n+255)/256, int64(e.dev.SMs*32)))
		if err := e.dev.LaunchGrid(0, "rf_boot", [3]uint32{grid, 1, 1}, 256, 0, e.w.Ptr, n, int32(t), e.p.Seed, ids, boot); err != nil {
			return err
		}
		cur := st.Ptr(e.mem.Zeroed("cursor", uint64(t)*4))
		cnt := st.Ptr(e.mem.Zeroed("rootcounts", uint64(t*e.classes)*8))
		if st.Err != nil {
			return st.Err
		}
		gx := uint32(min((n+255)/256, int64(e.dev.SMs*4)))
		if err := e.dev.LaunchGrid(0, "rf_root", [3]uint32{gx, uint32(t), 1}, 256, 0, e.w.Ptr, n, e.y.Ptr, int32(e.classes), e.rows[0].Ptr, cur, cnt); err != nil {
			return err
		}
		e.cur = 0
		if err := driver.Download(cursor, driver.Buffer{Ptr: cur}); err != nil {
			return err
		}
		return driver.Download(counts, driver.Buffer{Ptr: cnt})
	})
	if err != nil {
		return nil, nil, err
	}
	roots := make([][]int64, t)
	handles := make([]int, t)
	e.base, e.size, e.tree = e.base[:0], e.size[:0], e.tree[:0]
	for k := range t {
		roots[k] = make([]int64, e.classes)
		for c := range roots[k] {
			roots[k][c] = int64(counts[k*e.classes+c])
		}
		handles[k] = k
		e.base = append(e.base, int64(k)*n)
		e.size = append(e.size, int32(cursor[k]))
		e.tree = append(e.tree, int32(k))
	}
	return roots, handles, nil
}

// Splits finds the best split of every task of a level.
func (e *grower) Splits(tasks []forest.Task) ([]forest.Split, error) {
	k := len(tasks)
	if k == 0 {
		return nil, nil
	}
	t0 := time.Now()
	e.levels++
	c := e.classes
	base := make([]int64, k)
	size := make([]int32, k)
	tree := make([]int32, k)
	feats := make([]int32, k*e.mtry)
	var tiny, small, big []int32
	for i, t := range tasks {
		base[i], size[i], tree[i] = e.base[t.Handle], e.size[t.Handle], e.tree[t.Handle]
		for j, f := range t.Feats {
			feats[i*e.mtry+j] = int32(f)
		}
		switch {
		case size[i] > smallRows:
			big = append(big, int32(i))
		case size[i] <= 32:
			tiny = append(tiny, int32(i))
		default:
			small = append(small, int32(i))
		}
	}
	ofeat := make([]int32, k)
	obin := make([]int32, k)
	oscore := make([]float64, k)
	oleft := make([]uint32, k*c)
	err := e.dev.Do(func() error {
		var st driver.Staging
		bp := st.Ptr(driver.Put(e.mem, "base", base))
		sp := st.Ptr(driver.Put(e.mem, "size", size))
		tp := st.Ptr(driver.Put(e.mem, "tree", tree))
		fp := st.Ptr(driver.Put(e.mem, "feats", feats))
		of := st.Buf(e.mem.Get("ofeat", uint64(k)*4))
		ob := st.Buf(e.mem.Get("obin", uint64(k)*4))
		osc := st.Buf(e.mem.Get("oscore", uint64(k)*8))
		ol := st.Buf(e.mem.Get("oleft", uint64(k*c)*4))
		if st.Err != nil {
			return st.Err
		}
		cells := uint64(e.nbins * c)
		// Histograms of all candidates at once when they fit in the
		// default 48 KiB of shared memory, else one candidate at a time.
		jn := 1
		if uint64(e.mtry)*(cells+uint64(c))*4 <= 48<<10 {
			jn = e.mtry
		}
		shared := uint32(uint64(jn) * (cells + uint64(c)) * 4)
		rows := e.rows[e.cur].Ptr
		e.mark("")
		split := func(list []int32, name string, big int32, gh uint64) error {
			lp := st.Ptr(driver.Put(e.mem, name, list))
			if st.Err != nil {
				return st.Err
			}
			return e.dev.LaunchGrid(0, "rf_split", [3]uint32{uint32(len(list)), 1, 1}, splitBlock, shared,
				e.codes.Ptr, int64(e.x.N), e.y.Ptr, e.w.Ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.nbins), int32(e.p.MinSamplesLeaf), int32(jn), lp, big, gh,
				of.Ptr, ob.Ptr, osc.Ptr, ol.Ptr)
		}
		if len(small) > 0 {
			if err := split(small, "small", 0, 0); err != nil {
				return err
			}
			e.mark("split small")
		}
		if len(tiny) > 0 {
			lp := st.Ptr(driver.Put(e.mem, "tiny", tiny))
			if st.Err != nil {
				return st.Err
			}
			// One warp per task.
			if err := e.dev.LaunchGrid(0, "rf_split_tiny", [3]uint32{uint32((len(tiny) + 3) / 4), 1, 1}, 128, 0,
				e.codes.Ptr, int64(e.x.N), e.y.Ptr, e.w.Ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.p.MinSamplesLeaf), lp, int32(len(tiny)),
				of.Ptr, ob.Ptr, osc.Ptr, ol.Ptr); err != nil {
				return err
			}
			e.mark("split tiny")
		}
		// Big tasks in groups whose global histograms fit in 1 GiB.
		per := uint64(e.mtry) * cells * 4
		group := max(1, int((1<<30)/per))
		for g0 := 0; g0 < len(big); g0 += group {
			g := big[g0:min(g0+group, len(big))]
			gh := st.Ptr(e.mem.Zeroed("gh", uint64(len(g))*per))
			var btask, boff, bslot []int32
			for s, i := range g {
				for off := int32(0); off < size[i]; off += histChunk {
					btask, boff, bslot = append(btask, i), append(boff, off), append(bslot, int32(s))
				}
			}
			bt := st.Ptr(driver.Put(e.mem, "btask", btask))
			bo := st.Ptr(driver.Put(e.mem, "boff", boff))
			bs := st.Ptr(driver.Put(e.mem, "bslot", bslot))
			if st.Err != nil {
				return st.Err
			}
			if err := e.dev.LaunchGrid(0, "rf_hist", [3]uint32{uint32(len(btask)), uint32(e.mtry / jn), 1}, 256, uint32(uint64(jn)*cells*4),
				e.codes.Ptr, int64(e.x.N), e.y.Ptr, e.w.Ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.nbins), int32(jn), bt, bo, bs, int32(histChunk), gh); err != nil {
				return err
			}
			e.mark("hist big")
			if err := split(g, "big", 1, gh); err != nil {
				return err
			}
			e.mark("split big")
		}
		if err := driver.Synchronize(); err != nil {
			return fmt.Errorf("gpu train: split kernels: %w", err)
		}
		for _, d := range []error{driver.Download(ofeat, of), driver.Download(obin, ob), driver.Download(oscore, osc), driver.Download(oleft, ol)} {
			if d != nil {
				return d
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]forest.Split, k)
	left := make([]int64, k*c)
	for i := range out {
		out[i] = forest.Split{Feature: int(ofeat[i]), Bin: uint8(obin[i]), Score: oscore[i]}
		if ofeat[i] >= 0 {
			out[i].Left = left[i*c : (i+1)*c : (i+1)*c]
			for j := range c {
				out[i].Left[j] = int64(oleft[i*c+j])
			}
		}
	}
	e.splitTime += time.Since(t0)
	return out, nil
}

// Partition moves each split task's rows into its children's ranges of
// the other row list, which becomes current.
func (e *grower) Partition(tasks []forest.Task, splits []forest.Split) ([][2]int, error) {
	t0 := time.Now()
	defer func() { e.partTime += time.Since(t0) }()
	k := len(tasks)
	base := make([]int64, k)
	size := make([]int32, k)
	feat := make([]int32, k)
	bin := make([]int32, k)
	var btask, boff []int32
	for i, t := range tasks {
		base[i], size[i] = e.base[t.Handle], e.size[t.Handle]
		feat[i], bin[i] = int32(splits[i].Feature), int32(splits[i].Bin)
		for off := int32(0); off < size[i]; off += partChunk {
			btask, boff = append(btask, int32(i)), append(boff, off)
		}
	}
	nleft := make([]uint32, k)
	err := e.dev.Do(func() error {
		var st driver.Staging
		bp := st.Ptr(driver.Put(e.mem, "pbase", base))
		sp := st.Ptr(driver.Put(e.mem, "psize", size))
		fp := st.Ptr(driver.Put(e.mem, "pfeat", feat))
		np := st.Ptr(driver.Put(e.mem, "pbin", bin))
		bt := st.Ptr(driver.Put(e.mem, "btask", btask))
		bo := st.Ptr(driver.Put(e.mem, "boff", boff))
		nl := st.Ptr(e.mem.Zeroed("nleft", uint64(k)*4))
		nr := st.Ptr(e.mem.Zeroed("nright", uint64(k)*4))
		if st.Err != nil {
			return st.Err
		}
		e.mark("")
		if len(btask) > 0 {
			if err := e.dev.LaunchGrid(0, "rf_partition", [3]uint32{uint32(len(btask)), 1, 1}, 256, 0,
				e.codes.Ptr, int64(e.x.N), e.rows[e.cur].Ptr, e.rows[1-e.cur].Ptr, bp, sp, fp, np, bt, bo,
				int32(partChunk), nl, nr); err != nil {
				return err
			}
		}
		if err := driver.Synchronize(); err != nil {
			return fmt.Errorf("gpu train: partition kernel: %w", err)
		}
		e.mark("partition")
		return driver.Download(nleft, driver.Buffer{Ptr: nl})
	})
	if err != nil {
		return nil, err
	}
	e.cur = 1 - e.cur
	children := make([][2]int, k)
	nb, ns, nt := make([]int64, 0, 2*k), make([]int32, 0, 2*k), make([]int32, 0, 2*k)
	for i, t := range tasks {
		l := int32(nleft[i])
		tr := e.tree[t.Handle]
		nb = append(nb, base[i], base[i]+int64(l))
		ns = append(ns, l, size[i]-l)
		nt = append(nt, tr, tr)
		children[i] = [2]int{2 * i, 2*i + 1}
	}
	e.base, e.size, e.tree = nb, ns, nt
	return children, nil
}
