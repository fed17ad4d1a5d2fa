package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

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
func Train(ctx context.Context, devs []*Device, x *forest.Binned, y []uint8, classes int, p forest.Params, logf func(format string, args ...any)) (*forest.Forest, error) {
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
	nbins := maxCode(x.Codes) + 1
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
			trees[k], imp[k], errs[k] = trainOn(ctx, devs[k], trainSet{x, y, classes, nbins}, p, ids, logf)
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
// indices y, the number of classes, and the bins a feature's codes take.
type trainSet struct {
	x              *forest.Binned
	y              []uint8
	classes, nbins int
}

// trainOn grows the trees ids on one device.
func trainOn(ctx context.Context, dev *Device, d trainSet, p forest.Params, ids []uint64, logf func(format string, args ...any)) ([]forest.Tree, [][]float64, error) {
	x, y, classes, nbins := d.x, d.y, d.classes, d.nbins
	e := &grower{dev: dev, x: x, classes: classes, p: p, mtry: p.Mtry(x.F), nbins: nbins, mem: pool{},
		profile: dev.opt.TrainProfile, prof: map[string]time.Duration{}}
	if err := dev.Do(func() error {
		var err error
		if e.codes, err = upload(x.Codes); err != nil {
			return fmt.Errorf("gpu train: upload %d×%d codes to GPU %d: %w", x.N, x.F, dev.Index, err)
		}
		if e.y, err = upload(y); err != nil {
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
	if dev.opt.maxBatch > 0 {
		batch = min(batch, dev.opt.maxBatch)
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
			if errors.Is(err, ErrorOutOfMemory) && n > 1 {
				batch = n / 2
				logf("gpu train: out of memory on GPU %d with %d trees at once; retrying with %d", dev.Index, n, batch)
				e.freeBatch()
				continue
			}
			return nil, nil, err
		}
		trees, imp = append(trees, tr...), append(imp, ti...)
		t0 += n
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
	dev     *Device
	x       *forest.Binned
	classes int
	p       forest.Params
	mtry    int
	nbins   int

	codes, y Buffer
	w        Buffer    // bootstrap weights, batch × N
	rows     [2]Buffer // the ping-pong row lists
	batch    int
	cur      int
	mem      pool

	base []int64
	size []int32
	tree []int32

	// Where the time goes, for the log: split and partition calls (host
	// tables, transfers and kernels) and levels grown.
	splitTime, partTime time.Duration
	levels              int
	// With Options.TrainProfile, kernels are waited for one group at a
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
	api.ctxSynchronize()
	now := time.Now()
	if name != "" {
		e.prof[name] += now.Sub(e.last)
	}
	e.last = now
}

func (e *grower) close() {
	e.dev.Do(func() error {
		e.freeBatchLocked()
		for _, b := range []Buffer{e.codes, e.y} {
			if b.ptr != 0 {
				b.free()
			}
		}
		e.mem.release()
		return nil
	})
}

func (e *grower) freeBatch() { e.dev.Do(func() error { e.freeBatchLocked(); return nil }) }

func (e *grower) freeBatchLocked() {
	for _, b := range []Buffer{e.w, e.rows[0], e.rows[1]} {
		if b.ptr != 0 {
			b.free()
		}
	}
	e.w, e.rows, e.batch = Buffer{}, [2]Buffer{}, 0
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
			if e.w, err = alloc(uint64(t) * uint64(n) * 4); err != nil {
				return fmt.Errorf("gpu train: weights for %d trees: %w", t, err)
			}
			for k := range e.rows {
				if e.rows[k], err = alloc(uint64(t) * uint64(n) * 4); err != nil {
					return fmt.Errorf("gpu train: row lists for %d trees: %w", t, err)
				}
			}
			e.batch = t
		}
		if err := check(api.memsetD32(e.w.ptr, 0, uint64(t)*uint64(n)), "cuMemsetD32 weights"); err != nil {
			return err
		}
		var st staging
		ids := st.ptr(put(e.mem, "trees", trees))
		if st.err != nil {
			return st.err
		}
		boot := int32(0)
		if e.p.Bootstrap {
			boot = 1
		}
		grid := uint32(min((int64(t)*n+255)/256, int64(e.dev.SMs*32)))
		if err := e.dev.launchGrid(0, "rf_boot", grid, 1, 256, 0, e.w.ptr, n, int32(t), e.p.Seed, ids, boot); err != nil {
			return err
		}
		cur := st.ptr(e.mem.zeroed("cursor", uint64(t)*4))
		cnt := st.ptr(e.mem.zeroed("rootcounts", uint64(t*e.classes)*8))
		if st.err != nil {
			return st.err
		}
		gx := uint32(min((n+255)/256, int64(e.dev.SMs*4)))
		if err := e.dev.launchGrid(0, "rf_root", gx, uint32(t), 256, 0, e.w.ptr, n, e.y.ptr, int32(e.classes), e.rows[0].ptr, cur, cnt); err != nil {
			return err
		}
		e.cur = 0
		if err := download(cursor, Buffer{ptr: cur}); err != nil {
			return err
		}
		return download(counts, Buffer{ptr: cnt})
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
		var st staging
		bp := st.ptr(put(e.mem, "base", base))
		sp := st.ptr(put(e.mem, "size", size))
		tp := st.ptr(put(e.mem, "tree", tree))
		fp := st.ptr(put(e.mem, "feats", feats))
		of := st.buf(e.mem.get("ofeat", uint64(k)*4))
		ob := st.buf(e.mem.get("obin", uint64(k)*4))
		osc := st.buf(e.mem.get("oscore", uint64(k)*8))
		ol := st.buf(e.mem.get("oleft", uint64(k*c)*4))
		if st.err != nil {
			return st.err
		}
		cells := uint64(e.nbins * c)
		// Histograms of all candidates at once when they fit in the
		// default 48 KiB of shared memory, else one candidate at a time.
		jn := 1
		if uint64(e.mtry)*(cells+uint64(c))*4 <= 48<<10 {
			jn = e.mtry
		}
		shared := uint32(uint64(jn) * (cells + uint64(c)) * 4)
		rows := e.rows[e.cur].ptr
		e.mark("")
		split := func(list []int32, name string, big int32, gh uint64) error {
			lp := st.ptr(put(e.mem, name, list))
			if st.err != nil {
				return st.err
			}
			return e.dev.launchGrid(0, "rf_split", uint32(len(list)), 1, splitBlock, shared,
				e.codes.ptr, int64(e.x.N), e.y.ptr, e.w.ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.nbins), int32(e.p.MinSamplesLeaf), int32(jn), lp, big, gh,
				of.ptr, ob.ptr, osc.ptr, ol.ptr)
		}
		if len(small) > 0 {
			if err := split(small, "small", 0, 0); err != nil {
				return err
			}
			e.mark("split small")
		}
		if len(tiny) > 0 {
			lp := st.ptr(put(e.mem, "tiny", tiny))
			if st.err != nil {
				return st.err
			}
			// One warp per task.
			if err := e.dev.launchGrid(0, "rf_split_tiny", uint32((len(tiny)+3)/4), 1, 128, 0,
				e.codes.ptr, int64(e.x.N), e.y.ptr, e.w.ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.p.MinSamplesLeaf), lp, int32(len(tiny)),
				of.ptr, ob.ptr, osc.ptr, ol.ptr); err != nil {
				return err
			}
			e.mark("split tiny")
		}
		// Big tasks in groups whose global histograms fit in 1 GiB.
		per := uint64(e.mtry) * cells * 4
		group := max(1, int((1<<30)/per))
		for g0 := 0; g0 < len(big); g0 += group {
			g := big[g0:min(g0+group, len(big))]
			gh := st.ptr(e.mem.zeroed("gh", uint64(len(g))*per))
			var btask, boff, bslot []int32
			for s, i := range g {
				for off := int32(0); off < size[i]; off += histChunk {
					btask, boff, bslot = append(btask, i), append(boff, off), append(bslot, int32(s))
				}
			}
			bt := st.ptr(put(e.mem, "btask", btask))
			bo := st.ptr(put(e.mem, "boff", boff))
			bs := st.ptr(put(e.mem, "bslot", bslot))
			if st.err != nil {
				return st.err
			}
			if err := e.dev.launchGrid(0, "rf_hist", uint32(len(btask)), uint32(e.mtry/jn), 256, uint32(uint64(jn)*cells*4),
				e.codes.ptr, int64(e.x.N), e.y.ptr, e.w.ptr, rows, bp, sp, tp, fp,
				int32(e.mtry), int32(c), int32(e.nbins), int32(jn), bt, bo, bs, int32(histChunk), gh); err != nil {
				return err
			}
			e.mark("hist big")
			if err := split(g, "big", 1, gh); err != nil {
				return err
			}
			e.mark("split big")
		}
		if err := check(api.ctxSynchronize(), "gpu train: split kernels"); err != nil {
			return err
		}
		for _, d := range []error{download(ofeat, of), download(obin, ob), download(oscore, osc), download(oleft, ol)} {
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
		var st staging
		bp := st.ptr(put(e.mem, "pbase", base))
		sp := st.ptr(put(e.mem, "psize", size))
		fp := st.ptr(put(e.mem, "pfeat", feat))
		np := st.ptr(put(e.mem, "pbin", bin))
		bt := st.ptr(put(e.mem, "btask", btask))
		bo := st.ptr(put(e.mem, "boff", boff))
		nl := st.ptr(e.mem.zeroed("nleft", uint64(k)*4))
		nr := st.ptr(e.mem.zeroed("nright", uint64(k)*4))
		if st.err != nil {
			return st.err
		}
		e.mark("")
		if len(btask) > 0 {
			if err := e.dev.launchGrid(0, "rf_partition", uint32(len(btask)), 1, 256, 0,
				e.codes.ptr, int64(e.x.N), e.rows[e.cur].ptr, e.rows[1-e.cur].ptr, bp, sp, fp, np, bt, bo,
				int32(partChunk), nl, nr); err != nil {
				return err
			}
		}
		if err := check(api.ctxSynchronize(), "gpu train: partition kernel"); err != nil {
			return err
		}
		e.mark("partition")
		return download(nleft, Buffer{ptr: nl})
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
